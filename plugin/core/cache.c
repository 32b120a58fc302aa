/* SPDX-License-Identifier: Apache-2.0 */
/* The caching allocator: blocks of eager memory freed on a stream, kept per stream in size classes; their reuse on
 * that stream, their handover to another one after its wait, trims, the limit, and the public calls.
 *
 * A free puts its block in the cache of its stream (the buffer's allocation stream, which the deallocation rule
 * already made wait for every other use): the block is then free from that point of the stream's order on, so work
 * queued there later may use it at once, and an allocation on that stream takes it back without a driver call.
 * Another stream gets it only after waiting, on the device, for the block's stream: its mark recorded then covers
 * the free and the waits before it. Captures never see a cached block: an allocation in a capture goes to the
 * driver (its graph's memory), graph memory never comes here, and a stream capturing now neither hands its blocks
 * over (the mark would be recorded in its capture) nor gives them back. Each stream's bins have a spinlock of
 * their own (the hot path takes nothing else); whatever crosses streams (a handover, a trim, the end of a stream
 * object) holds the device's mutex, so a stream found in a walk cannot finish its release meanwhile. */
#include <ctype.h>
#include <stdlib.h>

#include "core/cache.h"

/* Size classes: up to 512 bytes one class, then four per doubling up to 2^40 bytes (a block is at most a quarter
 * larger than asked for); larger requests are not cached. */
enum { CLASS_MIN_SHIFT = 9, CLASS_MAX_SHIFT = 40, CLASS_STEPS = 4 };
#define NCLASS (1 + (CLASS_MAX_SHIFT - CLASS_MIN_SHIFT) * CLASS_STEPS)
#define DEFAULT_LIMIT ((size_t)1 << 30) /* bytes a device keeps idle unless DLSTREAM_CACHE_LIMIT says otherwise */

/* The size class of `size` bytes, -1 when it is not cached (0 bytes, or more than the largest class). */
static inline int class_of(size_t size) {
  if (size <= ((size_t)1 << CLASS_MIN_SHIFT))
    return size == 0 ? -1 : 0;
  if (size > ((size_t)1 << CLASS_MAX_SHIFT))
    return -1;
  int k = 63 - __builtin_clzll((unsigned long long)(size - 1)); /* 2^k < size <= 2^(k+1) */
  int j = (int)((size - 1 - ((size_t)1 << k)) >> (k - 2)) + 1;   /* steps of 2^(k-2): 1..4 */
  return (k - CLASS_MIN_SHIFT) * CLASS_STEPS + j;
}

static inline size_t class_size(int c) {
  if (c == 0)
    return (size_t)1 << CLASS_MIN_SHIFT;
  int k = CLASS_MIN_SHIFT + (c - 1) / CLASS_STEPS, j = (c - 1) % CLASS_STEPS + 1;
  return ((size_t)1 << k) + (size_t)j * ((size_t)1 << (k - 2));
}

typedef struct cache_bin {
  void **ptrs; /* the blocks, the latest freed last (taken first: the most likely still in the driver's caches) */
  uint32_t n, cap;
} cache_bin;

typedef struct dls__stream_cache {
  dls__spin mu;      /* the bins and the count */
  uint32_t nblocks;  /* in all bins */
  bool orphan;       /* the stream object was released while it captured: this cache holds it (a reference) until
                        a trim gives its blocks back (dev->mu) */
  cache_bin bins[NCLASS];
} dls__stream_cache;

/* ---- the device's state ---- */

/* DLSTREAM_CACHE_LIMIT: a byte count, optionally followed by K, M, G or T (powers of 1024). */
static bool parse_limit(const char *v, size_t *out) {
  char *end = NULL;
  if (v == NULL || !isdigit((unsigned char)v[0]))
    return false;
  unsigned long long n = strtoull(v, &end, 10);
  int shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  case '\0': break;
  default: return false;
  }
  if (shift != 0 && (*++end != '\0' || n > (SIZE_MAX >> shift)))
    return false;
  *out = (size_t)n << shift;
  return true;
}

