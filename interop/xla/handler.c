/* SPDX-License-Identifier: Apache-2.0 */
/* The XLA FFI handlers: the metadata call, the stages, and a dlstream launch (or latch wait) on XLA's stream. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/builtin.h"
#include "core/launch.h"
#include "xla_internal.h"

static _Atomic uint64_t g_instantiations, g_executions;

/* Where a dlstream status lands among XLA's (absl's) codes. */
static int error_code(dls_status_t st) {
  switch (st) {
  case DLS_ERR_INVALID_ARGUMENT:
  case DLS_ERR_INVALID_DEVICE:
  case DLS_ERR_INVALID_TENSOR:
  case DLS_ERR_READ_ONLY:
    return DLS__XLA_ERROR_INVALID_ARGUMENT;
  case DLS_ERR_INVALID_HANDLE:
  case DLS_ERR_NOT_FOUND:
    return DLS__XLA_ERROR_NOT_FOUND;
  case DLS_ERR_UNAVAILABLE:
    return DLS__XLA_ERROR_UNAVAILABLE;
  case DLS_ERR_OUT_OF_MEMORY:
    return DLS__XLA_ERROR_RESOURCE_EXHAUSTED;
  case DLS_ERR_NOT_SUPPORTED:
  case DLS_ERR_VERSION:
    return DLS__XLA_ERROR_UNIMPLEMENTED;
  case DLS_ERR_TIMEOUT:
    return DLS__XLA_ERROR_DEADLINE_EXCEEDED;
  case DLS_ERR_BUSY:
  case DLS_ERR_STATE:
  case DLS_ERR_FORK:
    return DLS__XLA_ERROR_FAILED_PRECONDITION;
  default:
    return DLS__XLA_ERROR_INTERNAL;
  }
}

/* An XLA error carrying `what` (NULL: dls_last_error()), owned by XLA once returned. */
static struct XLA_FFI_Error *fail(const dls__xla_call_frame *f, const char *platform, dls_status_t st,
                                  const char *what) {
  char msg[DLS__XLA_MSG + 512];
  snprintf(msg, sizeof msg, "dlstream XLA call (%s): %s", platform, what ? what : dls_last_error());
  dls__xla_error_create_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = DLS__XLA_ERROR_CREATE_ARGS_SIZE;
  a.message = msg;
  a.errc = error_code(st);
  return f->api->error_create(&a);
}

/* Answers XLA's metadata call: the API version these declarations describe, and the traits. */
static void metadata(dls__xla_call_frame *f, uint32_t traits) {
  dls__xla_metadata_extension *ext = (dls__xla_metadata_extension *)f->extension_start;
  dls__xla_metadata *m = ext->metadata;
  if (ext->extension_base.struct_size < DLS__XLA_METADATA_EXTENSION_SIZE || m == NULL ||
      m->struct_size < DLS__XLA_METADATA_SIZE)
    return; /* an XLA we do not know: it sees no version, and refuses the handler itself */
  m->api_version.struct_size = DLS__XLA_API_VERSION_SIZE;
  m->api_version.extension_start = NULL;
  m->api_version.major_version = DLS__XLA_API_MAJOR;
  m->api_version.minor_version = DLS__XLA_API_MINOR;
  m->traits = traits;
}

/* The instantiate stage: the function (or latch) is alive. */
static dls_status_t check_handle(const dls__xla_plan *p) {
  if (p->op == DLS_XLA_OP_LAUNCH) {
    const char *name;
    return dls_function_name((dls_function_t){p->handle}, &name);
  }
  dls_status_t st = dls_latch_status((dls_latch_t){p->handle});
  return st == DLS_ERR_TIMEOUT ? DLS_OK : st; /* an earlier wait that timed out does not stop this one */
}

/* Queues the planned call on `s`. */
static dls_status_t run(const dls__xla_plan *p, const dls__xla_call_frame *f, dls_stream_t s, const char *platform,
                        struct XLA_FFI_Error **out_err) {
  dls_status_t st;
  if (p->op == DLS_XLA_OP_LATCH_WAIT)
    return dls_latch_wait((dls_latch_t){p->handle}, s, p->timeout_ns);
  dls_arg_t argv[DLS_MAX_ARGS];
  dls__extent extents[DLS_MAX_ARGS];
  char msg[DLS__XLA_MSG];
  st = dls__xla_plan_args(p, f, argv, extents, msg);
  if (st != DLS_OK) {
    *out_err = fail(f, platform, st, msg);
    return st;
  }
  /* A built-in's memory is bounded by XLA's buffers: their sizes and element types. */
  if (p->core_grid)
    return dls__builtin_launch_known("dls_launch", (dls_function_t){p->handle}, s, argv, p->nargs, extents);
  return dls__launch_known("dls_launch", (dls_function_t){p->handle}, s, &p->config, argv, p->nargs, extents);
}

