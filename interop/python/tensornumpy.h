/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor.__array__ and Tensor.numpy (tensornumpy.c): NumPy's view of a CPU tensor. */
#ifndef DLSTREAM_PY_TENSORNUMPY_H
#define DLSTREAM_PY_TENSORNUMPY_H

#include "dlspy.h"

PyObject *dlspy_tensor_array(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *dlspy_tensor_numpy(TensorObject *t, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

#endif /* DLSTREAM_PY_TENSORNUMPY_H */
