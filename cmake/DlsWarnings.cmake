# SPDX-License-Identifier: Apache-2.0
# Warning flags for dlstream's own C sources.
function(dls_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
      -Wmissing-prototypes -Wno-unused-parameter -Wpointer-arith -Wformat=2)
  endif()
endfunction()
