/* SPDX-License-Identifier: Apache-2.0 */
/* The hints of the library's messages that name C things (a DLPack device constant, a C function), written once:
 * messages take the C words from here by string concatenation, and DLS__HINTS pairs each with the words of a
 * Python caller, which the Python extension puts in their place (dls__ext_hints, interop/ext/ext.h). A message
 * must not spell one of these hints out itself (tests/python/test_python_words.py looks). */
#ifndef DLSTREAM_BASE_HINTS_H
#define DLSTREAM_BASE_HINTS_H

/* "..., or use the CPU backend (kDLCPU)." when a GPU backend is unavailable. */
#define DLS__HINT_CPU_BACKEND "the CPU backend (kDLCPU)"
/* What the CPU backend runs instead of modules and kernels from source. */
#define DLS__HINT_HOST_FUNCTIONS "make functions with dls_function_from_host"

/* X(c_words, python_words) */
#define DLS__HINTS(X)                                                                                               \
  X(DLS__HINT_CPU_BACKEND, "the CPU backend (device=\"cpu\")")                                                      \
  X(DLS__HINT_HOST_FUNCTIONS, "use dlstream's built-ins (dlstream.fill, axpy, copy, or "                          \
                              "dlstream.builtin_function(name, \"cpu\") to launch one); modules and kernels from " \
                              "source need a CUDA or ROCm device")

#endif /* DLSTREAM_BASE_HINTS_H */
