// Trace files of real LLM serving traffic, for replay by the load generator.
//   Azure LLM inference traces (CSV): TIMESTAMP,ContextTokens,GeneratedTokens
//   Mooncake traces (JSONL): {"timestamp": ms, "input_length", "output_length",
//     "hash_ids": [one id per 512-token prompt block; equal ids = equal content]}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tachyon {

struct TraceRequest {
  double arrival_seconds = 0;  // from the first request of the trace
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<int64_t> hash_ids;  // Mooncake only
};

inline constexpr int64_t kMooncakeBlockTokens = 512;

StatusOr<std::vector<TraceRequest>> ReadAzureTrace(const std::string& path);
StatusOr<std::vector<TraceRequest>> ReadMooncakeTrace(const std::string& path);

}  // namespace tachyon
