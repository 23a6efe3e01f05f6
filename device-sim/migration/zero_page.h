// SPDX-License-Identifier: GPL-2.0
//
// Is a 4 KiB page all zero? The check the source runs on every page it sends with zero
// detection (QEMU's buffer_is_zero): vectorised on purpose (AVX2 where the CPU has it,
// 64-bit words otherwise), and quick to reject a page that is non-zero near its start.
#ifndef VBSIM_MIGRATION_ZERO_PAGE_H
#define VBSIM_MIGRATION_ZERO_PAGE_H

#include <cstdint>

namespace vbsim::migration
{

bool page_is_zero(const uint8_t* page);
// Which implementation page_is_zero uses on this CPU ("avx2" or "u64").
const char* zero_check_kind();

// The racy reads the source makes of pages the guest may be writing at that moment (the
// dirty log sends them again if so). Plain copies in normal builds; under
// ThreadSanitizer, word loops it does not watch, so the intended race is not reported.
void copy_guest_page(uint8_t* to, const uint8_t* page);

} // namespace vbsim::migration

#endif
