# SPDX-License-Identifier: Apache-2.0
# DLS_SANITIZE=address (ASan + UBSan) or thread (TSan): applied to every target.
if(DLS_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(DLS_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT DLS_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DLS_SANITIZE must be '', 'address' or 'thread', not '${DLS_SANITIZE}'")
endif()
