# SPDX-License-Identifier: Apache-2.0
# test_xla_decls: checks interop/xla/xla_ffi.h against the XLA FFI header JAX ships (jax.ffi.include_dir(), i.e.
# jaxlib's include/), found without importing JAX. Included from tests/c/CMakeLists.txt. The checks are
# _Static_asserts, so a mismatch fails the build. Without JAX the test is registered as skipped, with its reason.
if(NOT Python_EXECUTABLE)
  find_package(Python 3.11 COMPONENTS Interpreter QUIET)
endif()
set(_dls_xla_include "")
if(Python_EXECUTABLE)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import importlib.util, os; s = importlib.util.find_spec('jaxlib'); print(os.path.join(os.path.dirname(s.origin), 'include') if s and s.origin else '')"
    OUTPUT_VARIABLE _dls_xla_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(_dls_xla_include AND EXISTS "${_dls_xla_include}/xla/ffi/api/c_api.h")
  add_executable(test_xla_decls ${CMAKE_CURRENT_LIST_DIR}/test_xla_decls.c)
  target_include_directories(test_xla_decls SYSTEM PRIVATE ${_dls_xla_include})
  target_include_directories(test_xla_decls PRIVATE
    ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/plugin ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/interop)
  if(COMMAND dls_warnings)
    dls_warnings(test_xla_decls)
  endif()
  add_test(NAME xla_decls COMMAND test_xla_decls)
  message(STATUS "dlstream: test_xla_decls checks xla_ffi.h against ${_dls_xla_include}/xla/ffi/api/c_api.h")
else()
  set(_why "JAX is not installed for ${Python_EXECUTABLE} (no jaxlib/include/xla/ffi/api/c_api.h): pip install jax")
  add_test(NAME xla_decls COMMAND sh -c "echo 'test_xla_decls skipped: ${_why}'; exit 77")
  set_tests_properties(xla_decls PROPERTIES SKIP_RETURN_CODE 77)
  message(STATUS "dlstream: test_xla_decls not built: ${_why}")
endif()
