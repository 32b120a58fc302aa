/* SPDX-License-Identifier: Apache-2.0 */
/* The CPython extension's boundary: the library's internal entries that interop/python may call, each with its
 * contract. The extension includes the public headers and this file, nothing else of the library; ext_*.c
 * implement the entries over the core (plugin/core) and the DLPack layer (interop/dlpack), and check that every
 * constant and layout written again here matches the original.
 *
 * Words, as in the public headers: *borrowed* (valid for the call), *holds* (a reference the caller must drop with
 * the entry named), *no hold* (the object stays valid only while nothing can end it: the caller holds the GIL,
 * runs no Python code and releases nothing until it is done with it). Every entry may be called from any thread;
 * the extension calls them with the GIL held. An entry that fails returns a dls_status_t and sets the thread-local
 * message (dls_last_error()) unless it says otherwise. */
#ifndef DLSTREAM_EXT_H
#define DLSTREAM_EXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlstream/dlstream.h"

/* The library's variables that the extension reads inline are hidden there, as in the library (the extension links
 * the static library): a read is one load relative to the instruction pointer, with no address to look up first. */
#define DLS__EXT_HIDDEN __attribute__((visibility("hidden")))

/* ---------------------------------------------------------------- the runtime */

/* The runtime's state: 0 not initialized, 1 ready, 2 a child after fork(). Read only (inline: every call of the
 * extension asks). */
DLS__EXT_HIDDEN extern _Atomic int dls__state;
static inline bool dls__ext_ready(void) { return atomic_load_explicit(&dls__state, memory_order_acquire) == 1; }
/* What every public call does when the state is not 1: initializes the runtime, or refuses use after fork() with
 * a message naming `call`. */
dls_status_t dls__enter_slow(const char *call);
/* Exported tensors whose deleter has not run yet: dls_shutdown() would wait for their streams. */
size_t dls__ext_exports_live(void);

/* The hazard rule's switch (set from DLSTREAM_TEST_NO_HAZARDS at start-up; tests turn it with
 * dls__ext_hazards_set): while it is off, no stream waits for another's earlier use of a buffer or tensor. Read
 * inline: every call that ordered after a framework stream asks. */
DLS__EXT_HIDDEN extern _Atomic bool dls__hazards_off;
static inline bool dls__ext_hazards_on(void) {
  return !atomic_load_explicit(&dls__hazards_off, memory_order_relaxed);
}
/* Turns the rule on or off (tests only); returns whether it was on. */
static inline bool dls__ext_hazards_set(bool on) { return !atomic_exchange(&dls__hazards_off, !on); }

/* Largest ndim a tensor may have (DLPack validation's limit). */
#define DLS__EXT_MAX_NDIM 32

/* ---------------------------------------------------------------- streams */

/* The core's stream object, opaque. The extension holds one with dls__ext_stream_ref (dropped with
 * dls__ext_stream_unref) whenever Python code may run while it uses it: Python code can end any handle. */
typedef struct dls__stream dls__stream;

/* The stream a handle names, reserved default-stream handles included; NULL with *out_status and a message naming
 * `call` and `arg` when it is not live. No hold. */
dls__stream *dls__ext_stream(dls_stream_t stream, const char *call, const char *arg, dls_status_t *out_status);
/* Takes and drops a reference (no-ops on default streams: they live as long as their device). The last drop
 * releases the native stream by its kind. */
void dls__ext_stream_ref(dls__stream *s);
void dls__ext_stream_unref(dls__stream *s);
/* The device of `s`. */
DLDevice dls__ext_stream_device(const dls__stream *s);
/* Whether two streams are one stream: one object, or two wrappers of one native stream. */
bool dls__ext_stream_same(const dls__stream *a, const dls__stream *b);
/* Whether `s` is capturing now, as the driver sees it (*out_id: the capture's id). */
bool dls__ext_stream_capturing(dls__stream *s, uint64_t *out_id);
/* Makes `waiter` wait, on the device, for all work queued on `target` so far. */
dls_status_t dls__stream_order(dls__stream *waiter, dls__stream *target);
/* A handle naming `s` for public calls: its reserved handle (a default stream), its own handle while that is live,
 * else a new one (*out_temp its id, else 0). A new handle takes over one reference the caller holds on `s`:
 * dls__ext_stream_temp_end ends it and drops that reference. */
