/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: what a capture's end makes, their replays, and the memory they own. */
#ifndef DLSTREAM_CORE_GRAPH_H
#define DLSTREAM_CORE_GRAPH_H

#include "core/use.h"

typedef struct dls__graph dls__graph;

/* Frees a graph output after the capture, its buffer gone (memory `ptr` on
 * `dev`, the buffer's `uses`): stream-ordered after the graph's last replay
 * and the buffer's eager uses; drops the buffer's reference on `gr`. Returns
 * the stream of that replay (ref held) when the free could not be ordered
 * after an eager use: the caller then frees the memory on it once those uses
 * completed. NULL otherwise. */
DLS__INTERNAL dls__stream *dls__graph_release_output(dls__graph *gr, dls__device *dev, void *ptr,
                                                     const dls__use *uses, int nuses);

#endif /* DLSTREAM_CORE_GRAPH_H */
