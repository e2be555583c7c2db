// Command output: human-readable numbers, and the one way a command fails.
#pragma once

#include <cstdint>
#include <string>

namespace tachyon::cli {

// 1234567890 -> "1.23 B", 134515008 -> "134.5 M", 2900 -> "2.9 K".
std::string FormatCount(int64_t n);
// Decimal units, as file sizes are usually quoted: 760234567 -> "760.2 MB".
std::string FormatBytes(uint64_t n);

// Prints "tachyon: error: MESSAGE" to stderr; returns 1, the exit status.
int Fail(const std::string& message);

}  // namespace tachyon::cli
