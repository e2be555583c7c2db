#include "api/stream_chunk.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(StreamChunkParserTest, ReadsTextReasonUsageAndErrors) {
  StreamChunkParser parser;
  StreamChunk c;
  ASSERT_TRUE(parser.Parse(R"({"choices":[{"index":0,"text":" tok","finish_reason":null}]})", false, &c));
  EXPECT_EQ(c.text, " tok");
  EXPECT_EQ(c.finish_reason, "");
  EXPECT_TRUE(c.has_choice);
  ASSERT_TRUE(parser.Parse(R"({"choices":[{"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]})",
                           true, &c));
  EXPECT_EQ(c.text, "Hi");
  EXPECT_EQ(c.finish_reason, "stop");
  ASSERT_TRUE(parser.Parse(R"({"choices":[{"delta":{"content":"","reasoning_content":"hmm"}}]})", true, &c));
  EXPECT_EQ(c.text, "hmm") << "reasoning models stream their thoughts first";
  ASSERT_TRUE(parser.Parse(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}})", true, &c));
  EXPECT_TRUE(c.has_usage);
  EXPECT_FALSE(c.has_choice);
  EXPECT_EQ(c.prompt_tokens, 7);
  EXPECT_EQ(c.completion_tokens, 3);
  ASSERT_TRUE(parser.Parse(R"({"error":{"message":"boom"}})", true, &c));
  EXPECT_TRUE(c.is_error);
  EXPECT_FALSE(parser.Parse("[DONE]", true, &c));
  EXPECT_FALSE(parser.Parse("[1,2]", true, &c));
  ASSERT_TRUE(parser.Parse(R"({"choices":[{"delta":{"tool_calls":[{"index":0}]}}]})", true, &c));
  EXPECT_TRUE(c.text.empty()) << "a tool-call delta carries no content";
  StreamChunk call;
  ASSERT_TRUE(parser.Parse(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\""}}]}}]})",
                           true, &call));
  EXPECT_EQ(call.tool_text, R"(f{"a")");
}

TEST(StreamChunkParserTest, NegativeUsageCountsAreReadAsAbsent) {
  StreamChunkParser parser;
  StreamChunk c;
  ASSERT_TRUE(parser.Parse(R"({"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":-1}})", true, &c));
  EXPECT_TRUE(c.has_usage);
  EXPECT_EQ(c.prompt_tokens, 0);
  EXPECT_EQ(c.completion_tokens, 0);
}

}  // namespace
}  // namespace tachyon
