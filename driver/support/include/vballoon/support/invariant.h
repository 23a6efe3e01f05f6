// SPDX-License-Identifier: GPL-2.0
//
// VB_INVARIANT(cond): an accounting rule of the core that holds whatever the device does
// (a lying or vanishing device must not break it; only a bug in the core can). Unlike
// VB_MUTANT() it is compiled into every build: the condition is evaluated, and when it is
// false vb_invariant_failed() says so. The module's glue warns once (WARN_ONCE in
// driver/linux/vballoon_os.c) and goes on; userspace (the simulator, the tests) aborts
// (driver/support/src/invariant_abort.cpp), so a test cannot pass over a broken rule.
//
// Conditions are cheap comparisons of counts the core keeps anyway: no loops, no calls into
// the OS, no side effects.
#ifndef VBALLOON_SUPPORT_INVARIANT_H
#define VBALLOON_SUPPORT_INVARIANT_H

extern "C" void vb_invariant_failed(const char* condition, const char* file, int line);

#define VB_INVARIANT(cond)                                                       \
	do {                                                                     \
		if (__builtin_expect(!(cond), 0))                                \
			vb_invariant_failed(#cond, __FILE__, __LINE__);          \
	} while (0)

#endif