static bool env_on(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
}

/* The device's first use of the cache reads the environment. */
static DLS__COLD dls_status_t cache_start(dls__device *dev, int *out_state) {
  const char *v = getenv("DLSTREAM_CACHE_LIMIT");
  size_t limit = DEFAULT_LIMIT;
  if (v != NULL && !parse_limit(v, &limit))
    return dls__fail(DLS_ERR_INVALID_ARGUMENT,
                     "DLSTREAM_CACHE_LIMIT=\"%s\": not a byte count (digits, optionally followed by K, M, G or T; 0 "
                     "turns the cache off)",
                     v);
  pthread_mutex_lock(&dev->mu);
  if (atomic_load_explicit(&dev->cache_state, memory_order_relaxed) == 0) {
    atomic_store_explicit(&dev->cache_limit, limit, memory_order_relaxed);
    dev->cache_no_wait = env_on("DLSTREAM_TEST_CACHE_NO_WAIT");
    atomic_store_explicit(&dev->cache_state, env_on("DLSTREAM_DEBUG_ALLOC") ? DLS__CACHE_OFF : DLS__CACHE_ON,
                          memory_order_release);
  }
  pthread_mutex_unlock(&dev->mu);
  *out_state = atomic_load_explicit(&dev->cache_state, memory_order_acquire);
  return DLS_OK;
}

/* ---- one stream's bins ---- */

static inline void *bin_pop(dls__device *dev, dls__stream_cache *sc, int c) {
  void *p = NULL;
  dls__spin_lock(&sc->mu);
  cache_bin *bin = &sc->bins[c];
  if (bin->n > 0) {
    p = bin->ptrs[--bin->n];
    sc->nblocks--;
  }
  dls__spin_unlock(&sc->mu);
  if (p != NULL)
    atomic_fetch_sub_explicit(&dev->cache_bytes, class_size(c), memory_order_relaxed);
  return p;
}

static bool bin_has(dls__stream_cache *sc, int c) {
  dls__spin_lock(&sc->mu);
  bool has = sc->bins[c].n > 0;
  dls__spin_unlock(&sc->mu);
  return has;
}

static bool bin_has_any(dls__stream_cache *sc) {
  dls__spin_lock(&sc->mu);
  bool has = sc->nblocks > 0;
  dls__spin_unlock(&sc->mu);
  return has;
}

static bool cache_gone(dls__stream *s, bool release);

/* The stream's cache, made at its first free (NULL when out of host memory). */
static DLS__COLD dls__stream_cache *cache_make(dls__stream *s) {
  dls__stream_cache *sc = dls__calloc(1, sizeof *sc);
  if (sc == NULL)
    return NULL;
  dls__stream_cache *none = NULL;
  if (!atomic_compare_exchange_strong_explicit(&s->cache, &none, sc, memory_order_acq_rel, memory_order_acquire)) {
    dls__free(sc); /* another thread's free made it first */
    return none;
  }
  s->cache_gone = cache_gone; /* read by the stream's release only, after this thread let go of its reference */
  return sc;
}

static void cache_free(dls__stream_cache *sc) {
  for (int c = 0; c < NCLASS; c++)
    dls__free(sc->bins[c].ptrs);
  dls__free(sc);
}

/* Whether `t`'s blocks may be given back or handed over now: it does not capture (its order is eager), and on the
 * legacy stream no capture is known on the device (a legacy-stream call would invalidate it; a foreign one over
 * and not yet forgotten counts: conservative). In a pin; dev->mu may be held, so nothing here releases a stream. */
static bool eager_now(dls__stream *t) {
  uint64_t cap;
  if (dls__stream_capture(t, &cap) != DLS__CAPTURE_NONE)
    return false;
  return !dls__stream_legacy(t) || atomic_load_explicit(&t->dev->captures, memory_order_acquire) == 0;
}

