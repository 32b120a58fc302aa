# SPDX-License-Identifier: Apache-2.0
# Compiles plugin/kernels/*.cu with hipcc into one code object bundle (a
# code object for each of DLS_HIP_ARCHS) and embeds it as a C array, as
# DlsCudaKernels.cmake does for the fatbin; include it after that one.
# Without hipcc the library still builds: the HIP built-ins then report
# DLS_ERR_UNAVAILABLE, unless DLSTREAM_HIP_BUILTINS names a code object.
# Appends to DLS_KERNEL_SOURCES and DLS_KERNEL_DEFINES.
#
# The targets: what Debian's hipcc (ROCm 5.2.3) builds with the real-time
# clock the spin and latch kernels need: Vega (gfx900), MI50/60 (gfx906),
# MI100 (gfx908), MI200 (gfx90a), RDNA1 (gfx1010), RDNA2 (gfx1030). Newer
# GPUs (MI300 gfx942, RDNA3 gfx11xx) need a newer ROCm: docs/hip.md.
set(DLS_HIP_KERNELS "AUTO" CACHE STRING "Build the HIP built-in kernels with hipcc: AUTO, ON, OFF")
set(DLS_HIP_ARCHS gfx900 gfx906 gfx908 gfx90a gfx1010 gfx1030 CACHE STRING
  "gfx targets of the embedded HIP built-in kernels")
if(DLS_HIP_KERNELS STREQUAL "OFF")
  message(STATUS "dlstream: HIP built-in kernels disabled (DLS_HIP_KERNELS=OFF)")
  return()
endif()
find_program(DLS_HIPCC hipcc HINTS ENV ROCM_PATH ENV HIP_PATH PATH_SUFFIXES bin PATHS /opt/rocm/bin)
if(NOT DLS_HIPCC)
  if(DLS_HIP_KERNELS STREQUAL "ON")
    message(FATAL_ERROR "DLS_HIP_KERNELS=ON but hipcc was not found (apt-get install hipcc rocm-device-libs, "
                        "or put ROCm's bin directory on PATH)")
  endif()
  message(STATUS "dlstream: hipcc not found; HIP built-in kernels will be unavailable (apt-get install hipcc "
                 "rocm-device-libs, or load your own with DLSTREAM_HIP_BUILTINS=<file> at run time)")
  return()
endif()
include(DlsKernelImage)
set(_dls_hip_flags --genco -O3 -include hip/hip_runtime.h)
foreach(a ${DLS_HIP_ARCHS})
  list(APPEND _dls_hip_flags --offload-arch=${a})
endforeach()
dls_kernel_image(NAME hip OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/kernels/dls_builtins_hip.co
  SYMBOL dls__hip_kernels_bundle COMPILER ${DLS_HIPCC} FLAGS ${_dls_hip_flags})
if(NOT DLS_KERNEL_IMAGE_SOURCE)
  return()
endif()
list(JOIN DLS_HIP_ARCHS ", " _dls_hip_arch_text)
list(APPEND DLS_KERNEL_SOURCES ${DLS_KERNEL_IMAGE_SOURCE})
list(APPEND DLS_KERNEL_DEFINES DLS_HAVE_HIP_KERNELS=1 "DLS_HIP_ARCHS=\"${_dls_hip_arch_text}\"")
message(STATUS "dlstream: HIP built-in kernels with ${DLS_HIPCC} for ${_dls_hip_arch_text}")
