#include "cli/format.h"

#include <cstdio>

namespace tachyon::cli {

std::string FormatCount(int64_t n) {
  char buf[32];
  if (n >= 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.2f B", n / 1e9);
  } else if (n >= 1000000) {
    std::snprintf(buf, sizeof(buf), "%.1f M", n / 1e6);
  } else if (n >= 1000) {
    std::snprintf(buf, sizeof(buf), "%.1f K", n / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(n));
  }
  return buf;
}

std::string FormatBytes(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) {
    std::snprintf(buf, sizeof(buf), "%.2f GB", n / 1e9);
  } else if (n >= 1000000ull) {
    std::snprintf(buf, sizeof(buf), "%.1f MB", n / 1e6);
  } else if (n >= 1000ull) {
    std::snprintf(buf, sizeof(buf), "%.1f KB", n / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(n));
  }
  return buf;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "tachyon: error: %s\n", message.c_str());
  return 1;
}

}  // namespace tachyon::cli