/* Gives `t`'s blocks back to the driver in its order, when it is eager now; returns the bytes. */
static size_t flush(dls__stream *t, dls__stream_cache *sc) {
  dls__device *dev = t->dev;
  size_t bytes = 0;
  dls__capture_pin();
  if (eager_now(t)) {
    for (int c = 0; c < NCLASS; c++) {
      void *p;
      while ((p = bin_pop(dev, sc, c)) != NULL) {
        dls__mem_free(dev, p, t);
        bytes += class_size(c);
      }
    }
  }
  dls__capture_unpin();
  return bytes;
}

/* The stream object is going (its release, no reference left; `release` false: a foreign stream's handle ended):
 * its blocks go back to the driver in its order, while its native stream is still there. While it captures that
 * cannot be: at a release the cache keeps the object (one reference) and a later trim gives the blocks back and
 * lets it go; at a handle's end they wait for the release. */
static bool cache_gone(dls__stream *s, bool release) {
  dls__device *dev = s->dev;
  dls__stream_cache *sc = atomic_load_explicit(&s->cache, memory_order_acquire);
  bool empty = !bin_has_any(sc);
  if (!empty) {
    (void)flush(s, sc);
    empty = !bin_has_any(sc);
  }
  if (!release)
    return true;
  pthread_mutex_lock(&dev->mu);
  if (!empty) {
    sc->orphan = true;
    atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
  } else {
    atomic_store_explicit(&s->cache, NULL, memory_order_release);
  }
  pthread_mutex_unlock(&dev->mu);
  if (!empty)
    return false;
  cache_free(sc);
  return true;
}

/* ---- across the streams of a device (dev->mu held) ---- */

/* Walks the streams of a device that may hold a cache: its default streams, then its live ones. *k = 0 to start. */
static dls__stream *walk(dls__device *dev, dls__stream *t, int *k) {
  if (*k > DLS_STREAM_PER_THREAD)
    return t->live_next;
  while (++*k <= DLS_STREAM_PER_THREAD)
    if (dev->defaults[*k] != NULL)
      return dev->defaults[*k];
  return dev->live;
}

/* A block of class `c` from `t`'s cache, for `s`, which now waits on the device for `t`'s work so far (the free
 * included); NULL when `t` cannot hand one over now. In `s`'s pin, dev->mu held. */
static void *handover(dls__stream *s, dls__stream *t, dls__stream_cache *sc, int c) {
  dls__device *dev = s->dev;
  bool same = dls__same_stream(s, t); /* two objects of one native stream: one order */
  if (!same && !eager_now(t))
    return NULL; /* recorded now, its mark would land in its capture */
  void *p = bin_pop(dev, sc, c);
  if (p == NULL || same || dev->cache_no_wait)
    return p;
  const dls__backend *be = dev->be;
  void *mark;
  if (dls__stream_mark(t, &mark) == DLS_OK && be->event_record(be, dev->id, mark, t->native) == DLS_OK &&
      be->stream_wait_event(be, dev->id, s->native, mark) == DLS_OK)
    return p;
  dls__mem_free(dev, p, t); /* not ordered: the block goes back to the driver in `t`'s order */
  return NULL;
}

/* A block of class `c` that another stream freed, handed over to `s`; NULL: none. */
static void *steal(dls__stream *s, int c) {
  dls__device *dev = s->dev;
  if (atomic_load_explicit(&dev->cache_bytes, memory_order_relaxed) < class_size(c))
    return NULL;
  void *p = NULL;
  pthread_mutex_lock(&dev->mu);
  int k = 0;
  for (dls__stream *t = walk(dev, NULL, &k); t != NULL && p == NULL; t = walk(dev, t, &k)) {
    dls__stream_cache *sc = atomic_load_explicit(&t->cache, memory_order_acquire);
    if (t != s && sc != NULL && !sc->orphan && bin_has(sc, c))
      p = handover(s, t, sc, c);
  }
  pthread_mutex_unlock(&dev->mu);
  return p;
}

