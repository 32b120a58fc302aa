/* SPDX-License-Identifier: Apache-2.0 */
/* What dlspy.h declares for every file of the extension: the process-wide flags, and the module's definition,
 * whose identity lives here (dlspy_state_of finds a type's module by it) while module.c, at the top, fills in
 * its contents (the function table, the slots, the state's traverse and clear) when the module is imported. */
#include "dlspy.h"

_Atomic int dlspy_dead;
_Atomic int dlspy_nogil_calls;

PyModuleDef dlspy_moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlstream._dlstream",
    .m_size = sizeof(dlspy_state),
};