/* CUDA: on XLA's stream; the host does not wait. */
static struct XLA_FFI_Error *execute_gpu(const dls__xla_plan *p, dls__xla_call_frame *f, const char *platform) {
  dls__xla_stream_get_args sg;
  memset(&sg, 0, sizeof sg);
  sg.struct_size = DLS__XLA_STREAM_GET_ARGS_SIZE;
  sg.ctx = f->ctx;
  struct XLA_FFI_Error *err = f->api->stream_get(&sg);
  if (err != NULL)
    return err;
  dls_stream_t s;
  int owned;
  dls_status_t st = dls__xla_stream_get(p->device, sg.stream, &s, &owned);
  if (st != DLS_OK)
    return fail(f, platform, st, NULL);
  err = NULL;
  st = run(p, f, s, platform, &err);
  DLDevice d;
  if (st == DLS_ERR_INVALID_HANDLE && err == NULL && !owned && dls_stream_device(s, &d) != DLS_OK) {
    /* the cached wrapper went stale (a dls_shutdown since): wrap the stream again and retry once */
    dls_stream_t stale = s;
    st = dls__xla_stream_renew(p->device, sg.stream, stale, &s);
    if (st == DLS_OK && s.id == 0)
      st = dls__xla_stream_get(p->device, sg.stream, &s, &owned);
    if (st == DLS_OK)
      st = run(p, f, s, platform, &err);
  }
  if (owned)
    (void)dls_stream_destroy(s);
  if (err != NULL || st == DLS_OK)
    return err;
  return fail(f, platform, st, NULL);
}

/* CPU: on a pooled CPU stream of the function's device, waited for before returning. */
static struct XLA_FFI_Error *execute_cpu(const dls__xla_plan *p, dls__xla_call_frame *f, const char *platform) {
  dls_stream_t s;
  dls_status_t st = dls_stream_acquire(p->device, &s);
  if (st != DLS_OK)
    return fail(f, platform, st, NULL);
  struct XLA_FFI_Error *err = NULL;
  st = run(p, f, s, platform, &err);
  if (st == DLS_OK)
    st = dls_stream_synchronize(s);
  char msg[DLS__XLA_MSG];
  if (st != DLS_OK && err == NULL)
    snprintf(msg, sizeof msg, "%s", dls_last_error()); /* before the release below can replace it */
  (void)dls_stream_destroy(s);
  if (err != NULL || st == DLS_OK)
    return err;
  return fail(f, platform, st, msg);
}

static struct XLA_FFI_Error *call(struct XLA_FFI_CallFrame *frame, DLDeviceType type, uint32_t traits) {
  dls__xla_call_frame *f = (dls__xla_call_frame *)frame;
  const char *platform = type == kDLCUDA ? "cuda" : "cpu";
  if (f->extension_start != NULL && f->extension_start->type == DLS__XLA_EXTENSION_METADATA) {
    metadata(f, traits);
    return NULL;
  }
  if (f->stage == DLS__XLA_STAGE_PREPARE || f->stage == DLS__XLA_STAGE_INITIALIZE)
    return NULL; /* nothing to acquire or warm: execute only launches */
  if (f->api == NULL || f->api->struct_size < DLS__XLA_API_STREAM_GET_END)
    return NULL; /* cannot happen with an XLA that took our metadata; nothing could carry an error */
  dls__xla_plan p;
  char msg[DLS__XLA_MSG];
  dls_status_t st = dls__xla_plan_read(&f->attrs, &p, msg);
  if (st == DLS_OK)
    dls__xla_plan_platform(&p, type);
  if (st == DLS_OK && p.device.device_type == type)
    st = dls__xla_plan_device(f, &p, msg); /* the device XLA runs this call on, and its function */
  if (st != DLS_OK)
    return fail(f, platform, st, msg);
  if (p.device.device_type != type) {
    char dev[32];
    snprintf(msg, sizeof msg, "the %s is on %s, but XLA runs this call on its %s platform; make it on a %s device",
             p.op == DLS_XLA_OP_LAUNCH ? "function" : "latch", dls_device_str(p.device, dev, sizeof dev), platform,
             platform);
    return fail(f, platform, DLS_ERR_INVALID_DEVICE, msg);
  }
  if (f->stage == DLS__XLA_STAGE_INSTANTIATE) {
    st = check_handle(&p);
    atomic_fetch_add_explicit(&g_instantiations, 1, memory_order_relaxed);
    return st == DLS_OK ? NULL : fail(f, platform, st, NULL);
  }
  atomic_fetch_add_explicit(&g_executions, 1, memory_order_relaxed);
  return type == kDLCPU ? execute_cpu(&p, f, platform) : execute_gpu(&p, f, platform);
}

struct XLA_FFI_Error *dls_xla_call_cuda(struct XLA_FFI_CallFrame *frame) {
  return call(frame, kDLCUDA, DLS__XLA_TRAIT_COMMAND_BUFFER_COMPATIBLE);
}

struct XLA_FFI_Error *dls_xla_call_cuda_nocapture(struct XLA_FFI_CallFrame *frame) { return call(frame, kDLCUDA, 0); }

struct XLA_FFI_Error *dls_xla_call_cpu(struct XLA_FFI_CallFrame *frame) { return call(frame, kDLCPU, 0); }

dls_xla_stats_t dls_xla_stats(void) {
  dls_xla_stats_t s;
  s.instantiations = atomic_load_explicit(&g_instantiations, memory_order_relaxed);
  s.executions = atomic_load_explicit(&g_executions, memory_order_relaxed);
  s.stream_wraps = atomic_load_explicit(&dls__xla_wraps, memory_order_relaxed);
  return s;
}
