# SPDX-License-Identifier: Apache-2.0
# test_kernels_on_host: the CUDA built-in kernels' own code (plugin/kernels/*.cu) compiled by the host's C++
# compiler and run thread by thread (tests/c/kernels_on_host.h); only where a C++ compiler is found. Included from
# tests/c/CMakeLists.txt.
include(CheckLanguage)
check_language(CXX)
if(DLS_SANITIZE STREQUAL "thread")
  # One thread runs every GPU thread in turn: ThreadSanitizer has nothing to check, and its instrumentation made the
  # two tests 40 times slower (450 s each, against a 600 s timeout; the plain and ASan builds run them).
  message(STATUS "dlstream: test_kernels_on_host not built under ThreadSanitizer (a single thread; nothing to check)")
elseif(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  # kernels_on_host_wide: the same with every loop on 64-bit indices (kernels/grid.cuh's DLS_K_NARROW_MOST at 0),
  # which a GPU takes only above 2^32 items.
  foreach(variant "" "_wide")
    set(t test_kernels_on_host${variant})
    add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/test_kernels_on_host.cpp)
    set_target_properties(${t} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
    target_include_directories(${t} PRIVATE
      ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/plugin/kernels ${PROJECT_SOURCE_DIR}/include)
    # A misaligned 16-byte access faults on a GPU: here UBSan's alignment check stops the test there.
    target_compile_options(${t} PRIVATE -fsanitize=alignment -fno-sanitize-recover=alignment)
    target_link_options(${t} PRIVATE -fsanitize=alignment)
    add_test(NAME kernels_on_host${variant} COMMAND ${t})
    set_tests_properties(kernels_on_host${variant} PROPERTIES TIMEOUT 600)
  endforeach()
  target_compile_definitions(test_kernels_on_host_wide PRIVATE DLS_K_NARROW_MOST=0)
else()
  message(STATUS "dlstream: no C++ compiler; test_kernels_on_host (the CUDA kernels run on the host) not built")
endif()
