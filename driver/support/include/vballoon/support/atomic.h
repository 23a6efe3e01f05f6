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

// A word another thread may set while its owner reads and clears it (a config-change
// interrupt telling the hint worker to re-read config space).
class Flag {
public:
	constexpr Flag() = default;
	void set() { __atomic_store_n(&value_, 1u, __ATOMIC_RELEASE); }
	// True when the flag was set; it is clear afterwards.
	bool test_and_clear() { return __atomic_exchange_n(&value_, 0u, __ATOMIC_ACQ_REL) != 0; }
	// True when the flag was already set.
	bool test_and_set() { return __atomic_exchange_n(&value_, 1u, __ATOMIC_ACQ_REL) != 0; }
	bool get() const { return __atomic_load_n(&value_, __ATOMIC_ACQUIRE) != 0; }

private:
	uint32_t value_ = 0;
};

} // namespace vb

#endif
