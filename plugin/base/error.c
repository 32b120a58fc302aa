/* SPDX-License-Identifier: Apache-2.0 */
/* Status names and messages, and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

#define DLS__MSG_SIZE 1024

static _Thread_local char tls_message[DLS__MSG_SIZE];

const char *dls_status_name(dls_status_t status) {
  switch (status) {
#define DLS__STATUS_NAME(name, value, msg) \
  case DLS_##name:                         \
    return "DLS_" #name;
    DLS_STATUS_MAP(DLS__STATUS_NAME)
#undef DLS__STATUS_NAME
  }
  return "DLS_UNKNOWN";
}

const char *dls_status_str(dls_status_t status) {
  switch (status) {
#define DLS__STATUS_STR(name, value, msg) \
  case DLS_##name:                        \
    return msg;
    DLS_STATUS_MAP(DLS__STATUS_STR)
#undef DLS__STATUS_STR
  }
  return "unknown status";
}

const char *dls_last_error(void) { return tls_message; }

dls_status_t dls__fail_out_null(const char *call, const char *name) {
  return dls__fail(DLS_ERR_INVALID_ARGUMENT, "%s(%s=NULL): output pointer is NULL", call, name);
}

dls_status_t dls__fail(dls_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_message, sizeof tls_message, fmt, ap);
  va_end(ap);
  return status;
}

dls_status_t dls__fail_prefix(dls_status_t status, const char *fmt, ...) {
  char inner[DLS__MSG_SIZE];
  char prefix[DLS__MSG_SIZE / 2];
  va_list ap;
  memcpy(inner, tls_message, sizeof inner);
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* prefix + ": " + inner, cut to fit */
  size_t pl = strlen(prefix), il = strlen(inner);
  if (pl > sizeof tls_message - 3)
    pl = sizeof tls_message - 3;
  memcpy(tls_message, prefix, pl);
  memcpy(tls_message + pl, ": ", 2);
  if (il > sizeof tls_message - pl - 3)
    il = sizeof tls_message - pl - 3;
  memcpy(tls_message + pl + 2, inner, il);
  tls_message[pl + 2 + il] = '\0';
  return status;
}
