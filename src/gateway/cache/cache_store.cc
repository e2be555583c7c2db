#include "gateway/cache/cache_store.h"

namespace tachyon {

const char* CacheTableName(CacheTable table) {
  switch (table) {
    case CacheTable::kExact: return "exact";
    case CacheTable::kSemantic: return "semantic";
    case CacheTable::kResponses: return "responses";
  }
  return "exact";
}

double UnixTimeSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::chrono::steady_clock::time_point SteadyTime(double unix_time, double unix_now,
                                                 std::chrono::steady_clock::time_point now) {
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(unix_time - unix_now));
}

}  // namespace tachyon
