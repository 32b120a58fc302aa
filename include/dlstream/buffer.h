/* SPDX-License-Identifier: Apache-2.0 */
/* Buffers: device memory with stream-ordered allocation and deallocation.
 *
 * The rule (docs/semantics.md, the deallocation rule): memory is never freed or reused while a stream that
 * used it may still touch it. A buffer remembers its allocation stream A and
 * every other stream S that used it (launches and copies through dlstream add
 * S for you; dls_buffer_record_use() for work dlstream did not see). Freeing
 * records an event on each S, makes A wait on them and frees on A: the host
 * never blocks. A borrowed buffer's release callback runs at once when only
 * its producer stream used it, and otherwise from a deferred queue once the
 * other streams have passed (polled at later calls, at synchronize and at
 * shutdown; never from a driver thread). */
#ifndef DLSTREAM_BUFFER_H
#define DLSTREAM_BUFFER_H

#include "runtime.h"

/* Called once when a borrowed buffer is released (see dls_buffer_borrow). */
typedef void (*dls_release_fn)(void *user_data);

DLS_EXTERN_C_BEGIN

/* Allocates `size` bytes (0 is allowed and gives a NULL pointer) on the
 * stream's device, stream-ordered on `stream`: the memory may be used by work
 * queued on `stream` after this call, or on other streams once ordered after
 * it. Owned by caller: dls_buffer_free(). */
DLS_API dls_status_t dls_buffer_alloc(dls_stream_t stream, size_t size, dls_buffer_t *out_buffer);

/* Frees in stream order (the rule above). The handle is stale at once; the
 * memory stays valid for work already queued. */
DLS_API dls_status_t dls_buffer_free(dls_buffer_t buffer);

/* How work uses memory: it reads, or it writes (a write may read too). */
typedef enum dls_access_t {
  DLS_ACCESS_READ = 1,
  DLS_ACCESS_WRITE = 2
} dls_access_t;

/* Declares that work queued on `stream` so far (work dlstream did not see:
 * another library's kernel) reads or writes the buffer, so that later work
 * on other streams is ordered after it (a read after this write, a write
 * after this read or write) and the free waits for it. */
DLS_API dls_status_t dls_buffer_record_use(dls_buffer_t buffer, dls_stream_t stream, dls_access_t access);

/* Wraps memory someone else owns (`ptr`, `size` bytes on `device`), produced
 * on `producer` (ordered before work queued there). `release` (may be NULL)
 * runs exactly once, after every stream that used the memory has passed, on
 * a thread calling dlstream. Owned by caller: dls_buffer_free(). On failure
 * `release` is NOT called: the caller still owns the memory. */
DLS_API dls_status_t dls_buffer_borrow(DLDevice device, void *ptr, size_t size, dls_stream_t producer,
                                       dls_release_fn release, void *user_data,
                                       dls_buffer_t *out_buffer);

/* Base pointer (device pointer on GPUs). Borrowed: valid while the buffer is. */
DLS_API dls_status_t dls_buffer_ptr(dls_buffer_t buffer, void **out_ptr);
DLS_API dls_status_t dls_buffer_size(dls_buffer_t buffer, size_t *out_size);
DLS_API dls_status_t dls_buffer_device(dls_buffer_t buffer, DLDevice *out_device);
/* The allocation (or producer) stream. */
DLS_API dls_status_t dls_buffer_stream(dls_buffer_t buffer, dls_stream_t *out_stream);

/* Copies `size` bytes from host memory into the buffer at `offset`, queued on
 * `stream` (use recorded). `src` must stay valid until the copy completes
 * (synchronize the stream, or wait on an event recorded after it). */
DLS_API dls_status_t dls_buffer_write(dls_buffer_t buffer, size_t offset, const void *src, size_t size,
                                      dls_stream_t stream);

/* Copies from the buffer at `offset` into host memory, queued on `stream`.
 * `dst` holds the data once the stream passes this point. */
DLS_API dls_status_t dls_buffer_read(dls_buffer_t buffer, size_t offset, void *dst, size_t size,
                                     dls_stream_t stream);

/* Copies `size` bytes from src (at src_offset) to dst (at dst_offset), queued
 * on `stream`, a stream of dst's or src's device. Between devices the driver
 * copies peer to peer where it can, else through the host. Both buffers
 * record the use: neither is freed before the copy has run. */
DLS_API dls_status_t dls_buffer_copy(dls_stream_t stream, dls_buffer_t dst, size_t dst_offset, dls_buffer_t src,
                                     size_t src_offset, size_t size);

/* ---- the caching allocator ----
 *
 * Memory freed on a stream (eagerly, outside any capture) is kept in size
 * classes for that stream's next allocations, which take it back without a
 * driver call; another stream gets it only after waiting, on the device, for
 * the work queued on the block's stream up to its free. Allocations inside a
 * capture, and graph memory, never touch it. Out of device memory, an
 * allocation gives the cache back and tries once more. At most
 * DLSTREAM_CACHE_LIMIT bytes (default 1 GiB) per device stay idle in it;
 * DLSTREAM_DEBUG_ALLOC=1 turns it off. */

/* Gives the memory the allocator keeps idle for `device` back to the driver,
 * in each block's stream order (blocks of a stream capturing now stay).
 * *opt_out_bytes (may be NULL): the bytes given back. */
DLS_API dls_status_t dls_device_trim(DLDevice device, size_t *opt_out_bytes);

/* Sets the most bytes `device`'s cache keeps idle (0: none; a free then goes
 * straight to the driver); when it holds more, it is trimmed. Overrides
 * DLSTREAM_CACHE_LIMIT for the rest of the runtime's life. */
DLS_API dls_status_t dls_device_set_cache_limit(DLDevice device, size_t bytes);

/* The bytes `device`'s cache keeps idle now (sizes rounded up to their class). */
DLS_API dls_status_t dls_device_cached_bytes(DLDevice device, size_t *out_bytes);

/* Raw copy between any two pointers the stream's backend can address
 * (device or host, any device of the backend under unified addressing),
 * queued on `stream`. No use is recorded. */
DLS_API dls_status_t dls_memcpy(dls_stream_t stream, void *dst, const void *src, size_t size);

DLS_EXTERN_C_END

#endif /* DLSTREAM_BUFFER_H */
