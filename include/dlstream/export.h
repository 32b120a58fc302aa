/* SPDX-License-Identifier: Apache-2.0 */
/* The export macro that marks dlstream's public functions. */
#ifndef DLSTREAM_EXPORT_H
#define DLSTREAM_EXPORT_H

#if defined(DLS_STATIC)
#define DLS_API
#elif defined(_WIN32)
#ifdef DLS_BUILDING
#define DLS_API __declspec(dllexport)
#else
#define DLS_API __declspec(dllimport)
#endif
#else
#define DLS_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define DLS_EXTERN_C_BEGIN extern "C" {
#define DLS_EXTERN_C_END }
#else
#define DLS_EXTERN_C_BEGIN
#define DLS_EXTERN_C_END
#endif

#endif /* DLSTREAM_EXPORT_H */
