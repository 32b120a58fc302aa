/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel names of an image (cubin, PTX, ROCm code object), for messages that say what a module has. */
#include <string.h>

#include "rtc/rtc_internal.h"

/* ELF facts (System V gABI; CUDA and AMDGPU supplements). */
enum {
  DLS__ELF_CLASS64 = 2,
  DLS__ELF_DATA_LE = 1,
  DLS__ELF_SHT_SYMTAB = 2,
  DLS__ELF_STT_FUNC = 2,
  DLS__ELF_EM_CUDA = 190,
  DLS__ELF_EM_AMDGPU = 224,
  DLS__ELF_STO_CUDA_ENTRY = 0x10, /* st_other bit of a kernel in a cubin */
};

static uint64_t dls__le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Appends a name to the list; false once the list is full (marked "..."). */
static bool dls__names_add(char *out, size_t size, const char *name, size_t len) {
  size_t n = strlen(out);
  size_t need = (n ? 2 : 0) + len + 1;
  if (n + need + 4 > size) {
    if (n + 6 <= size)
      memcpy(out + n, n ? ", ..." : "...", n ? 6 : 4);
    return false;
  }
  if (n != 0) {
    memcpy(out + n, ", ", 2);
    n += 2;
  }
  memcpy(out + n, name, len);
  out[n + len] = '\0';
  return true;
}

/* A string of the string table at [base, base + size) (bounded, NUL-terminated in it). */
static const char *dls__elf_str(const uint8_t *img, size_t img_size, uint64_t base, uint64_t size, uint64_t off,
                                size_t *out_len) {
  if (base > img_size || size > img_size - base || off >= size)
    return NULL;
  const char *s = (const char *)img + base + off;
  const char *nul = memchr(s, '\0', (size_t)(size - off));
  if (nul == NULL)
    return NULL;
  *out_len = (size_t)(nul - s);
  return s;
}

static void dls__elf_kernel_names(const uint8_t *img, size_t size, char *out, size_t out_size) {
  if (size < 64 || img[4] != DLS__ELF_CLASS64 || img[5] != DLS__ELF_DATA_LE)
    return;
  uint64_t machine = dls__le(img + 18, 2), shoff = dls__le(img + 40, 8);
  uint64_t shentsize = dls__le(img + 58, 2), shnum = dls__le(img + 60, 2);
  if ((machine != DLS__ELF_EM_CUDA && machine != DLS__ELF_EM_AMDGPU) || shentsize < 64 || shoff > size ||
      shnum > (size - shoff) / shentsize)
    return;
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t *sh = img + shoff + i * shentsize;
    if (dls__le(sh + 4, 4) != DLS__ELF_SHT_SYMTAB)
      continue;
    uint64_t off = dls__le(sh + 24, 8), len = dls__le(sh + 32, 8), link = dls__le(sh + 40, 4);
    uint64_t entsize = dls__le(sh + 56, 8);
    if (entsize < 24 || off > size || len > size - off || link >= shnum)
      continue;
    const uint8_t *strsh = img + shoff + link * shentsize;
    uint64_t str_off = dls__le(strsh + 24, 8), str_len = dls__le(strsh + 32, 8);
    for (uint64_t k = 0; k + entsize <= len; k += entsize) {
      const uint8_t *sym = img + off + k;
      size_t nlen = 0;
      const char *name = dls__elf_str(img, size, str_off, str_len, dls__le(sym, 4), &nlen);
      if (name == NULL || nlen == 0)
        continue;
      bool kernel;
      if (machine == DLS__ELF_EM_CUDA) {
        kernel = (sym[4] & 0xf) == DLS__ELF_STT_FUNC && (sym[5] & DLS__ELF_STO_CUDA_ENTRY) != 0;
      } else { /* AMDGPU code objects name each kernel's descriptor "<kernel>.kd" */
        kernel = nlen > 3 && memcmp(name + nlen - 3, ".kd", 3) == 0;
        nlen -= kernel ? 3 : 0;
      }
      if (kernel && !dls__names_add(out, out_size, name, nlen))
        return;
    }
  }
}

static bool dls__ptx_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '.';
}

/* Every ".entry <name>" of a PTX text. */
static void dls__ptx_kernel_names(const char *ptx, size_t size, char *out, size_t out_size) {
  static const char word[] = ".entry";
  const size_t wn = sizeof word - 1;
  for (size_t i = 0; i + wn < size && ptx[i] != '\0'; i++) {
    if (memcmp(ptx + i, word, wn) != 0 || (i > 0 && dls__ptx_ident(ptx[i - 1])))
      continue;
    size_t j = i + wn;
    if (j >= size || (ptx[j] != ' ' && ptx[j] != '\t'))
      continue;
    while (j < size && (ptx[j] == ' ' || ptx[j] == '\t'))
      j++;
    size_t start = j;
    while (j < size && dls__ptx_ident(ptx[j]))
      j++;
    if (j > start && !dls__names_add(out, out_size, ptx + start, j - start))
      return;
    i = j;
  }
}

void dls__rtc_kernel_names(const void *image, size_t size, char *out, size_t out_size) {
  if (out_size == 0)
    return;
  out[0] = '\0';
  if (image == NULL || out_size < 8)
    return;
  const uint8_t *p = image;
  if (size >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0)
    dls__elf_kernel_names(p, size, out, out_size);
  else
    dls__ptx_kernel_names(image, size, out, out_size);
}
