/* SPDX-License-Identifier: Apache-2.0 */
/* The name records of compiled modules: name expressions to lowered names, and the kernels each module has. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "module_names.h"

typedef struct dls__names_rec {
  struct dls__names_rec *next;
  uint64_t module_id;
  size_t bytes; /* of the whole record */
  size_t n;
  const char **expressions; /* n, then n lowered names: pointers into the record */
  const char *kernels;
} dls__names_rec;

static pthread_mutex_t dls__names_mu = PTHREAD_MUTEX_INITIALIZER;
static dls__names_rec *dls__names_head;
static _Atomic size_t dls__names_count; /* lookups of modules never recorded skip the lock while it is 0 */

static dls__names_rec *dls__names_find(uint64_t module_id) {
  for (dls__names_rec *r = dls__names_head; r != NULL; r = r->next)
    if (r->module_id == module_id)
      return r;
  return NULL;
}

/* Unlinks and frees the record of a module (lock held). */
static void dls__names_drop(uint64_t module_id) {
  for (dls__names_rec **pp = &dls__names_head; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->module_id == module_id) {
      dls__names_rec *r = *pp;
      *pp = r->next;
      dls__free(r);
      atomic_fetch_sub(&dls__names_count, 1);
      return;
    }
  }
}

/* Links record `r`, replacing an earlier one of its module (lock held). */
static void names_link(dls__names_rec *r) {
  dls__names_drop(r->module_id);
  r->next = dls__names_head;
  dls__names_head = r;
  atomic_fetch_add(&dls__names_count, 1);
}

dls_status_t dls__module_names_set(uint64_t module_id, size_t n, const char *const *expressions,
                                   const char *const *lowered, const char *kernels) {
  size_t bytes = sizeof(dls__names_rec) + 2 * n * sizeof(char *) + strlen(kernels) + 1;
  for (size_t i = 0; i < n; i++)
    bytes += strlen(expressions[i]) + strlen(lowered[i]) + 2;
  dls__names_rec *r = dls__malloc(bytes);
  if (r == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "recording the names of a module: out of host memory");
  r->module_id = module_id;
  r->bytes = bytes;
  r->n = n;
  r->expressions = (const char **)(r + 1);
  char *p = (char *)(r->expressions + 2 * n);
  for (size_t i = 0; i < 2 * n; i++) {
    const char *s = i < n ? expressions[i] : lowered[i - n];
    size_t len = strlen(s) + 1;
    memcpy(p, s, len);
    r->expressions[i] = p;
    p += len;
  }
  memcpy(p, kernels, strlen(kernels) + 1);
  r->kernels = p;
  pthread_mutex_lock(&dls__names_mu);
  names_link(r);
  pthread_mutex_unlock(&dls__names_mu);
  return DLS_OK;
}

dls_status_t dls__module_names_copy(uint64_t from, uint64_t to) {
  if (atomic_load(&dls__names_count) == 0)
    return DLS_OK;
  pthread_mutex_lock(&dls__names_mu);
  dls__names_rec *r = dls__names_find(from), *c = r != NULL ? dls__malloc(r->bytes) : NULL;
  if (c != NULL) {
    memcpy(c, r, r->bytes);
    /* The pointers into the record, moved to the same offsets in the copy. */
    c->module_id = to;
    c->expressions = (const char **)(c + 1);
    for (size_t i = 0; i < 2 * c->n; i++)
      c->expressions[i] = (const char *)c + (r->expressions[i] - (const char *)r);
    c->kernels = (const char *)c + (r->kernels - (const char *)r);
    names_link(c);
  }
  pthread_mutex_unlock(&dls__names_mu);
  if (r != NULL && c == NULL)
    return dls__fail(DLS_ERR_OUT_OF_MEMORY, "copying the names of a module: out of host memory");
  return DLS_OK;
}

const char *dls__module_names_lowered(uint64_t module_id, const char *expression) {
  if (atomic_load_explicit(&dls__names_count, memory_order_relaxed) == 0)
    return NULL;
  const char *found = NULL;
  pthread_mutex_lock(&dls__names_mu);
  dls__names_rec *r = dls__names_find(module_id);
  for (size_t i = 0; r != NULL && found == NULL && i < r->n; i++)
    if (strcmp(r->expressions[i], expression) == 0)
      found = r->expressions[r->n + i];
  pthread_mutex_unlock(&dls__names_mu);
  return found; /* lives until the module is unloaded */
}

const char *dls__module_names_resolve(uint64_t module_id, const char *name) {
  const char *lowered = dls__module_names_lowered(module_id, name);
  return lowered != NULL ? lowered : name;
}

dls_status_t dls__module_names_missing(uint64_t module_id, dls_status_t status, const char *call, const char *name) {
  if (status == DLS_ERR_NOT_FOUND && atomic_load(&dls__names_count) != 0) {
    char has[640] = "";
    pthread_mutex_lock(&dls__names_mu);
    dls__names_rec *r = dls__names_find(module_id);
    if (r != NULL) {
      size_t n = (size_t)snprintf(has, sizeof has, "%s", r->kernels[0] ? r->kernels : "no kernels");
      for (size_t i = 0; i < r->n && n < sizeof has; i++)
        n += (size_t)snprintf(has + n, sizeof has - n, "%s%s (%s)", i == 0 ? "; name expressions: " : ", ",
                              r->expressions[i], r->expressions[r->n + i]);
    }
    pthread_mutex_unlock(&dls__names_mu);
    if (has[0] != '\0')
      return dls__fail(status, "%s(name=\"%s\"): no kernel of that name in the module; it has: %s", call, name, has);
  }
  return dls__fail_prefix(status, "%s(name=\"%s\")", call, name);
}

void dls__module_names_forget(uint64_t module_id) {
  if (atomic_load(&dls__names_count) == 0)
    return;
  pthread_mutex_lock(&dls__names_mu);
  dls__names_drop(module_id);
  pthread_mutex_unlock(&dls__names_mu);
}
