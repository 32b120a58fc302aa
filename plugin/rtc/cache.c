/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel cache: compiled entries shared in process, and cache files written atomically and checked on read.
 *
 * A cache file is a header, then the payload:
 *   0  magic "DLSKERN\0"            8 bytes
 *   8  format version (1)           u32 little-endian
 *  12  header size (96)             u32
 *  16  key (SHA-256)                32 bytes
 *  48  payload length               u64
 *  56  payload SHA-256              32 bytes
 *  88  reserved (0)                 8 bytes
 *  96  payload: u32 kind, u32 nlowered, u64 image size, the image, then per
 *      lowered name a u32 length and its bytes.
 * A file whose header, key, length or checksum disagrees is treated as
 * missing: the caller compiles again and replaces it. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "rtc/rtc_internal.h"

#define DLS__KC_MAGIC "DLSKERN"
#define DLS__KC_VERSION 1u
#define DLS__KC_HEADER 96u
#define DLS__KC_MAX_FILE (512u << 20) /* larger files are not ours */

static _Atomic uint64_t dls__rtc_stats[DLS__RTC_NSTATS];

void dls__rtc_count(int stat) { atomic_fetch_add_explicit(&dls__rtc_stats[stat], 1, memory_order_relaxed); }

/* ---- entries ---- */

dls__rtc_entry *dls__rtc_entry_new(uint32_t kind, const void *image, size_t size, const char *const *lowered,
                                   uint32_t nlowered) {
  size_t names = 0;
  for (uint32_t i = 0; i < nlowered; i++)
    names += strlen(lowered[i]) + 1;
  size_t head = sizeof(dls__rtc_entry) + nlowered * sizeof(char *);
  dls__rtc_entry *e = dls__malloc(head + size + names);
  if (e == NULL)
    return NULL;
  atomic_init(&e->refs, 1);
  e->kind = kind;
  e->size = size;
  e->lowered = (const char **)(e + 1);
  e->image = (uint8_t *)e + head;
  memcpy(e->image, image, size);
  char *p = (char *)e->image + size;
  e->nlowered = nlowered;
  for (uint32_t i = 0; i < nlowered; i++) {
    size_t n = strlen(lowered[i]) + 1;
    memcpy(p, lowered[i], n);
    e->lowered[i] = p;
    p += n;
  }
  return e;
}

void dls__rtc_entry_unref(dls__rtc_entry *e) {
  if (e != NULL && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
    dls__free(e);
}

/* ---- in process: a hash table with first-in first-out eviction ---- */

#define DLS__MC_BUCKETS 256
#define DLS__MC_MAX_ENTRIES 2048
#define DLS__MC_MAX_BYTES ((size_t)256 << 20)

typedef struct dls__mc_node {
  uint8_t key[32];
  dls__rtc_entry *e;
  struct dls__mc_node *next;           /* bucket chain */
  struct dls__mc_node *older, *newer;  /* insertion order */
} dls__mc_node;

static pthread_mutex_t dls__mc_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__mc_node *dls__mc_buckets[DLS__MC_BUCKETS];
static dls__mc_node *dls__mc_oldest, *dls__mc_newest;
static size_t dls__mc_count, dls__mc_bytes;

static dls__mc_node **dls__mc_slot(const uint8_t key[32]) {
  dls__mc_node **pp = &dls__mc_buckets[key[0]];
  while (*pp != NULL && memcmp((*pp)->key, key, 32) != 0)
    pp = &(*pp)->next;
  return pp;
}

static void dls__mc_remove(dls__mc_node *n) {
  dls__mc_node **pp = dls__mc_slot(n->key);
  *pp = n->next;
  if (n->older != NULL)
    n->older->newer = n->newer;
  else
    dls__mc_oldest = n->newer;
  if (n->newer != NULL)
    n->newer->older = n->older;
  else
    dls__mc_newest = n->older;
  dls__mc_count--;
  dls__mc_bytes -= n->e->size;
  dls__rtc_entry_unref(n->e);
  dls__free(n);
}

dls__rtc_entry *dls__rtc_memory_get(const uint8_t key[32]) {
  pthread_mutex_lock(&dls__mc_mu);
  dls__mc_node *n = *dls__mc_slot(key);
  dls__rtc_entry *e = NULL;
  if (n != NULL) {
    e = n->e;
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&dls__mc_mu);
  return e;
}

void dls__rtc_memory_put(const uint8_t key[32], dls__rtc_entry *e) {
  dls__mc_node *n = dls__malloc(sizeof *n);
  if (n == NULL)
    return; /* not cached: only slower */
  memcpy(n->key, key, 32);
  n->e = e;
  atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  pthread_mutex_lock(&dls__mc_mu);
  dls__mc_node **pp = dls__mc_slot(key);
  if (*pp != NULL)
    dls__mc_remove(*pp); /* two threads compiled the same source: keep the newer */
  n->next = dls__mc_buckets[key[0]];
  dls__mc_buckets[key[0]] = n;
  n->newer = NULL;
  n->older = dls__mc_newest;
  if (dls__mc_newest != NULL)
    dls__mc_newest->newer = n;
  else
    dls__mc_oldest = n;
  dls__mc_newest = n;
  dls__mc_count++;
  dls__mc_bytes += e->size;
  while (dls__mc_oldest != n && (dls__mc_count > DLS__MC_MAX_ENTRIES || dls__mc_bytes > DLS__MC_MAX_BYTES))
    dls__mc_remove(dls__mc_oldest);
  pthread_mutex_unlock(&dls__mc_mu);
}

dls_status_t dls_compile_cache_clear(void) {
  pthread_mutex_lock(&dls__mc_mu);
  while (dls__mc_oldest != NULL)
    dls__mc_remove(dls__mc_oldest);
  pthread_mutex_unlock(&dls__mc_mu);
  for (int i = 0; i < DLS__RTC_NSTATS; i++)
    atomic_store(&dls__rtc_stats[i], 0);
  return DLS_OK;
}

dls_status_t dls_compile_stats(dls_compile_stats_t *out_stats) {
  DLS__OUT("dls_compile_stats", out_stats);
  out_stats->memory_hits = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_MEMORY_HITS]);
  out_stats->disk_hits = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_DISK_HITS]);
  out_stats->compiles = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_COMPILES]);
  out_stats->disk_writes = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_DISK_WRITES]);
  out_stats->disk_corrupt = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_DISK_CORRUPT]);
  out_stats->disk_errors = atomic_load(&dls__rtc_stats[DLS__RTC_STAT_DISK_ERRORS]);
  return DLS_OK;
}

