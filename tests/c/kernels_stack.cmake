# SPDX-License-Identifier: Apache-2.0
# kernels_stack: the CUDA built-in kernels keep (almost) nothing on each thread's stack. A kernel that takes the
# address of its descriptor parameter without __grid_constant__ (kernels/grid.cuh, DLS_K_PARAM), or keeps a layout
# of its own per thread, makes every thread write ~200 bytes of local memory at each launch: ~17 us a call of
# dls_copy and the conversions on an H200 at a full grid, whatever the size. ptxas reports each kernel's stack
# frame; this test compiles the kernels for sm_90 and fails where one is at least a quarter of a descriptor.
# Only where nvcc built the fatbin. Included from tests/c/CMakeLists.txt.
if(DLS_NVCC AND DLS_CUDA_FATBIN AND EXISTS ${PROJECT_BINARY_DIR}/dls_kernels_all_cuda.cu)
  add_test(NAME kernels_stack COMMAND ${CMAKE_COMMAND} -DNVCC=${DLS_NVCC}
           -DUNIT=${PROJECT_BINARY_DIR}/dls_kernels_all_cuda.cu -DINCLUDE=${PROJECT_SOURCE_DIR}/include
           -DOUT=${CMAKE_CURRENT_BINARY_DIR}/kernels_stack.cubin -DLIMIT=64
           -P ${CMAKE_CURRENT_LIST_DIR}/kernels_stack_check.cmake)
  set_tests_properties(kernels_stack PROPERTIES TIMEOUT 600)
endif()
