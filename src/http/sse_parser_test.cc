#include "http/sse_parser.h"

#include <gtest/gtest.h>

#include <vector>

namespace tachyon {
namespace {

std::vector<std::string> Parse(const std::vector<std::string>& pieces) {
  std::vector<std::string> events;
  SseParser parser([&](std::string_view d) { events.emplace_back(d); });
  for (const std::string& p : pieces) parser.Feed(p);
  return events;
}

TEST(SseParserTest, EventsInOneRead) {
  EXPECT_EQ(Parse({"data: a\n\ndata: {\"b\":1}\n\n"}), (std::vector<std::string>{"a", "{\"b\":1}"}));
}

TEST(SseParserTest, EventSplitAtEveryByte) {
  const std::string stream = "data: hello\r\n\r\n: comment\n\nevent: x\ndata:one\ndata: two\n\ndata: [DONE]\r\r";
  std::vector<std::string> pieces;
  for (char c : stream) pieces.emplace_back(1, c);
  const std::vector<std::string> expected = {"hello", "one\ntwo", "[DONE]"};
  EXPECT_EQ(Parse(pieces), expected);
  EXPECT_EQ(Parse({stream}), expected);
}

TEST(SseParserTest, CrLfSplitBetweenReadsIsOneLineEnd) {
  // "\r" ends a read and "\n" starts the next: one line end, not an empty line.
  EXPECT_EQ(Parse({"data: a\r", "\ndata: b\r\n\r\n"}), (std::vector<std::string>{"a\nb"}));
}

TEST(SseParserTest, IncompleteEventIsHeldBack) {
  std::vector<std::string> events;
  SseParser parser([&](std::string_view d) { events.emplace_back(d); });
  parser.Feed("data: partial");
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(parser.pending_bytes(), 13u);
  parser.Feed("\n");
  EXPECT_TRUE(events.empty());
  parser.Feed("\n");
  EXPECT_EQ(events, (std::vector<std::string>{"partial"}));
  EXPECT_EQ(parser.pending_bytes(), 0u);
}

TEST(SseParserTest, BlankLinesWithoutDataAreNoEvent) {
  EXPECT_TRUE(Parse({"\n\n\n: ping\n\n"}).empty());
  EXPECT_EQ(Parse({"data\n\n"}), (std::vector<std::string>{""}));
}

}  // namespace
}  // namespace tachyon