/* ---- on disk ---- */

bool dls__rtc_cache_dir(const char *explicit_dir, char *out, size_t size) {
  const char *dir = explicit_dir != NULL && explicit_dir[0] != '\0' ? explicit_dir : getenv("DLSTREAM_CACHE_DIR");
  int n;
  if (dir != NULL && dir[0] != '\0') {
    n = snprintf(out, size, "%s", dir);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg != NULL && xdg[0] == '/')
      n = snprintf(out, size, "%s/dlstream", xdg);
    else if (home != NULL && home[0] != '\0')
      n = snprintf(out, size, "%s/.cache/dlstream", home);
    else
      return false;
  }
  return n > 0 && (size_t)n < size - 80; /* room for "/<64 hex>.bin" and temporary names */
}

/* mkdir -p, private to the user where it makes folders. */
static bool dls__rtc_mkdirs(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path)
    return false;
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0')
      continue;
    char c = path[i];
    path[i] = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      return false;
    path[i] = c;
  }
  return true;
}

static void dls__rtc_file_name(const char *dir, const uint8_t key[32], char *out, size_t size) {
  char hex[65];
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", key[i]);
  snprintf(out, size, "%s/%s.bin", dir, hex);
}

static void dls__put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void dls__put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t dls__get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t dls__get_u64(const uint8_t *p) { return dls__get_u32(p) | (uint64_t)dls__get_u32(p + 4) << 32; }

/* Parses a payload; NULL when it does not hold together. */
static dls__rtc_entry *dls__rtc_payload_parse(const uint8_t *p, size_t n) {
  if (n < 16)
    return NULL;
  uint32_t kind = dls__get_u32(p), nlowered = dls__get_u32(p + 4);
  uint64_t size = dls__get_u64(p + 8);
  if (kind < DLS__RTC_KIND_CUBIN || kind > DLS__RTC_KIND_HSACO || size == 0 || size > n - 16 || nlowered > 4096)
    return NULL;
  const uint8_t *image = p + 16, *q = image + size, *end = p + n;
  const char **names = nlowered ? dls__calloc(nlowered, sizeof *names) : NULL;
  char *copies = nlowered ? dls__malloc((size_t)(end - q) + nlowered) : NULL;
  dls__rtc_entry *e = NULL;
  if (nlowered != 0 && (names == NULL || copies == NULL))
    goto out;
  char *c = copies;
  for (uint32_t i = 0; i < nlowered; i++) {
    if (end - q < 4)
      goto out;
    uint32_t len = dls__get_u32(q);
    q += 4;
    if ((uint64_t)(end - q) < len || memchr(q, '\0', len) != NULL)
      goto out;
    memcpy(c, q, len);
    c[len] = '\0';
    names[i] = c;
    c += len + 1;
    q += len;
  }
  if (q == end)
    e = dls__rtc_entry_new(kind, image, (size_t)size, names, nlowered);
out:
  dls__free(names);
  dls__free(copies);
  return e;
}

