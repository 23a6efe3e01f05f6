// SPDX-License-Identifier: GPL-2.0
#include "balloon/balloon_device_counters.h"

namespace vbsim
{

std::string_view to_string(BalloonRejection reason)
{
	switch (reason) {
	case BalloonRejection::kEmptyRequest:
		return "empty-request";
	case BalloonRejection::kWritableBuffer:
		return "writable-buffer";
	case BalloonRejection::kPfnArrayNotMultipleOf4:
		return "pfn-array-not-multiple-of-4";
	case BalloonRejection::kPfnArrayTooLarge:
		return "pfn-array-too-large";
	case BalloonRejection::kChunkMisaligned:
		return "chunk-misaligned";
	case BalloonRejection::kChunkOverlap:
		return "chunk-overlap";
	case BalloonRejection::kBitmapMissing:
		return "bitmap-missing";
	case BalloonRejection::kPfnOutsideRam:
		return "pfn-outside-ram";
	case BalloonRejection::kPfnAlreadyHostOwned:
		return "pfn-already-host-owned";
	case BalloonRejection::kPfnNotHostOwned:
		return "pfn-not-host-owned";
	case BalloonRejection::kHintMalformed:
		return "hint-malformed";
	case BalloonRejection::kReportMalformed:
		return "report-malformed";
	case BalloonRejection::kRangeNotWholePages:
		return "range-not-whole-pages";
	case BalloonRejection::kReportedBalloonPage:
		return "reported-balloon-page";
	case BalloonRejection::kStatsPartialEntry:
		return "stats-partial-entry";
	case BalloonRejection::kStatsTooManyEntries:
		return "stats-too-many-entries";
	case BalloonRejection::kCount:
		break;
	}
	return "unknown";
}

} // namespace vbsim