dls_status_t dls__ext_stream_handle(dls__stream *s, dls_stream_t *out, uint64_t *out_temp);
void dls__ext_stream_temp_end(uint64_t temp);

/* Makes foreign stream `s` keep what keeps its native stream alive (a framework's stream object): `release(data)`
 * runs once the stream object goes, after every buffer and use that names it (any thread; it takes the GIL itself).
 * On a stream that is not foreign, or that keeps something already, runs it at once. */
void dls__ext_stream_keep(dls__stream *s, dls_release_fn release, void *user_data);

/* Frees on `s` go to the driver, never into the caching allocator (core/cache.c): for a wrap of a framework's
 * stream the extension does not keep alive, which the framework may destroy while the wrap lives. */
void dls__ext_stream_uncached(dls__stream *s);

/* Runs `release(user_data)` once the work queued on `s` so far has passed (at once when it has; else from a later
 * call, on any thread, through the deferred queue). Cannot fail: without memory for the record it waits for `s`
 * first. The release must take the GIL itself. */
void dls__ext_release_after(dls__stream *s, dls_release_fn release, void *user_data);
/* The same where `marked` (NULL: none) is a mark dls__ext_uses_note recorded on `s` after the work (*out_marked):
 * no other record is made for the release. */
void dls__ext_release_marked(dls__stream *s, const void *marked, dls_release_fn release, void *user_data);

/* A pooled event recorded on a stream: what a host wait polls. */
typedef struct dls__ext_mark {
  struct dls__device *dev;
  void *event;
} dls__ext_mark;
/* Records a pooled event on `s`; dls__ext_mark_end returns the event to the pool (also while a record is pending). */
dls_status_t dls__ext_mark_record(dls__stream *s, dls__ext_mark *out);
/* Whether the work before the mark has completed, asked in relaxed capture mode (a capture that another thread
 * runs in global mode, one dlstream may never have seen, is not invalidated by the query). */
dls_status_t dls__ext_mark_query(const dls__ext_mark *m, int *out_done);
void dls__ext_mark_end(dls__ext_mark *m);
/* dls_event_query and dls_stream_query in relaxed capture mode on `device` (a device not open yet has no capture
 * to mind). */
dls_status_t dls__ext_event_query_relaxed(dls_event_t event, DLDevice device, int *out_done);
dls_status_t dls__ext_stream_query_relaxed(dls_stream_t stream, DLDevice device, int *out_idle);

/* ---------------------------------------------------------------- memory */

/* The core's buffer object, opaque: memory freed in stream order when its last reference goes. */
typedef struct dls__buffer dls__buffer;
void dls__ext_buffer_ref(dls__buffer *b);
/* Drops a reference; the last one frees (or releases a borrowed buffer) in stream order. */
void dls__buffer_unref(dls__buffer *b);
/* One use of `b` on `s` by work queued there (mode DLS_ACCESS_READ / WRITE): with `order`, `s` first waits for
 * what the use must follow (the hazard rule); without, work already queued is only noted. */
dls_status_t dls__buffer_access(dls__buffer *b, dls__stream *s, int mode, bool order);

/* The same in two steps, for work queued in between through raw pointers: dls__ext_use_order makes `s` wait for what
 * a use of `mode` must follow, notes nothing, and gives the state's epoch; once the work is queued,
 * dls__ext_uses_note notes the uses of `n` buffers ordered so on `s` in one pass (one event recorded for all). A
 * buffer whose state another use changed in between is noted as a declared use (never dropping an ordering). */
#define DLS__EXT_ACCESS_DECLARED 4 /* a mode bit of dls__ext_uses_note: work that was not ordered first */
dls_status_t dls__ext_use_order(dls__buffer *b, dls__stream *s, int mode, uint32_t *out_epoch);
/* A use dls__ext_use_order ordered whose work was not queued after all (before its buffer is let go of). */
void dls__ext_use_unordered(dls__buffer *b, uint32_t epoch);
/* *out_marked: `s`'s mark where the notes recorded it eagerly after the work (dls__ext_release_marked), else NULL.
 * `all_noted`: each use came from dls__foreign_use_noted (none declared): they are not looked over first. */
