// SPDX-License-Identifier: GPL-2.0
//
// A copy of all of guest RAM, to prove afterwards that the device wrote nowhere but where
// it may (the used rings).
#ifndef VBSIM_TESTS_SIM_SUPPORT_RAM_SNAPSHOT_H
#define VBSIM_TESTS_SIM_SUPPORT_RAM_SNAPSHOT_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "memory/guest_memory.h"

namespace vbsim::test
{

class RamSnapshot
{
public:
	explicit RamSnapshot(const GuestMemory& memory) : bytes_(memory.size())
	{
		if (!memory.read(0, bytes_.data(), bytes_.size()))
			throw std::logic_error("snapshot of guest RAM failed");
	}

	// Every byte outside the [begin, end) ranges in `allowed` is as it was. Only those bytes
	// are read: the device may still be writing inside the allowed ranges.
	::testing::AssertionResult
	unchanged_except(const GuestMemory& memory,
			 std::vector<std::pair<uint64_t, uint64_t>> allowed) const
	{
		std::sort(allowed.begin(), allowed.end());
		allowed.emplace_back(bytes_.size(), bytes_.size());
		std::vector<uint8_t> now;
		uint64_t from = 0;
		for (const auto& [begin, end] : allowed) {
			if (begin > from) {
				now.resize(begin - from);
				if (!memory.read(from, now.data(), now.size()))
					return ::testing::AssertionFailure()
					       << "reading guest RAM failed";
				for (uint64_t i = 0; i < now.size(); ++i)
					if (now[i] != bytes_[from + i])
						return ::testing::AssertionFailure()
						       << "guest RAM changed at gpa " << from + i;
			}
			from = std::max(from, end);
		}
		return ::testing::AssertionSuccess();
	}

private:
	std::vector<uint8_t> bytes_;
};

} // namespace vbsim::test

#endif
