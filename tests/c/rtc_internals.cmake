# SPDX-License-Identifier: Apache-2.0
# test_rtc_internals: the run-time compiler's internal pieces (SHA-256 against FIPS 180-4's examples, kernel
# names read from images, damaged images), reached through the static library. Included from CMakeLists.txt.
add_executable(test_rtc_internals ${CMAKE_CURRENT_LIST_DIR}/test_rtc_internals.c)
target_link_libraries(test_rtc_internals PRIVATE dlstream_static ${DLS_CRITERION})
target_include_directories(test_rtc_internals PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/plugin)
target_compile_definitions(test_rtc_internals PRIVATE _GNU_SOURCE)
if(DLS_TEST_SHIM)
  add_test(NAME rtc_internals COMMAND test_rtc_internals)
else()
  add_test(NAME rtc_internals COMMAND test_rtc_internals --jobs 2 --timeout 120)
endif()