dls_status_t dls__ext_uses_note(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                int n, bool all_noted, const void **out_marked);
/* The same for a block's calls (interop/python/call/block.h): where every use was noted as it was ordered, `s`'s mark
 * is owed, not recorded, and the buffers not in held[] (nheld, held by the caller already) are held into owed[] (room
 * for n; *nowed of them) for dls__ext_uses_settle at the block's end (docs/hazard-rule.md, "Owed marks"). */
dls_status_t dls__ext_uses_note_owed(dls__stream *s, dls__buffer *const *bufs, const int *modes, const uint32_t *epochs,
                                     int n, dls__buffer *const *held, int nheld, dls__buffer **owed, int *nowed);
/* Records `s`'s mark once for the owed uses of `n` buffers, settling them; drops the references. */
void dls__ext_uses_settle(dls__stream *s, dls__buffer *const *bufs, int n);

/* Aliases: memory a dlstream buffer exported (DLPack: dls_tensor_export_*, Tensor.__dlpack__) that comes back as
 * another framework's tensor (a NumPy or torch tensor of it) is that buffer's memory, and its uses must join that
 * buffer's hazard state. The registry's entry count, 0 while nothing was exported (read inline). */
DLS__EXT_HIDDEN extern _Atomic size_t dls__exported_n;
/* The buffer whose exported memory holds [ptr, ptr + nbytes) on `home` (dls__ext_home of the tensor's device),
 * failing that the lowest one overlapping it (conservative: the whole buffer); CPU devices are one memory, so a
 * CPU buffer of any device matches a CPU `home`. NULL when none does, or nbytes is 0. Holds: drop it with
 * dls__buffer_unref. A use of the tensor on stream s is then dls__buffer_access(found, s, mode, true) before the
 * work (with the framework's own ordering, not instead of it), which orders it against every use of the original
 * and of its other aliases. Costs one relaxed atomic load while no buffer was exported; a lookup under a lock
 * (a binary search) otherwise. */
dls__buffer *dls__ext_alias_find_slow(DLDevice home, const void *ptr, size_t nbytes);
static inline dls__buffer *dls__ext_alias_find(DLDevice home, const void *ptr, size_t nbytes) {
  if (atomic_load_explicit(&dls__exported_n, memory_order_relaxed) == 0)
    return NULL;
  return dls__ext_alias_find_slow(home, ptr, nbytes);
}

/* Foreign memory: memory no dlstream buffer holds or exported (another framework's tensors, NumPy arrays, any DLPack
 * producer's). Its uses on dlstream's streams join the record of foreign memory (plugin/core/foreign.h): records of
 * address ranges, each with the hazard state of a buffer, beside the imports of such memory that live. The entries of
 * both registries together (exported memory and foreign records and imports), 0 while a call has no range to look up
 * (read inline: one load tells both); the foreign ones alone. */
DLS__EXT_HIDDEN extern _Atomic size_t dls__ranges_n;
DLS__EXT_HIDDEN extern _Atomic size_t dls__foreign_n;
/* Records and imports one use may join at most (the core's DLS__FOREIGN_MAX: ext.c checks it). */
#define DLS__EXT_FOREIGN_MAX 32
/* What a use of foreign memory joins, each held: rec[0] a record that holds all of its bytes (with `add`), then
 * every other record and import its bytes overlap. `merged`: rec[0] grew over the other records, and the use must be
 * ordered and noted as a write of each, after which dls__ext_foreign_retire takes them out. */
typedef struct dls__ext_foreign {
  dls__buffer *rec[DLS__EXT_FOREIGN_MAX];
  int n;
  bool merged;
} dls__ext_foreign;
/* The records and imports that a use of [lo, lo + nbytes) on `home` (dls__ext_home of the tensor's device) joins.
 * With `add`, one record is made to hold the range (new, or one of them grown). A use on stream s is then
 * dls__buffer_access(rec[i], s, mode, true) before the work and a note after (each held until then), for every
 * i. Without `add` (a use its framework orders itself: on its current stream, outside dlstream's blocks) only what
 * is there is named. Fails with a message (nothing held) when more than DLS__EXT_FOREIGN_MAX overlap. */
