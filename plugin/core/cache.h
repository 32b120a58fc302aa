/* SPDX-License-Identifier: Apache-2.0 */
/* The caching allocator: eager memory freed on a stream is kept, by size class, for that stream's next allocations
 * (no driver call), and handed to another stream only once that stream waits for the block's stream. */
#ifndef DLSTREAM_CORE_CACHE_H
#define DLSTREAM_CORE_CACHE_H

#include "core/capture.h"

/* The states of a device's cache (dls__device.cache_state): on (it caches while its limit is above 0), or off for
 * the process's life (DLSTREAM_DEBUG_ALLOC=1: every free goes to the driver, which poisons it). */
enum { DLS__CACHE_ON = 1, DLS__CACHE_OFF = 2 };

/* Allocates `size` bytes for eager work on `s` (inside the caller's pin, which found `s` not capturing): a block
 * freed on `s` (no driver call), else one freed on another stream once `s` waits for that stream's work (the mark
 * recorded after the block's free), else the driver's. *out_cached: the block is of its size class and may go
 * back to the cache (dls__cache_put, with the same `size`). */
DLS__INTERNAL dls_status_t dls__cache_alloc(dls__stream *s, size_t size, void **out_ptr, bool *out_cached);
/* The driver's allocation (dls__mem_alloc: in a capture, its graph's): out of device memory, the device's cache
 * is given back and the allocation tried once more. */
DLS__INTERNAL dls_status_t dls__cache_alloc_driver(dls__stream *s, size_t size, void **out_ptr);
/* Frees eager memory that dls__cache_alloc said may be cached (`size` as asked) in `s`'s order: into `s`'s cache.
 * false when the cache does not take it (off, over its limit, out of host memory): the caller frees it to the
 * driver. Needs no pin and makes no driver call: the block is handed out again only to eager work on `s`, which
 * runs after everything queued on `s` so far, or to another stream after that stream waits for `s`. */
DLS__INTERNAL bool dls__cache_put(dls__stream *s, void *ptr, size_t size);
/* Gives every block cached on `dev` back to the driver, each in its stream's order (a stream capturing now keeps
 * its blocks). `orphans`: also lets go of the stream objects a cache kept alive through a capture (never inside a
 * pin: their release may run a callback). Returns the bytes given back. */
DLS__INTERNAL size_t dls__cache_trim(dls__device *dev, bool orphans);
/* dls_shutdown: every device's cache given back and forgotten (after the deferred releases ran). */
DLS__INTERNAL void dls__caches_shutdown(void);

#endif /* DLSTREAM_CORE_CACHE_H */