/* Lets go of the stream objects caches kept through a capture, once their blocks went back (outside any pin). */
static void release_orphans(dls__device *dev) {
  for (;;) {
    dls__stream *found = NULL;
    pthread_mutex_lock(&dev->mu);
    int k = 0;
    for (dls__stream *t = walk(dev, NULL, &k); t != NULL && found == NULL; t = walk(dev, t, &k)) {
      dls__stream_cache *sc = atomic_load_explicit(&t->cache, memory_order_acquire);
      if (sc != NULL && sc->orphan && !bin_has_any(sc)) {
        sc->orphan = false;
        found = t;
      }
    }
    pthread_mutex_unlock(&dev->mu);
    if (found == NULL)
      return;
    dls__stream_unref(found); /* the cache's reference: the release runs again, its cache empty */
  }
}

size_t dls__cache_trim(dls__device *dev, bool orphans) {
  size_t bytes = 0;
  dls__capture_pin(); /* before the mutex: a pin may wait for a capture's change, which may need the mutex */
  pthread_mutex_lock(&dev->mu);
  int k = 0;
  for (dls__stream *t = walk(dev, NULL, &k); t != NULL; t = walk(dev, t, &k)) {
    dls__stream_cache *sc = atomic_load_explicit(&t->cache, memory_order_acquire);
    if (sc != NULL && bin_has_any(sc))
      bytes += flush(t, sc);
  }
  pthread_mutex_unlock(&dev->mu);
  dls__capture_unpin();
  if (orphans)
    release_orphans(dev);
  return bytes;
}

/* ---- allocation and free ---- */

dls_status_t dls__cache_alloc_driver(dls__stream *s, size_t size, void **out_ptr) {
  dls_status_t st = dls__mem_alloc(s, size, out_ptr);
  if (DLS__UNLIKELY(st == DLS_ERR_OUT_OF_MEMORY) && dls__cache_trim(s->dev, false) > 0)
    st = dls__mem_alloc(s, size, out_ptr); /* once more, with what the cache held given back */
  return st;
}

dls_status_t dls__cache_alloc(dls__stream *s, size_t size, void **out_ptr, bool *out_cached) {
  dls__device *dev = s->dev;
  *out_cached = false;
  int state = atomic_load_explicit(&dev->cache_state, memory_order_acquire);
  if (DLS__UNLIKELY(state == 0))
    DLS__TRY(cache_start(dev, &state));
  if (DLS__UNLIKELY(state != DLS__CACHE_ON || atomic_load_explicit(&dev->cache_limit, memory_order_relaxed) == 0))
    return dls__cache_alloc_driver(s, size, out_ptr);
  int c = class_of(size);
  if (DLS__UNLIKELY(c < 0))
    return dls__cache_alloc_driver(s, size, out_ptr);
  dls__stream_cache *sc = atomic_load_explicit(&s->cache, memory_order_acquire);
  void *p = sc != NULL ? bin_pop(dev, sc, c) : NULL;
  if (DLS__UNLIKELY(p == NULL) && (p = steal(s, c)) == NULL)
    DLS__TRY(dls__cache_alloc_driver(s, class_size(c), &p));
  *out_ptr = p;
  *out_cached = true;
  return DLS_OK;
}