dls_status_t dls__ext_foreign_find(DLDevice home, const void *lo, size_t nbytes, bool add, dls__ext_foreign *out);
/* A record of a merged use, once the use was ordered: out of the registry when nothing else holds it but the
 * registry and `held` references of the caller's. */
void dls__ext_foreign_retire(dls__buffer *rec, int held);
/* The quick way of a use of [lo, lo + size) on `home` by eager work on `s` (of `mode`), the core's own
 * (plugin/core/foreign.h): where one record holds all of its bytes and `s` is already its only writer (a write: its
 * only reader too), the use is ordered and in flight at once: the record, NOT held, its epoch DLS__EXT_EPOCH_NOTED,
 * for dls__ext_uses_note (or dls__ext_use_unordered), after which the record must not be touched. NULL: nothing
 * done (dls__ext_foreign_find and dls__ext_use_order). Asked once dls__foreign_quick_ready(s) said yes for the call's
 * first such use: the record on, `s` eager (its capture state is not asked again for the call's later uses:
 * dls__ext_uses_note asks it before the mark). */
dls__buffer *dls__foreign_use_noted(DLDevice home, uintptr_t lo, size_t size, dls__stream *s, int mode);
bool dls__foreign_quick_ready(dls__stream *s);
#define DLS__EXT_EPOCH_NOTED 0x80000000u /* the epoch of a use dls__foreign_use_noted took */
/* Memory passed straight whose earlier import was let go with uses pending (its release waits in the deferred
 * queue, and the import has left the registry): queues on `s` waits for those uses, as a new import's producer
 * waits (plugin/core/deferred.h, dls__deferred_order_after). Nothing where nothing overlaps, the record is off or
 * `s` captures. dls__deferred_ranged (read inline: 0 while no import's release waits; the queue's other entries,
 * objects a launch held, say nothing here) says whether to ask at all. */
DLS__EXT_HIDDEN extern _Atomic size_t dls__deferred_ranged;
dls_status_t dls__ext_deferred_order_after(DLDevice home, const void *lo, size_t nbytes, dls__stream *s);
/* Whether [lo, lo + nbytes) on `home` overlaps a foreign record or import (nothing held). */
bool dls__ext_foreign_overlaps(DLDevice home, const void *lo, size_t nbytes);
/* Takes out the records whose uses have all completed (after a host wait). */
void dls__ext_foreign_sweep(void);
/* The record's test-only switch (DLSTREAM_TEST_NO_FOREIGN=1 at start-up turns it off): while off, no record is
 * made or joined (the negative control of the tests of foreign memory). Returns whether it was on. */
bool dls__ext_foreign_set_on(bool on);
/* The test-only switch of the branches' binding to their origin (plugin/core/stream.h: a pooled stream that was a
 * branch of a group on origin O is a branch of O's groups only). Returns whether it was on. */
bool dls__ext_bind_branches_set(bool on);

/* Host bytes [host, host + span) staged for work on `s`: a stream-ordered temporary allocated on `s` (holds: drop
 * it with dls__buffer_unref once the work is queued) and the copy in queued; *out_dev is the temporary's address. */
dls_status_t dls__ext_stage_in(dls__stream *s, const void *host, size_t span, dls__buffer **out_tmp, void **out_dev);
/* Queues the copy of a staged temporary back to its host bytes. */
dls_status_t dls__ext_stage_out(dls__stream *s, dls__buffer *tmp, void *host, size_t span);
/* Queues a copy of `bytes` from `src` on `src_dev` to `dst` on the device of `s` (a peer copy). `s` first waits
 * for the earlier uses of `dst_buf` (dst's buffer; NULL: none known) on other streams, as a write does (the hazard
 * rule; src's were ordered when it was read); the caller records the write once it is queued. Messages name `call`
 * ("copy") and both devices. */
dls_status_t dls__ext_copy_peer(const char *call, dls__stream *s, DLDevice dst_dev, void *dst, dls__buffer *dst_buf,
                                DLDevice src_dev, const void *src, size_t bytes);

/* ---------------------------------------------------------------- tensors */

/* What the extension reads of a live tensor handle. No hold: `dl` and `buf` stay valid while the handle is live and
 * no Python code has run; dls__ext_buffer_ref keeps the memory past that. */
