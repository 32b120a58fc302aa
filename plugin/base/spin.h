/* SPDX-License-Identifier: Apache-2.0 */
/* A spinlock for short critical sections (a buffer's use set, a device's event pool). */
#ifndef DLSTREAM_BASE_SPIN_H
#define DLSTREAM_BASE_SPIN_H

#include <stdatomic.h>

typedef struct dls__spin {
  atomic_flag f;
} dls__spin;

static inline void dls__spin_lock(dls__spin *l) {
  while (atomic_flag_test_and_set_explicit(&l->f, memory_order_acquire)) {
  }
}

static inline void dls__spin_unlock(dls__spin *l) { atomic_flag_clear_explicit(&l->f, memory_order_release); }

#endif /* DLSTREAM_BASE_SPIN_H */
