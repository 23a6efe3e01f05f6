// SPDX-License-Identifier: GPL-2.0
//
// Rate limiting for error logs on paths a broken device can drive in a loop. The core has
// no clock, so the limit is by count: the 1st, 2nd, 4th, 8th... occurrence is logged (with
// its number), which keeps a storm of failures to a few dozen lines in the log.
#ifndef VBALLOON_CORE_LOG_LIMIT_H
#define VBALLOON_CORE_LOG_LIMIT_H

#include <stdint.h>

namespace vb {

class LogLimit {
public:
	// Counts one occurrence; true when this one should be logged.
	bool allow()
	{
		occurrences_++;
		return (occurrences_ & (occurrences_ - 1)) == 0;
	}
	uint64_t occurrences() const { return occurrences_; }

private:
	uint64_t occurrences_ = 0;
};

} // namespace vb

#endif
