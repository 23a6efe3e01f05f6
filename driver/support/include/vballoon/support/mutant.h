// SPDX-License-Identifier: GPL-2.0
//
// Deliberate rule breakages ("mutants") that prove the tests named in spec/requirements.md
// check their rules. `if (VB_MUTANT(POISON03_POISON_VAL_AFTER_DRIVER_OK))` marks the one
// place where a rule binds; ci/mutants.sh turns each mutant on in turn and expects the
// row's tests to fail. spec/mutants.tsv maps every mutant to its requirement row.
//
// In every normal build (userspace, sanitizers, the kernel module, the freestanding check)
// the macro is the constant `false`: the branch folds away and the object refers to nothing.
// Only the build configured with -DVB_MUTANTS=ON (build-mutants/, userspace only; CI runs its
// plain tests there with no mutant on) asks the test harness, which reads the VB_MUTANT
// environment variable (tests/mutants/mutant_switch.cpp).
#ifndef VBALLOON_SUPPORT_MUTANT_H
#define VBALLOON_SUPPORT_MUTANT_H

//
// A hook sits in a rule predicate (the rules/ headers beside the code they guard), named
// after the rule it keeps, so that code reads as the rule. VB_RULE declares one: constexpr
// wherever the macro is `false`, so the predicate is a compile-time constant there.
#ifdef VB_MUTANTS
extern "C" bool vb_mutant_active(const char* id);
#define VB_MUTANT(id) (vb_mutant_active(#id))
#define VB_RULE inline
#else
#define VB_MUTANT(id) false
#define VB_RULE constexpr
#endif

#endif
