// SPDX-License-Identifier: GPL-2.0
//
// Relaxed atomic counters on the compiler's __atomic builtins: readable from another
// thread (debugfs, the simulator's test thread) while the core updates them under its lock.
#ifndef VBALLOON_SUPPORT_ATOMIC_H
#define VBALLOON_SUPPORT_ATOMIC_H

#include <stdint.h>

namespace vb {

class Counter {
public:
	constexpr Counter() = default;
	void add(uint64_t n) { __atomic_fetch_add(&value_, n, __ATOMIC_RELAXED); }
	void sub(uint64_t n) { __atomic_fetch_sub(&value_, n, __ATOMIC_RELAXED); }
	void set(uint64_t n) { __atomic_store_n(&value_, n, __ATOMIC_RELAXED); }
	uint64_t get() const { return __atomic_load_n(&value_, __ATOMIC_RELAXED); }

private:
	uint64_t value_ = 0;
};

} // namespace vb

#endif
