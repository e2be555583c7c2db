#include "engine/text_stream.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace tachyon {
namespace {

// Byte-level vocabulary: token b is byte b.
std::unique_ptr<Tokenizer> Bytes() { return testing_util::MakeTokenizer(testing_util::BpeSpec({}, {}), "text_stream"); }

std::string Feed(TextStream& stream, const std::string& bytes, bool* stopped) {
  std::string out;
  for (unsigned char c : bytes) {
    out += stream.Add(TokenId(c), stopped);
    if (*stopped) break;
  }
  return out;
}

TEST(TextStreamTest, StopStringAcrossTokensIsNeverEmitted) {
  auto tok = Bytes();
  TextStream stream(*tok, {"</answer>", "STOP"});
  bool stopped = false;
  std::string out;
  // Text arrives one byte per token; "</ans" is held back until it cannot be a stop string.
  out += Feed(stream, "The result is 42 </ans", &stopped);
  EXPECT_EQ(out, "The result is 42 ");
  EXPECT_FALSE(stopped);
  out += Feed(stream, "wer> and more", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "The result is 42 ");
}

TEST(TextStreamTest, FalseStartsAreReleased) {
  auto tok = Bytes();
  TextStream stream(*tok, {"STOP"});
  bool stopped = false;
  EXPECT_EQ(Feed(stream, "ST", &stopped), "");
  EXPECT_EQ(Feed(stream, "Ax", &stopped), "STAx") << "STA cannot start STOP";
  EXPECT_EQ(Feed(stream, "S", &stopped), "");
  EXPECT_EQ(stream.Finish(), "S") << "held text is flushed at the end";
}

TEST(TextStreamTest, MultiByteCharactersAndNoStops) {
  auto tok = Bytes();
  TextStream stream(*tok, {});
  bool stopped = false;
  std::string out = Feed(stream, "héllo 🦙", &stopped);
  EXPECT_EQ(out + stream.Finish(), "héllo 🦙");
  EXPECT_FALSE(stopped);
}

// A character cut short at the end becomes U+FFFD when flushed: a stop string it
// completes is cut there too (found by text_stream_fuzz).
TEST(TextStreamTest, AStopStringCompletedByTheFlushedTailIsCut) {
  auto tok = Bytes();
  TextStream stream(*tok, {"x\xEF\xBF\xBD"});
  bool stopped = false;
  EXPECT_EQ(Feed(stream, "ab x\xC3", &stopped), "ab ");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(stream.Finish(), "") << "not 'x' followed by the replacement character";
}

}  // namespace
}  // namespace tachyon
