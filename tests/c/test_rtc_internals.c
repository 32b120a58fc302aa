/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of run-time compilation: SHA-256 against the standard's examples, kernel names of images, damaged images. */
#include "common.h"
#include "rtc/rtc_internal.h"

TestSuite(rtc_internals, .fini = dlst_fini);

static void hex(const uint8_t d[32], char out[65]) {
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void digest_of(const void *data, size_t n, size_t step, char out[65]) {
  dls__sha256 s;
  dls__sha256_init(&s);
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i += step)
    dls__sha256_update(&s, p + i, n - i < step ? n - i : step);
  uint8_t d[32];
  dls__sha256_final(&s, d);
  hex(d, out);
}

/* The examples of FIPS 180-4 (NIST's "SHA256.pdf" and "SHA2_Additional.pdf"). */
Test(rtc_internals, sha256_matches_the_standards_examples) {
  char out[65];
  digest_of("abc", 3, 3, out);
  cr_assert_str_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  digest_of("", 0, 1, out);
  cr_assert_str_eq(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  static const char two_blocks[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  for (size_t step = 1; step <= 64; step *= 4) {
    digest_of(two_blocks, sizeof two_blocks - 1, step, out);
    cr_assert_str_eq(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "step %zu", step);
  }
  static uint8_t million[1000000];
  memset(million, 'a', sizeof million);
  digest_of(million, sizeof million, 4096 + 3, out);
  cr_assert_str_eq(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Test(rtc_internals, fields_do_not_run_into_each_other) {
  uint8_t a[32], b[32];
  dls__sha256 s;
  dls__sha256_init(&s);
  dls__sha256_str(&s, "ab");
  dls__sha256_str(&s, "c");
  dls__sha256_final(&s, a);
  dls__sha256_init(&s);
  dls__sha256_str(&s, "a");
  dls__sha256_str(&s, "bc");
  dls__sha256_final(&s, b);
  cr_assert(memcmp(a, b, 32) != 0, "(\"ab\", \"c\") and (\"a\", \"bc\") hash apart");
  dls__sha256_init(&s);
  dls__sha256_str(&s, NULL);
  dls__sha256_final(&s, a);
  dls__sha256_init(&s);
  dls__sha256_str(&s, "");
  dls__sha256_final(&s, b);
  cr_assert(memcmp(a, b, 32) != 0, "NULL and \"\" hash apart");
}

Test(rtc_internals, kernel_names_of_ptx) {
  static const char ptx[] = ".version 8.0\n.target sm_80\n.visible .entry axpy(\n.param .u64 p)\n{ ret; }\n"
                            ".entry\t_Z5scaleIfEvPT_S0_i (\n)\n{}\n.func helper_entry()\n// .entry_like x\n";
  char out[256];
  dls__rtc_kernel_names(ptx, sizeof ptx, out, sizeof out);
  cr_assert_str_eq(out, "axpy, _Z5scaleIfEvPT_S0_i");
  char tiny[16];
  dls__rtc_kernel_names(ptx, sizeof ptx, tiny, sizeof tiny);
  cr_assert_str_eq(tiny, "axpy, ...", "a full list ends with ...");
  dls__rtc_kernel_names(NULL, 0, out, sizeof out);
  cr_assert_str_eq(out, "");
}

static const char k_src[] = "extern \"C\" __global__ void first(int *p) { *p = 1; }\n"
                            "__device__ __noinline__ int twice(int x) { return 2 * x; }\n"
                            "extern \"C\" __global__ void second(int *p) { *p = twice(*p); }\n";

Test(rtc_internals, kernel_names_of_a_cubin_leave_out_device_functions) {
  if (dls_compiler_version(DLS_COMPILER_NVRTC, NULL, NULL) != DLS_OK)
    cr_skip_test("%s", dls_last_error());
  void *img;
  size_t n;
  cr_assert_eq(dls_compile(k_src, NULL, "sm_80", &img, &n, NULL), DLS_OK, "%s", dls_last_error());
  char out[256];
  dls__rtc_kernel_names(img, n, out, sizeof out);
  cr_assert(strcmp(out, "first, second") == 0 || strcmp(out, "second, first") == 0, "names: %s", out);
  /* Every truncation and a sweep of flipped bytes: never a read outside the image (ASan watches). */
  uint8_t *copy = malloc(n);
  for (size_t cut = 0; cut < n; cut += (cut < 256 ? 1 : 61)) {
    memcpy(copy, img, cut);
    dls__rtc_kernel_names(copy, cut, out, sizeof out);
  }
  for (size_t i = 0; i < n; i += 3) {
    memcpy(copy, img, n);
    copy[i] ^= 0xff;
    dls__rtc_kernel_names(copy, n, out, sizeof out);
  }
  free(copy);
  dls_compile_free(img);
}