dls__rtc_entry *dls__rtc_disk_get(const char *dir, const uint8_t key[32]) {
  char path[4200];
  dls__rtc_file_name(dir, key, path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      dls__rtc_count(DLS__RTC_STAT_DISK_ERRORS);
    return NULL;
  }
  struct stat sb;
  uint8_t *buf = NULL;
  dls__rtc_entry *e = NULL;
  bool corrupt = true;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    corrupt = false;
    dls__rtc_count(DLS__RTC_STAT_DISK_ERRORS);
    goto out;
  }
  if (sb.st_size < (off_t)DLS__KC_HEADER || sb.st_size > (off_t)DLS__KC_MAX_FILE)
    goto out;
  size_t n = (size_t)sb.st_size, got = 0;
  if ((buf = dls__malloc(n)) == NULL) {
    corrupt = false;
    goto out;
  }
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  if (got != n || memcmp(buf, DLS__KC_MAGIC, 8) != 0 || dls__get_u32(buf + 8) != DLS__KC_VERSION ||
      dls__get_u32(buf + 12) != DLS__KC_HEADER || memcmp(buf + 16, key, 32) != 0 ||
      dls__get_u64(buf + 48) != n - DLS__KC_HEADER)
    goto out;
  uint8_t sum[32];
  dls__sha256 s;
  dls__sha256_init(&s);
  dls__sha256_update(&s, buf + DLS__KC_HEADER, n - DLS__KC_HEADER);
  dls__sha256_final(&s, sum);
  if (memcmp(sum, buf + 56, 32) != 0)
    goto out;
  e = dls__rtc_payload_parse(buf + DLS__KC_HEADER, n - DLS__KC_HEADER);
out:
  if (e == NULL && corrupt)
    dls__rtc_count(DLS__RTC_STAT_DISK_CORRUPT);
  dls__free(buf);
  close(fd);
  return e;
}

static bool dls__rtc_write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

void dls__rtc_disk_put(const char *dir, const uint8_t key[32], const dls__rtc_entry *e) {
  size_t payload = 16 + e->size;
  for (uint32_t i = 0; i < e->nlowered; i++)
    payload += 4 + strlen(e->lowered[i]);
  uint8_t *buf = dls__malloc(DLS__KC_HEADER + payload);
  if (buf == NULL)
    return;
  uint8_t *p = buf + DLS__KC_HEADER;
  dls__put_u32(p, e->kind);
  dls__put_u32(p + 4, e->nlowered);
  dls__put_u64(p + 8, e->size);
  memcpy(p + 16, e->image, e->size);
  p += 16 + e->size;
  for (uint32_t i = 0; i < e->nlowered; i++) {
    uint32_t len = (uint32_t)strlen(e->lowered[i]);
    dls__put_u32(p, len);
    memcpy(p + 4, e->lowered[i], len);
    p += 4 + len;
  }
  memset(buf, 0, DLS__KC_HEADER);
  memcpy(buf, DLS__KC_MAGIC, 8);
  dls__put_u32(buf + 8, DLS__KC_VERSION);
  dls__put_u32(buf + 12, DLS__KC_HEADER);
  memcpy(buf + 16, key, 32);
  dls__put_u64(buf + 48, payload);
  dls__sha256 s;
  dls__sha256_init(&s);
  dls__sha256_update(&s, buf + DLS__KC_HEADER, payload);
  dls__sha256_final(&s, buf + 56);

  /* A temporary in the same folder (so rename is atomic), unique to this
   * process and call: concurrent writers of one key each rename a whole file. */
  char path[4200], tmp[4300];
  dls__rtc_file_name(dir, key, path, sizeof path);
  static _Atomic unsigned seq;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%u-%ld", path, (long)getpid(), atomic_fetch_add(&seq, 1), (long)ts.tv_nsec);
  bool ok = false;
  int fd = -1;
  if (dls__rtc_mkdirs(dir) && (fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
    ok = dls__rtc_write_all(fd, buf, DLS__KC_HEADER + payload);
    ok = close(fd) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok)
      unlink(tmp);
  }
  dls__rtc_count(ok ? DLS__RTC_STAT_DISK_WRITES : DLS__RTC_STAT_DISK_ERRORS);
  dls__free(buf);
}
