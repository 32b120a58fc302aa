/* SPDX-License-Identifier: Apache-2.0 */
/* The extension's entry to the hints of the library's messages, in C words and in Python's (ext.h). */
#include "base/hints.h"
#include "ext.h"

#define DLS__EXT_HINT(c, python) {c, python},
static const dls__ext_hint dls__ext_hint_table[] = {DLS__HINTS(DLS__EXT_HINT)};
#undef DLS__EXT_HINT

const dls__ext_hint *dls__ext_hints(size_t *out_count) {
  *out_count = sizeof dls__ext_hint_table / sizeof dls__ext_hint_table[0];
  return dls__ext_hint_table;
}