typedef struct dls__ext_tensor {
  const DLTensor *dl;    /* the view: data, device, shape, strides (never NULL), byte_offset */
  uint64_t flags;        /* DLS_TENSOR_* */
  DLDevice home;         /* the device of its memory */
  dls__buffer *buf;      /* its buffer */
  dls__stream *producer; /* its allocation (or producer) stream; NULL for memory that no stream produced */
} dls__ext_tensor;
/* The tensor a handle names; false when it is not live (nothing set, no message). */
bool dls__ext_tensor_peek(dls_tensor_t tensor, dls__ext_tensor *out);
/* The same, with DLS_ERR_INVALID_HANDLE and a message naming `call` and `arg` when it is not live. */
dls_status_t dls__ext_tensor_get(dls_tensor_t tensor, const char *call, const char *arg, dls__ext_tensor *out);

/* What DLPack validation learns of a view. */
typedef struct dls__ext_layout {
  DLDevice home;  /* the device whose backend handles the memory: cpu:0, cuda:N or rocm:N */
  uintptr_t lo;   /* lowest byte touched; the data pointer when there is no element */
  size_t span;    /* bytes from lo to one past the highest byte touched; 0 without elements */
} dls__ext_layout;
/* Validates every field of `t` as the importers do; `flags` are DLPack flag bits. Failures are
 * DLS_ERR_INVALID_TENSOR with "<call>: <prefix><field> = <value> ..." as the message. */
dls_status_t dls__ext_dlpack_check(const DLTensor *t, uint64_t flags, const char *call, const char *prefix,
                                   dls__ext_layout *out);
/* The device whose backend handles memory of `device` (pinned and managed memory belong to their GPU); false for
 * device types dlstream does not handle. Inline for the device types that are their own home: every tensor
 * argument of a call asks. */
bool dls__ext_home_slow(DLDevice device, DLDevice *out_home);
static inline bool dls__ext_home(DLDevice device, DLDevice *out_home) {
  if (device.device_type == kDLCUDA || device.device_type == kDLCPU || device.device_type == kDLROCM) {
    *out_home = device;
    return true;
  }
  return dls__ext_home_slow(device, out_home);
}
/* "kDLFloat8_e4m3fn" ...; "unknown" for codes outside the enum. */
const char *dls__dlpack_dtype_code_name(uint8_t code);

/* ---------------------------------------------------------------- launches */

/* What is known of a raw pointer argument (a framework tensor's view), for the checks of built-ins: the bytes
 * [lo, hi) around it that belong to it (lo > hi: unknown) and its element type (lanes 0: unknown). */
typedef struct dls__ext_extent {
  int64_t lo, hi;
  DLDataType dtype;
} dls__ext_extent;
struct dls__extent;
/* Extents as the core reads them (struct dls__extent has dls__ext_extent's fields: ext_tensor.c checks it). */
static inline const struct dls__extent *dls__ext_extents(const dls__ext_extent *e) {
  return (const struct dls__extent *)(const void *)e;
}
/* The core's function object, opaque. */
typedef struct dls__function dls__function;
/* The function a handle names, or NULL when it is not live (no message: dls__ext_function_stale says why, naming
 * `call`, and returns DLS_ERR_INVALID_HANDLE). No hold. */
dls__function *dls__ext_function(dls_function_t fn);
dls_status_t dls__ext_function_stale(dls_function_t fn, const char *call);
/* Launches `fn` on `s` with typed arguments, as dls_launch does; a built-in's arguments are checked first
 * (`extents`: dls__ext_extents of one per argument, NULL for none) and a partial overlap of what it reads and writes
 * is refused. */
dls_status_t dls__launch_ext(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                             const dls_arg_t *args, size_t nargs, const struct dls__extent *extents);
/* What a launch of built-in `fn` checks of its arguments (argument count and kinds, counts inside every extent),
 * for a launch of values (`args` are the same values as dls_arg_t); *out_overlap: what it reads partially overlaps
 * what it writes (the caller refuses). `extents` are dls__ext_extents(...). */
dls_status_t dls__builtin_check(const char *call, const dls__function *fn, const dls_arg_t *args, size_t nargs,
                                const struct dls__extent *extents, bool *out_overlap);
/* Built-in k of the table (plugin/kernels/builtin_table.h), from 0: its name, GPU symbol and argument count; false
 * past the last. */
