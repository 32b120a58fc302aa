/* SPDX-License-Identifier: Apache-2.0 */
/* Parameterized tests live in criterion.h in this stand-in. */
#include "criterion.h"
