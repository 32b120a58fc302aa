# SPDX-License-Identifier: Apache-2.0
# The HIP backend's tests that need no AMD GPU. Included from tests/c/CMakeLists.txt.
# - test_hip: what the probe reports with the real runtime, without it, and
#   through DLSTREAM_HIP_LIBRARY (the stand-in included); hip_probe is its
#   fresh-process helper.
# - test_hip_decls: checks plugin/backend/hip_runtime_decls.h against the
#   ROCm headers (Debian: libamdhip64-dev) at compile time, where they are.
add_executable(hip_probe ${CMAKE_CURRENT_LIST_DIR}/hip_probe.c)
target_link_libraries(hip_probe PRIVATE dlstream)
dls_add_suite(hip)
target_link_libraries(test_hip PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(test_hip PRIVATE DLST_HIP_PROBE="$<TARGET_FILE:hip_probe>"
  DLST_HIP_ON_CUDA="$<TARGET_FILE:dls_hip_on_cuda>")
add_dependencies(test_hip hip_probe dls_hip_on_cuda)

find_path(DLS_HIP_INCLUDE_DIR NAMES hip/hip_runtime_api.h
  HINTS ENV ROCM_PATH ENV HIP_PATH PATH_SUFFIXES include PATHS /opt/rocm/include /usr/include)
if(DLS_HIP_INCLUDE_DIR AND EXISTS "${DLS_HIP_INCLUDE_DIR}/hip/hip_version.h")
  add_executable(test_hip_decls ${CMAKE_CURRENT_LIST_DIR}/test_hip_decls.c)
  target_include_directories(test_hip_decls PRIVATE
    ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/plugin ${PROJECT_SOURCE_DIR}/include ${DLS_HIP_INCLUDE_DIR})
  # The headers' C API for AMD GPUs, without hipcc.
  target_compile_definitions(test_hip_decls PRIVATE __HIP_PLATFORM_AMD__)
  dls_warnings(test_hip_decls)
  add_test(NAME hip_decls COMMAND test_hip_decls)
  message(STATUS "dlstream: test_hip_decls checks hip_runtime_decls.h against ${DLS_HIP_INCLUDE_DIR}/hip")
else()
  message(STATUS "dlstream: ROCm's hip/hip_runtime_api.h not found (apt-get install libamdhip64-dev); "
                 "test_hip_decls not built")
  # A visible skip (CTest reports it as Skipped): exit status 77.
  add_test(NAME hip_decls COMMAND sh -c
    "echo 'SKIPPED: ROCm headers (hip/hip_runtime_api.h) not found at configure time: apt-get install libamdhip64-dev'; exit 77")
  set_tests_properties(hip_decls PROPERTIES SKIP_RETURN_CODE 77)
endif()
