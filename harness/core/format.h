// Human units for the harness's text output (plan, console summaries): one formatter each.
#pragma once
#include <string>

namespace sb {

// 1023 -> "1023 B", 1024 -> "1.00 KiB", 3.2 GiB -> "3.20 GiB" (binary units, up to PiB).
std::string format_bytes(double bytes);

}  // namespace sb
