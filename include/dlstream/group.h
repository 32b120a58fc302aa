/* SPDX-License-Identifier: Apache-2.0 */
/* Fork/join groups: concurrent branches on pooled streams, joined without a host sync.
 *
 *   dls_group_t g;   dls_group_begin(origin, &g);
 *   dls_stream_t a, b;   dls_group_branch(g, &a);   dls_group_branch(g, &b);
 *   ... queue work on a and on b: it runs concurrently, after the origin's earlier work ...
 *   dls_group_end(g);   // the origin waits for every branch; the host does not
 */
#ifndef DLSTREAM_GROUP_H
#define DLSTREAM_GROUP_H

#include "runtime.h"

DLS_EXTERN_C_BEGIN

/* Starts a group on `origin`: records the fork point. Owned by caller: end it
 * with dls_group_end() (dls_shutdown ends groups still open). */
DLS_API dls_status_t dls_group_begin(dls_stream_t origin, dls_group_t *out_group);

/* Hands out a new branch: a pooled stream, distinct from the group's other
 * branches, whose work starts after the fork point. The branch handle is
 * owned by the group: it becomes stale at dls_group_end(). A branch may be the
 * origin of a nested group, which must end before its parent. */
DLS_API dls_status_t dls_group_branch(dls_group_t group, dls_stream_t *out_branch);

/* Makes the caller's `stream` a branch: its work queued from now on starts after the fork point, and at
 * dls_group_end() the origin waits for all work queued on it, as for a pooled branch. The handle stays the
 * caller's (the group keeps the stream alive until it ends, and does not end it). The origin itself cannot be its
 * branch (DLS_ERR_INVALID_ARGUMENT). */
DLS_API dls_status_t dls_group_add(dls_group_t group, dls_stream_t stream);

/* Joins: the origin's later work waits for all work queued on every branch.
 * Returns the branches to the pool; the host never blocks. The group handle
 * and its branch handles are stale afterwards. DLS_ERR_STATE (and nothing
 * changes) while a group nested in one of its branches is still open. */
DLS_API dls_status_t dls_group_end(dls_group_t group);

/* Number of branches handed out so far. */
DLS_API dls_status_t dls_group_branch_count(dls_group_t group, int *out_count);

DLS_EXTERN_C_END

#endif /* DLSTREAM_GROUP_H */
