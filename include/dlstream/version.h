/* SPDX-License-Identifier: Apache-2.0 */
/* dlstream's version, as macros for the build and a function for the run. */
#ifndef DLSTREAM_VERSION_H
#define DLSTREAM_VERSION_H

#include "export.h"

#define DLS_VERSION_MAJOR 0
#define DLS_VERSION_MINOR 1
#define DLS_VERSION_PATCH 0
#define DLS_VERSION_STRING "0.1.0"
/* One integer that orders releases: 10000*major + 100*minor + patch. */
#define DLS_VERSION_NUMBER (DLS_VERSION_MAJOR * 10000 + DLS_VERSION_MINOR * 100 + DLS_VERSION_PATCH)

DLS_EXTERN_C_BEGIN
/* The version the library was built as (may differ from the header's). */
DLS_API int dls_version_number(void);
DLS_API const char *dls_version_string(void);
DLS_EXTERN_C_END

#endif /* DLSTREAM_VERSION_H */
