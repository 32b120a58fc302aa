# SPDX-License-Identifier: Apache-2.0
# test_cuda_decls: checks plugin/backend/cuda_driver.h against the toolkit's cuda.h; only where cuda.h is found.
# Included from tests/c/CMakeLists.txt. The checks are _Static_asserts, so a
# mismatch fails the build; the program itself only reports what it checked.
find_path(DLS_CUDA_INCLUDE_DIR NAMES cuda.h
  HINTS ENV CUDA_HOME ENV CUDA_PATH
  PATH_SUFFIXES include
  PATHS /usr/local/cuda)
set(_dls_cuda_h_version 0)
if(DLS_CUDA_INCLUDE_DIR)
  file(STRINGS "${DLS_CUDA_INCLUDE_DIR}/cuda.h" _dls_cuda_version_line REGEX "^#define CUDA_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CUDA_VERSION ([0-9]+).*" "\\1" _dls_cuda_h_version "${_dls_cuda_version_line}")
endif()
# The newest entry point in cuda_driver.h's table is from CUDA 12.8: an older
# cuda.h lacks its PFN_ typedef and cannot check it.
if(DLS_CUDA_INCLUDE_DIR AND _dls_cuda_h_version LESS 12080)
  message(STATUS "dlstream: cuda.h ${_dls_cuda_h_version} is older than 12080; test_cuda_decls not built")
elseif(DLS_CUDA_INCLUDE_DIR AND EXISTS "${DLS_CUDA_INCLUDE_DIR}/cudaTypedefs.h")
  add_executable(test_cuda_decls ${CMAKE_CURRENT_LIST_DIR}/test_cuda_decls.c)
  target_include_directories(test_cuda_decls PRIVATE
    ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/plugin ${PROJECT_SOURCE_DIR}/include ${DLS_CUDA_INCLUDE_DIR})
  if(COMMAND dls_warnings)
    dls_warnings(test_cuda_decls)
  endif()
  add_test(NAME cuda_decls COMMAND test_cuda_decls)
  message(STATUS "dlstream: test_cuda_decls checks cuda_driver.h against ${DLS_CUDA_INCLUDE_DIR}/cuda.h")
else()
  message(STATUS "dlstream: cuda.h not found; test_cuda_decls not built")
endif()
