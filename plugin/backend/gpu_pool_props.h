/* SPDX-License-Identifier: Apache-2.0 */
/* The properties of a memory pool, in the one layout CUDA's CUmemPoolProps and HIP's hipMemPoolProps share.
 *
 * Both vendors' structs are 88 bytes: the same first four fields, then 64
 * bytes that must be zero for a plain device pool (CUDA: maxSize, usage,
 * reserved; ROCm 5.2: reserved; ROCm 6: maxSize, reserved). The decls tests
 * check this layout against cuda.h and hip_runtime_api.h. */
#ifndef DLSTREAM_BACKEND_GPU_POOL_PROPS_H
#define DLSTREAM_BACKEND_GPU_POOL_PROPS_H

typedef struct dls__gpu_mem_location {
  unsigned int type; /* CUmemLocationType, hipMemLocationType: a device */
  int id;            /* the device's ordinal */
} dls__gpu_mem_location;

typedef struct dls__gpu_pool_props {
  unsigned int alloc_type;         /* pinned (page-locked device) memory */
  unsigned int handle_types;       /* none: not exportable */
  dls__gpu_mem_location location;  /* where the pool's memory lives */
  void *win32_security_attributes; /* NULL off Windows */
  unsigned char zero[64];          /* all zero: the vendors' defaults */
} dls__gpu_pool_props;

/* Who may access a pool's memory (CUmemAccessDesc, hipMemAccessDesc). */
typedef struct dls__gpu_access_desc {
  dls__gpu_mem_location location; /* a device */
  unsigned int flags;             /* read-write (CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3, the same in HIP) */
} dls__gpu_access_desc;

#endif /* DLSTREAM_BACKEND_GPU_POOL_PROPS_H */