bool dls__cache_put(dls__stream *s, void *ptr, size_t size) {
  dls__device *dev = s->dev;
  int c = class_of(size);
  if (DLS__UNLIKELY(c < 0 || atomic_load_explicit(&dev->cache_state, memory_order_relaxed) != DLS__CACHE_ON ||
                    atomic_load_explicit(&s->cache_off, memory_order_relaxed)))
    return false;
  size_t csize = class_size(c);
  size_t limit = atomic_load_explicit(&dev->cache_limit, memory_order_relaxed);
  if (DLS__UNLIKELY(atomic_fetch_add_explicit(&dev->cache_bytes, csize, memory_order_relaxed) + csize > limit)) {
    atomic_fetch_sub_explicit(&dev->cache_bytes, csize, memory_order_relaxed);
    return false;
  }
  dls__stream_cache *sc = atomic_load_explicit(&s->cache, memory_order_acquire);
  bool kept = false;
  if (DLS__LIKELY(sc != NULL) || (sc = cache_make(s)) != NULL) {
    dls__spin_lock(&sc->mu);
    cache_bin *bin = &sc->bins[c];
    if (DLS__UNLIKELY(bin->n == bin->cap)) {
      uint32_t cap = bin->cap != 0 ? 2 * bin->cap : 8;
      void **ptrs = dls__realloc(bin->ptrs, cap * sizeof *ptrs);
      if (ptrs != NULL) {
        bin->ptrs = ptrs;
        bin->cap = cap;
      }
    }
    if (DLS__LIKELY(bin->n < bin->cap)) {
      bin->ptrs[bin->n++] = ptr;
      sc->nblocks++;
      kept = true;
    }
    dls__spin_unlock(&sc->mu);
  }
  if (DLS__UNLIKELY(!kept))
    atomic_fetch_sub_explicit(&dev->cache_bytes, csize, memory_order_relaxed);
  return kept;
}

/* ---- the end ---- */

/* Gives back what a device's caches hold and forgets them (streams that outlive the runtime keep none). */
static void cache_end(dls__device *dev) {
  (void)dls__cache_trim(dev, true);
  pthread_mutex_lock(&dev->mu);
  int k = 0;
  for (dls__stream *t = walk(dev, NULL, &k); t != NULL; t = walk(dev, t, &k)) {
    dls__stream_cache *sc = atomic_load_explicit(&t->cache, memory_order_acquire);
    if (sc != NULL) {
      atomic_store_explicit(&t->cache, NULL, memory_order_release);
      cache_free(sc); /* blocks of a stream still capturing (another framework's capture) are lost with it */
    }
  }
  atomic_store_explicit(&dev->cache_bytes, 0, memory_order_relaxed);
  pthread_mutex_unlock(&dev->mu);
}

void dls__caches_shutdown(void) { dls__each_device(cache_end); }

/* ---- public API ---- */

dls_status_t dls_device_trim(DLDevice device, size_t *opt_out_bytes) {
  static const char call[] = "dls_device_trim";
  DLS__ENTER(call);
  if (opt_out_bytes != NULL)
    *opt_out_bytes = 0;
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  size_t bytes = dls__cache_trim(dev, true);
  if (opt_out_bytes != NULL)
    *opt_out_bytes = bytes;
  return DLS_OK;
}

dls_status_t dls_device_set_cache_limit(DLDevice device, size_t bytes) {
  static const char call[] = "dls_device_set_cache_limit";
  DLS__ENTER(call);
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  int state = atomic_load_explicit(&dev->cache_state, memory_order_acquire);
  if (state == 0 && (st = cache_start(dev, &state)) != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  atomic_store_explicit(&dev->cache_limit, bytes, memory_order_relaxed);
  if (atomic_load_explicit(&dev->cache_bytes, memory_order_relaxed) > bytes)
    (void)dls__cache_trim(dev, true);
  return DLS_OK;
}

dls_status_t dls_device_cached_bytes(DLDevice device, size_t *out_bytes) {
  static const char call[] = "dls_device_cached_bytes";
  DLS__ENTER(call);
  DLS__OUT(call, out_bytes);
  *out_bytes = 0;
  dls_status_t st;
  dls__device *dev = dls__device_get(device, call, &st);
  if (dev == NULL)
    return st;
  *out_bytes = atomic_load_explicit(&dev->cache_bytes, memory_order_relaxed);
  return DLS_OK;
}
