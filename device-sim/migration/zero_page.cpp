// SPDX-License-Identifier: GPL-2.0
#include "migration/zero_page.h"

#include <cstring>

#include <immintrin.h>

#include "memory/guest_memory.h"

#if defined(__SANITIZE_THREAD__)
#define VB_RACY_READS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VB_RACY_READS 1
#endif
#endif

namespace vbsim::migration
{

namespace
{

constexpr unsigned kPageBytes = GuestMemory::kWirePageBytes;

#if defined(VB_RACY_READS)
// The source reads pages a guest thread may be writing; the dirty log makes that safe
// (the page goes again). ThreadSanitizer is told not to watch these reads, and the loops
// stay loops (a memcpy call would be intercepted and watched).
#define VB_UNWATCHED __attribute__((no_sanitize_thread, optimize("no-tree-loop-distribute-patterns")))

VB_UNWATCHED bool page_is_zero_words(const uint8_t* page)
{
	const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(page);
	uint64_t any = 0;
	for (unsigned i = 0; i < kPageBytes / 8; i++)
		any |= words[i];
	return any == 0;
}

VB_UNWATCHED void copy_words(uint8_t* to, const uint8_t* page)
{
	const volatile uint64_t* from = reinterpret_cast<const volatile uint64_t*>(page);
	uint64_t* into = reinterpret_cast<uint64_t*>(to);
	for (unsigned i = 0; i < kPageBytes / 8; i++)
		into[i] = from[i];
}
#else
bool page_is_zero_words(const uint8_t* page)
{
	const uint64_t* words = reinterpret_cast<const uint64_t*>(page);
	if ((words[0] | words[1] | words[2] | words[3]) != 0)
		return false;
	uint64_t any = 0;
	for (unsigned i = 4; i < kPageBytes / 8; i++)
		any |= words[i];
	return any == 0;
}

__attribute__((target("avx2"))) bool page_is_zero_avx2(const uint8_t* page)
{
	const __m256i* lanes = reinterpret_cast<const __m256i*>(page);
	// A non-zero page is usually non-zero at its start: one lane rejects it.
	if (!_mm256_testz_si256(_mm256_loadu_si256(lanes), _mm256_loadu_si256(lanes)))
		return false;
	// Then 256 bytes per step, ORed together, tested once per step.
	for (unsigned i = 0; i < kPageBytes / 32; i += 8) {
		__m256i any = _mm256_or_si256(
			_mm256_or_si256(_mm256_or_si256(_mm256_loadu_si256(lanes + i),
							_mm256_loadu_si256(lanes + i + 1)),
					_mm256_or_si256(_mm256_loadu_si256(lanes + i + 2),
							_mm256_loadu_si256(lanes + i + 3))),
			_mm256_or_si256(_mm256_or_si256(_mm256_loadu_si256(lanes + i + 4),
							_mm256_loadu_si256(lanes + i + 5)),
					_mm256_or_si256(_mm256_loadu_si256(lanes + i + 6),
							_mm256_loadu_si256(lanes + i + 7))));
		if (!_mm256_testz_si256(any, any))
			return false;
	}
	return true;
}

bool have_avx2()
{
	static const bool avx2 = __builtin_cpu_supports("avx2");
	return avx2;
}
#endif

} // namespace

bool page_is_zero(const uint8_t* page)
{
#if defined(VB_RACY_READS)
	return page_is_zero_words(page);
#else
	return have_avx2() ? page_is_zero_avx2(page) : page_is_zero_words(page);
#endif
}

const char* zero_check_kind()
{
#if defined(VB_RACY_READS)
	return "u64-unwatched";
#else
	return have_avx2() ? "avx2" : "u64";
#endif
}

void copy_guest_page(uint8_t* to, const uint8_t* page)
{
#if defined(VB_RACY_READS)
	copy_words(to, page);
#else
	std::memcpy(to, page, kPageBytes);
#endif
}

} // namespace vbsim::migration
