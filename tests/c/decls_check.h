/* SPDX-License-Identifier: Apache-2.0 */
/* Compile-time checks shared by the decls tests: our declarations of a vendor's API against the vendor's own header. */
#ifndef DLSTREAM_TESTS_DECLS_CHECK_H
#define DLSTREAM_TESTS_DECLS_CHECK_H

#include <stddef.h>

#include "backend/gpu_pool_props.h"

/* A constant has the header's value (an enumerator or a macro alike). */
#define DECLS_SAME_VALUE(ours, theirs) \
  _Static_assert((long long)(ours) == (long long)(theirs), #theirs " differs from the vendor's header");

/* A type is the header's, or compatible with it. */
#define DECLS_SAME_TYPE(ours, theirs) \
  _Static_assert(__builtin_types_compatible_p(ours, theirs), #ours " is not compatible with " #theirs);

/* A field sits where the header's does, with its size. */
#define DECLS_SAME_FIELD(ours, of, theirs, tf)                                             \
  _Static_assert(offsetof(ours, of) == offsetof(theirs, tf), #ours "." #of " offset");     \
  _Static_assert(sizeof(((ours *)0)->of) == sizeof(((theirs *)0)->tf), #ours "." #of " size");

/* Our function pointer type `pfn` is compatible with the prototype the
 * header declares for `name` (macro-expanded: cuMemAlloc is cuMemAlloc_v2). */
#define DECLS_SAME_PROTOTYPE(pfn, name)                                       \
  _Static_assert(__builtin_types_compatible_p(pfn, __typeof__(&name)),        \
                 #pfn " differs from the header's prototype of " #name);

/* dls__gpu_pool_props has the vendor's pool properties layout: `theirs`,
 * its fields, and `rest`: the first field after the security attributes. */
#define DECLS_POOL_PROPS(theirs, alloc, handles, location, security, rest)                     \
  _Static_assert(sizeof(dls__gpu_pool_props) == sizeof(theirs), #theirs " size");             \
  _Static_assert(_Alignof(dls__gpu_pool_props) == _Alignof(theirs), #theirs " alignment");    \
  DECLS_SAME_FIELD(dls__gpu_pool_props, alloc_type, theirs, alloc)                             \
  DECLS_SAME_FIELD(dls__gpu_pool_props, handle_types, theirs, handles)                         \
  DECLS_SAME_FIELD(dls__gpu_pool_props, location, theirs, location)                            \
  DECLS_SAME_FIELD(dls__gpu_pool_props, win32_security_attributes, theirs, security)           \
  _Static_assert(offsetof(dls__gpu_pool_props, zero) == offsetof(theirs, rest), #theirs " tail"); \
  DECLS_SAME_FIELD(dls__gpu_mem_location, type, __typeof__(((theirs *)0)->location), type)     \
  DECLS_SAME_FIELD(dls__gpu_mem_location, id, __typeof__(((theirs *)0)->location), id)

/* The access description we pass has the vendor's layout (a location, then flags). */
#define DECLS_ACCESS_DESC(theirs)                                                                 \
  _Static_assert(sizeof(dls__gpu_access_desc) == sizeof(theirs), #theirs " size");              \
  DECLS_SAME_FIELD(dls__gpu_access_desc, location, theirs, location)                            \
  DECLS_SAME_FIELD(dls__gpu_access_desc, flags, theirs, flags)

#endif /* DLSTREAM_TESTS_DECLS_CHECK_H */
