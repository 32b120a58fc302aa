/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream: share GPU streams and tensors with array frameworks through
 * DLPack. The umbrella header: include this one. */
#ifndef DLSTREAM_H
#define DLSTREAM_H

#include "dlpack.h"
#include "version.h"
#include "status.h"
#include "runtime.h"
#include "stream.h"
#include "event.h"
#include "buffer.h"
#include "tensor.h"
#include "launch.h"
#include "builtin.h"
#include "group.h"
#include "graph.h"
#include "compile.h"
#include "xla.h"
#include "ipc.h"

#endif /* DLSTREAM_H */