bool dls__builtin_describe(size_t k, const char **out_name, const char **out_gpu, size_t *out_nargs);
/* Argument i (< its count) of built-in k: its name, signature token ("p", "cp", "u64", "bytes" ...), what the table
 * says of it (bits: plugin/kernels/builtin_table.h) and the element types it takes in words (for bytes, the struct;
 * "" for a scalar). */
void dls__builtin_describe_arg(size_t k, size_t i, const char **out_name, const char **out_token, uint32_t *out_what,
                               char *types, size_t size);
/* Whether `call` may convert elements of `src` into `dst` (NumPy's same_kind casting, types dls_copy_convert
 * converts): DLS_OK, or an error naming the call, both types and the rule. */
dls_status_t dls__cast_check(const char *call, DLDataType dst, DLDataType src);
/* A launch whose arguments are values already (scalars and raw pointers: nothing to order or record): params[i]
 * points at argument i's sizes[i] bytes. The caller vouches for the configuration (every dimension >= 1) and for
 * the arguments (at most DLS_MAX_ARGS, DLS_MAX_ARG_BYTES in all; a built-in's checked by dls__ext_builtin_check);
 * the function and the stream are checked. */
dls_status_t dls__launch_params(const char *call, dls__function *fn, dls__stream *s, const dls_launch_config_t *config,
                                void **params, const uint32_t *sizes, int nargs);

/* The backend's own launch of a function, for the benchmarks' floor only (bench/bench_python.py): no check, no
 * ordering, nothing recorded. Valid while the function's handle is. */
struct dls__backend; /* the backend's method table, opaque here */
typedef dls_status_t (*dls__ext_launch_fn)(const struct dls__backend *be, int dev, void *function, void *stream,
                                           const dls_launch_config_t *config, void **params, const uint32_t *sizes,
                                           int nargs);
typedef struct dls__ext_raw_launch {
  dls__ext_launch_fn launch;
  const struct dls__backend *be;
  int dev;
  void *function;
} dls__ext_raw_launch;
dls_status_t dls__ext_raw_launch_of(dls_function_t fn, dls__ext_raw_launch *out);

/* ---------------------------------------------------------------- modules */

/* A new handle on the image `module` loaded, as Module.from_source's cache hands out: it shares the native module
 * and the native functions found in it, and has its own functions and its own end (dls_module_unload ends only it;
 * the image is unloaded with the last handle on it and the last of their functions). Messages name `call`. */
dls_status_t dls__module_share(dls_module_t module, const char *call, dls_module_t *out_module);

/* ---------------------------------------------------------------- at exit */

/* A stream that dlstream knows of and that still has work queued. */
typedef struct dls__ext_busy {
  char device[24];     /* "cuda:0" */
  char what[24];       /* "owned", "pooled", "foreign", "legacy default", "per-thread default" */
  const void *native;
} dls__ext_busy;
/* The streams with work queued now, each once (captured work is not counted: it never runs); at most `max` in
 * `out`, the rest counted in *out_more. Returns how many were written. */
int dls__ext_busy_streams(dls__ext_busy *out, int max, int *out_more);

/* ---------------------------------------------------------------- messages */

/* A hint that the library's messages give in C words (plugin/base/hints.h: "the CPU backend (kDLCPU)"), with the
 * words a Python caller acts on ("the CPU backend (device=\"cpu\")"). */
typedef struct dls__ext_hint {
  const char *c_words;
  const char *python_words;
} dls__ext_hint;
/* Every such hint; *out_count of them. Static. */
const dls__ext_hint *dls__ext_hints(size_t *out_count);

#ifdef DLS_FAULT_INJECTION
/* The fault injector's control (test builds; plugin's fault.h describes it). */
void dls_fault_arm(uint64_t n, dls_status_t status);
void dls_fault_disarm(void);
uint64_t dls_fault_points(void);
uint64_t dls_fault_injected(void);
const char *dls_fault_last(void);
/* Native objects of kind `kind` (0, 1, ...) made and released so far; NULL past the last kind, else its name. */
const char *dls__ext_fault_objects(int kind, uint64_t *out_created, uint64_t *out_destroyed);
#endif

#endif /* DLSTREAM_EXT_H */
