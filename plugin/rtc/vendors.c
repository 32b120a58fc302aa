/* SPDX-License-Identifier: Apache-2.0 */
/* The two run-time compilers: NVRTC (CUDA) and hipRTC (ROCm), their symbol tables and where to find them. */
#include <stddef.h>

#include "rtc/rtc_internal.h"

/* X(field, NVRTC symbol, required by NVRTC, hipRTC symbol, required by hipRTC).
 * An empty symbol: the vendor has none (hipRTC makes no PTX and lists no
 * architectures). NVRTC's cubin output (11.1) and architecture list (11.2)
 * are optional: without them dlstream asks for PTX and lets the driver
 * compile it. */
#define DLS__RTC_SYMBOLS(X)                                                                 \
  X(get_error_string, nvrtcGetErrorString, true, hiprtcGetErrorString, true)                \
  X(version, nvrtcVersion, true, hiprtcVersion, true)                                       \
  X(create_program, nvrtcCreateProgram, true, hiprtcCreateProgram, true)                    \
  X(destroy_program, nvrtcDestroyProgram, true, hiprtcDestroyProgram, true)                 \
  X(compile_program, nvrtcCompileProgram, true, hiprtcCompileProgram, true)                 \
  X(get_program_log_size, nvrtcGetProgramLogSize, true, hiprtcGetProgramLogSize, true)      \
  X(get_program_log, nvrtcGetProgramLog, true, hiprtcGetProgramLog, true)                   \
  X(add_name_expression, nvrtcAddNameExpression, true, hiprtcAddNameExpression, true)       \
  X(get_lowered_name, nvrtcGetLoweredName, true, hiprtcGetLoweredName, true)                \
  X(get_code_size, nvrtcGetCUBINSize, false, hiprtcGetCodeSize, true)                       \
  X(get_code, nvrtcGetCUBIN, false, hiprtcGetCode, true)                                    \
  X(get_ptx_size, nvrtcGetPTXSize, true, , false)                                           \
  X(get_ptx, nvrtcGetPTX, true, , false)                                                    \
  X(get_num_supported_archs, nvrtcGetNumSupportedArchs, false, , false)                     \
  X(get_supported_archs, nvrtcGetSupportedArchs, false, , false)

static const dls__rtc_symbol dls__nvrtc_symbols[] = {
#define DLS__NVRTC_ENTRY(field, nv, nv_req, hip, hip_req) {#nv, offsetof(dls__rtc_api, field), nv_req},
    DLS__RTC_SYMBOLS(DLS__NVRTC_ENTRY)
#undef DLS__NVRTC_ENTRY
    {NULL, 0, false},
};

static const dls__rtc_symbol dls__hiprtc_symbols[] = {
#define DLS__HIPRTC_ENTRY(field, nv, nv_req, hip, hip_req) {#hip, offsetof(dls__rtc_api, field), hip_req},
    DLS__RTC_SYMBOLS(DLS__HIPRTC_ENTRY)
#undef DLS__HIPRTC_ENTRY
    {NULL, 0, false},
};

/* The toolkit's and the wheels' sonames, newest first; the unversioned name
 * (a toolkit's development link) last. */
static const char *const dls__nvrtc_sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                                                 "libnvrtc.so", NULL};
static const char *const dls__hiprtc_sonames[] = {"libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6",
                                                  "libhiprtc.so.5", NULL};

dls__rtc_vendor dls__nvrtc = {
    .id = DLS_COMPILER_NVRTC,
    .name = "NVRTC",
    .env = "DLSTREAM_NVRTC_LIBRARY",
    .sonames = dls__nvrtc_sonames,
    .symbols = dls__nvrtc_symbols,
    .install_hint = "install it with `pip install nvidia-cuda-nvrtc` (CUDA 13; nvidia-cuda-nvrtc-cu12 for CUDA 12) "
                    "or with the CUDA toolkit, or point DLSTREAM_NVRTC_LIBRARY at a libnvrtc.so",
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

dls__rtc_vendor dls__hiprtc = {
    .id = DLS_COMPILER_HIPRTC,
    .name = "hipRTC",
    .env = "DLSTREAM_HIPRTC_LIBRARY",
    .sonames = dls__hiprtc_sonames,
    .symbols = dls__hiprtc_symbols,
    .install_hint = "install ROCm's hipRTC (Debian/Ubuntu: the hip-runtime-amd package), add /opt/rocm/lib to the "
                    "library path, or point DLSTREAM_HIPRTC_LIBRARY at a libhiprtc.so",
    .mu = PTHREAD_MUTEX_INITIALIZER,
};
