# SPDX-License-Identifier: Apache-2.0
# The DLPack interop suites (test_dlpack*), included by tests/c/CMakeLists.txt, with the ABI layout comparison against other dlpack.h headers.
#
# DLS_SYSTEM_DLPACK_HEADER: a distribution's dlpack.h (Debian's libdlpack-dev
#   puts 0.6 at /usr/include/dlpack/dlpack.h); compared when the file exists.
# DLS_EXTRA_DLPACK_HEADER: any other dlpack.h, e.g. torch's
#   <site-packages>/torch/include/ATen/dlpack.h or CuPy's
#   <site-packages>/cupy/_core/include/cupy/dlpack/dlpack.h; compared when set.
include(CheckCSourceCompiles)

set(DLS_SYSTEM_DLPACK_HEADER "/usr/include/dlpack/dlpack.h" CACHE FILEPATH
  "A system dlpack.h whose ABI test_dlpack compares with ours")
set(DLS_EXTRA_DLPACK_HEADER "" CACHE FILEPATH
  "Another dlpack.h (torch's, CuPy's) whose ABI test_dlpack compares with ours")

# One executable per concern, each a CTest test of the same name; dlpack_fixtures.c is shared.
#   dlpack            accepted tensors and the ABI layout comparison (test_dlpack.c)
#   dlpack_reject     refused tensors          dlpack_roundtrip  import/export round trips
#   dlpack_deferred   stream-ordered release   dlpack_stream     DLPack stream values
set(_dls_dlpack_suites dlpack dlpack_reject dlpack_roundtrip dlpack_deferred dlpack_stream)
foreach(suite ${_dls_dlpack_suites})
  set(_srcs ${CMAKE_CURRENT_LIST_DIR}/test_${suite}.c ${CMAKE_CURRENT_LIST_DIR}/dlpack_fixtures.c)
  if(COMMAND dls_add_suite)
    dls_add_suite(${suite} ${_srcs})
  else()
    add_executable(test_${suite} ${_srcs})
    target_link_libraries(test_${suite} PRIVATE dlstream criterion)
    target_include_directories(test_${suite} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
    target_compile_definitions(test_${suite} PRIVATE _GNU_SOURCE)
    add_test(NAME ${suite} COMMAND test_${suite} --jobs 2 --timeout 120)
  endif()
endforeach()

# One object per header: each dlpack.h must sit alone in its translation unit.
function(dls_dlpack_layout fn header)
  set(defs "DLS_LAYOUT_HEADER=\"${header}\"" DLS_LAYOUT_FN=${fn} ${ARGN})
  if(NOT fn STREQUAL "dls_layout_ours")
    # Features whose DLPack version is uncertain: detect them in the header.
    string(MD5 key "${header}")
    string(SUBSTRING "${key}" 0 8 key)
    set(CMAKE_REQUIRED_QUIET ON)
    set(inc "#include \"${header}\"\n")
    check_c_source_compiles("${inc}int main(void) { return (int)kDLMAIA; }" DLS_LAYOUT_${key}_HAS_MAIA)
    check_c_source_compiles("${inc}int main(void) { return (int)kDLTrn; }" DLS_LAYOUT_${key}_HAS_TRN)
    check_c_source_compiles(
      "${inc}int main(void) { DLPackExchangeAPI a; a.current_work_stream = 0; return (int)sizeof a; }"
      DLS_LAYOUT_${key}_HAS_EXCHANGE_API)
    foreach(feature MAIA TRN EXCHANGE_API)
      if(DLS_LAYOUT_${key}_HAS_${feature})
        list(APPEND defs DLS_LAYOUT_HAS_${feature})
      endif()
    endforeach()
  endif()
  add_library(${fn} OBJECT ${CMAKE_CURRENT_LIST_DIR}/dlpack_layout.c)
  target_compile_definitions(${fn} PRIVATE ${defs})
  target_include_directories(${fn} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_sources(test_dlpack PRIVATE $<TARGET_OBJECTS:${fn}>)
endfunction()

get_filename_component(_dls_our_dlpack ${CMAKE_CURRENT_LIST_DIR}/../../include/dlstream/dlpack.h ABSOLUTE)
dls_dlpack_layout(dls_layout_ours "${_dls_our_dlpack}" DLS_LAYOUT_ALL)
if(DLS_SYSTEM_DLPACK_HEADER AND EXISTS "${DLS_SYSTEM_DLPACK_HEADER}")
  dls_dlpack_layout(dls_layout_system "${DLS_SYSTEM_DLPACK_HEADER}")
  target_compile_definitions(test_dlpack PRIVATE DLS_HAVE_SYSTEM_DLPACK)
  message(STATUS "dlstream: test_dlpack compares dlpack.h with ${DLS_SYSTEM_DLPACK_HEADER}")
endif()
if(DLS_EXTRA_DLPACK_HEADER)
  if(NOT EXISTS "${DLS_EXTRA_DLPACK_HEADER}")
    message(FATAL_ERROR "DLS_EXTRA_DLPACK_HEADER=${DLS_EXTRA_DLPACK_HEADER} does not exist")
  endif()
  dls_dlpack_layout(dls_layout_extra "${DLS_EXTRA_DLPACK_HEADER}")
  target_compile_definitions(test_dlpack PRIVATE DLS_HAVE_EXTRA_DLPACK)
  message(STATUS "dlstream: test_dlpack compares dlpack.h with ${DLS_EXTRA_DLPACK_HEADER}")
endif()
