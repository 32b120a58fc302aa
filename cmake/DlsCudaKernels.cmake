# SPDX-License-Identifier: Apache-2.0
# Compiles plugin/kernels/*.cu with nvcc into one fatbin (SASS for each of
# DLS_CUDA_ARCHS plus PTX of the last, for newer GPUs) and embeds it as a C
# array. Without nvcc the library still builds; the CUDA built-ins then
# report DLS_ERR_UNAVAILABLE.
# Sets DLS_KERNEL_SOURCES and DLS_KERNEL_DEFINES for the library target, and
# DLS_CUDA_FATBIN: the fatbin as a file (<build>/kernels/dls_builtins_cuda.fatbin),
# which the HIP-on-CUDA stand-in's runs load through DLSTREAM_HIP_BUILTINS.
include(DlsKernelImage)
set(DLS_KERNEL_SOURCES "")
set(DLS_KERNEL_DEFINES "")
set(DLS_CUDA_FATBIN "")
if(DLS_CUDA_KERNELS STREQUAL "OFF")
  message(STATUS "dlstream: CUDA built-in kernels disabled (DLS_CUDA_KERNELS=OFF)")
  return()
endif()
find_program(DLS_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin
  PATHS /usr/local/cuda/bin)
if(NOT DLS_NVCC)
  if(DLS_CUDA_KERNELS STREQUAL "ON")
    message(FATAL_ERROR "DLS_CUDA_KERNELS=ON but nvcc was not found (set CUDA_HOME or put nvcc on PATH)")
  endif()
  message(STATUS "dlstream: nvcc not found; CUDA built-in kernels will be unavailable")
  return()
endif()
# CUDA 13 builds sm_75 and newer. The PTX of the last architecture lets the
# driver compile the kernels for GPUs newer than the list.
set(DLS_CUDA_ARCHS 75 80 86 89 90 CACHE STRING "SASS architectures of the built-in kernels")
set(_gencode "")
foreach(a ${DLS_CUDA_ARCHS})
  list(APPEND _gencode -gencode=arch=compute_${a},code=sm_${a})
endforeach()
list(GET DLS_CUDA_ARCHS -1 _last)
list(APPEND _gencode -gencode=arch=compute_${_last},code=compute_${_last})
set(_fatbin ${CMAKE_CURRENT_BINARY_DIR}/kernels/dls_builtins_cuda.fatbin)
dls_kernel_image(NAME cuda OUTPUT ${_fatbin} SYMBOL dls__cuda_kernels_fatbin
  COMPILER ${DLS_NVCC} FLAGS -fatbin -O3 ${_gencode})
if(NOT DLS_KERNEL_IMAGE_SOURCE)
  return()
endif()
set(DLS_KERNEL_SOURCES ${DLS_KERNEL_IMAGE_SOURCE})
set(DLS_KERNEL_DEFINES DLS_HAVE_CUDA_KERNELS=1)
set(DLS_CUDA_FATBIN ${_fatbin})
message(STATUS "dlstream: CUDA built-in kernels with ${DLS_NVCC} for sm_${DLS_CUDA_ARCHS}")
