/* SPDX-License-Identifier: Apache-2.0 */
/* Copies: host to buffer and back, raw addresses, and buffer to buffer
 * (across devices too), each recording its uses under the deallocation rule
 * (buffer.c). */
#include "core/access.h"
#include "core/buffer.h"


static dls_status_t check_range(const char *call, const dls__buffer *b, size_t offset, size_t size) {
  if (offset > b->size || size > b->size - offset)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(offset=%zu, size=%zu): out of the buffer's %zu bytes", call, offset,
                     size, b->size);
  return DLS_OK;
}

static dls_status_t buffer_copy(const char *call, dls_buffer_t buffer, size_t offset, void *host, size_t size,
                                dls_stream_t stream, bool to_device) {
  DLS__ENTER(call);
  if (host == NULL && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(%s=NULL, size=%zu): host pointer is NULL", call,
                     to_device ? "src" : "dst", size);
  DLS__GET_OF(buffer, b, buffer, call, "buffer");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (s->dev != b->dev)
    return dls__fail(DLS_ERR_INVALID_DEVICE, "%s: buffer is on %s but stream is on %s", call, b->dev->name,
                     s->dev->name);
  DLS__TRY(check_range(call, b, offset, size));
  if (size == 0)
    return DLS_OK;
  char *dev_ptr = (char *)b->ptr + offset;
  dls__accesses acc = {.n = 0};
  dls__access_add(&acc, dls__buffer_hazards(b), to_device ? DLS_ACCESS_WRITE : DLS_ACCESS_READ);
  dls_status_t st = dls__access_begin(&acc, s);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s", call);
  st = to_device ? s->dev->be->memcpy_async(s->dev->be, s->dev->id, dev_ptr, host, size, s->native)
                 : s->dev->be->memcpy_async(s->dev->be, s->dev->id, host, dev_ptr, size, s->native);
  dls_status_t noted = dls__access_end(&acc, st == DLS_OK);
  if (st == DLS_OK)
    st = noted;
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_buffer_write(dls_buffer_t buffer, size_t offset, const void *src, size_t size, dls_stream_t stream) {
  return buffer_copy("dls_buffer_write", buffer, offset, (void *)(uintptr_t)src, size, stream, true);
}

dls_status_t dls_buffer_read(dls_buffer_t buffer, size_t offset, void *dst, size_t size, dls_stream_t stream) {
  return buffer_copy("dls_buffer_read", buffer, offset, dst, size, stream, false);
}

dls_status_t dls_memcpy(dls_stream_t stream, void *dst, const void *src, size_t size) {
  static const char call[] = "dls_memcpy";
  DLS__ENTER(call);
  if ((dst == NULL || src == NULL) && size != 0)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(dst=%p, src=%p, size=%zu): NULL pointer", call, dst, src, size);
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (size == 0)
    return DLS_OK;
  dls_status_t st = s->dev->be->memcpy_async(s->dev->be, s->dev->id, dst, src, size, s->native);
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s", call);
}

dls_status_t dls_buffer_copy(dls_stream_t stream, dls_buffer_t dst, size_t dst_offset, dls_buffer_t src,
                             size_t src_offset, size_t size) {
  static const char call[] = "dls_buffer_copy";
  DLS__ENTER(call);
  DLS__GET_OF(buffer, d, dst, call, "dst");
  DLS__GET_OF(buffer, sb, src, call, "src");
  DLS__GET_OF(stream, s, stream, call, "stream");
  if (d->dev->be != s->dev->be || sb->dev->be != s->dev->be || (s->dev != d->dev && s->dev != sb->dev))
    return dls__fail(DLS_ERR_INVALID_DEVICE,
                     "%s: dst is on %s, src on %s and the stream on %s; the stream must be on the device of dst or "
                     "of src, all of one backend",
                     call, d->dev->name, sb->dev->name, s->dev->name);
  if (dst_offset > d->size || size > d->size - dst_offset)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(dst_offset=%zu, size=%zu): out of dst's %zu bytes", call,
                     dst_offset, size, d->size);
  if (src_offset > sb->size || size > sb->size - src_offset)
    return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(src_offset=%zu, size=%zu): out of src's %zu bytes", call,
                     src_offset, size, sb->size);
  if (size == 0)
    return DLS_OK;
  dls__accesses acc = {.n = 0};
  dls__access_add(&acc, dls__buffer_hazards(d), DLS_ACCESS_WRITE);
  dls__access_add(&acc, dls__buffer_hazards(sb), DLS_ACCESS_READ);
  dls_status_t st = dls__access_begin(&acc, s);
  if (st != DLS_OK)
    return dls__fail_prefix(st, "%s(size=%zu, stream on %s)", call, size, s->dev->name);
  char *to = (char *)d->ptr + dst_offset;
  const char *from = (const char *)sb->ptr + src_offset;
  if (d->dev == sb->dev) {
    st = s->dev->be->memcpy_async(s->dev->be, s->dev->id, to, from, size, s->native);
  } else {
    /* Between devices: the driver copies peer to peer where it can, else through the host. */
    const dls__backend *be = s->dev->be;
    if (be->memcpy_peer_async == NULL)
      st = dls__fail(DLS_ERR_NOT_SUPPORTED, "%s: the %s backend cannot copy between devices", call, be->name);
    else
      st = s->dev == d->dev ? be->memcpy_peer_async(be, s->dev->id, to, sb->dev->id, from, size, s->native)
                            : be->memcpy_peer_async(be, s->dev->id, to, d->dev->id, from, size, s->native);
  }
  /* The rule on both devices: later uses and each buffer's free are ordered after this copy. */
  dls_status_t noted = dls__access_end(&acc, st == DLS_OK);
  if (st == DLS_OK)
    st = noted;
  return st == DLS_OK ? st : dls__fail_prefix(st, "%s(size=%zu, stream on %s)", call, size, s->dev->name);
}
