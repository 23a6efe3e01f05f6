// SPDX-License-Identifier: GPL-2.0
//
// printf-style logging through the OS's vlog(), for every part of the core.
#ifndef VBALLOON_CORE_CORE_LOG_H
#define VBALLOON_CORE_CORE_LOG_H

#include <stdarg.h>

#include "vballoon/core/os_interface.h"

namespace vb {

template <class Os>
__attribute__((format(printf, 3, 4))) void log_to(Os& os, LogLevel level, const char* fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	os.vlog(level, fmt, args);
	va_end(args);
}

} // namespace vb

#endif
