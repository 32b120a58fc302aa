/* SPDX-License-Identifier: Apache-2.0 */
/* The __cuda_array_interface__ read into a DLTensor view (cai.c); CuPy arrays read in C fill the same view. */
#ifndef DLSTREAM_PY_CAI_H
#define DLSTREAM_PY_CAI_H

#include "../dlspy.h"

typedef struct dlspy_cai {
  PyObject *stream;                         /* the producer's stream (an int > 0), or NULL: nothing to wait for */
  bool read_only;
  bool meta;                                /* dtype, shape and strides read (a CuPy read for a launch reads only
                                               the pointer and the device) */
  int version;
  DLTensor dl;                              /* strides in elements (NULL: compact); device set by the reader */
  int64_t shape[DLS__EXT_MAX_NDIM];
  int64_t strides[DLS__EXT_MAX_NDIM];
} dlspy_cai;
/* Reads an interface dict `d` of argument `arg` into `out` (dlspy_cai_clear releases it, also after a failure).
 * Refusals: version above 3, a mask, big-endian or unknown typestr, strides that are not whole elements, a
 * stream before version 3 or not a stream value. Returns 0, or -1 with an exception. */
int dlspy_cai_read(dlspy_state *st, PyObject *d, DLDevice device, const char *pycall, const char *arg,
                   dlspy_cai *out);
void dlspy_cai_clear(dlspy_cai *cai);
/* A NumPy kind ('b', 'i', 'u', 'f', 'c') and item size in bytes as a DLPack dtype; false for those dlstream does
 * not read (bool b1, int and uint 1-8, float 2-8, complex 8-16). */
bool dlspy_dtype_of_kind(char kind, long size, DLDataType *out);

#endif /* DLSTREAM_PY_CAI_H */
