#include "bench/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace tachyon {
namespace {

std::string Traces() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/data/traces";
}

TEST(TraceTest, AzureTraces) {
  std::string code = Traces() + "/azure-llm-2023/AzureLLMInferenceTrace_code.csv";
  if (!std::filesystem::exists(code)) GTEST_SKIP() << code << " is absent (needs ../shared)";
  auto trace = ReadAzureTrace(code);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->size(), 8819u) << "the README's count";
  EXPECT_EQ((*trace)[0].input_tokens, 4808);
  EXPECT_EQ((*trace)[0].output_tokens, 10);
  EXPECT_DOUBLE_EQ((*trace)[0].arrival_seconds, 0.0);
  EXPECT_NEAR((*trace)[1].arrival_seconds, 0.052, 1e-6);
  EXPECT_GT(trace->back().arrival_seconds, 3000) << "about an hour";
  EXPECT_LT(trace->back().arrival_seconds, 3700);
  auto conv = ReadAzureTrace(Traces() + "/azure-llm-2023/AzureLLMInferenceTrace_conv.csv");
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->size(), 19366u);
}

TEST(TraceTest, MooncakeTraces) {
  std::string path = Traces() + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto trace = ReadMooncakeTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->size(), 12031u);
  const TraceRequest& first = (*trace)[0];
  EXPECT_EQ(first.input_tokens, 6758);
  EXPECT_EQ(first.output_tokens, 500);
  ASSERT_EQ(first.hash_ids.size(), 14u) << "one id per 512-token block";
  EXPECT_EQ((*trace)[1].hash_ids[0], first.hash_ids[0]) << "shared first block: real prefix reuse";
  for (const TraceRequest& r : *trace) {
    ASSERT_EQ(static_cast<int64_t>(r.hash_ids.size()), (r.input_tokens + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens);
  }
  auto synthetic = ReadMooncakeTrace(Traces() + "/mooncake/synthetic_trace.jsonl");
  ASSERT_TRUE(synthetic.ok());
  EXPECT_EQ(synthetic->size(), 3993u);
}

TEST(TraceTest, BadFilesAreClearErrors) {
  std::string path = ::testing::TempDir() + "/bad_trace_" + std::to_string(::getpid());
  std::ofstream(path) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,abc,3\n";
  auto azure = ReadAzureTrace(path);
  ASSERT_FALSE(azure.ok());
  EXPECT_NE(azure.status().message().find(":2: cannot parse"), std::string::npos) << azure.status().message();
  std::ofstream(path) << "{\"timestamp\": 0, \"input_length\": \"x\", \"output_length\": 1}\n";
  auto mooncake = ReadMooncakeTrace(path);
  ASSERT_FALSE(mooncake.ok());
  EXPECT_NE(mooncake.status().message().find(":1: 'input_length' must be a number"), std::string::npos);
  EXPECT_EQ(ReadAzureTrace("/nonexistent.csv").status().code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tachyon
