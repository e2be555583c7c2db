#include "tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

bool IsValidUtf8(const std::string& s) { return SanitizeUtf8(s) == s; }

TEST(StreamingDetokenizerTest, HoldsBackSplitCharactersFromByteTokens) {
  auto tok = testing_util::MakeTokenizer(testing_util::SpmSpec({{"▁a", -1}}), "detok_spm");
  ASSERT_NE(tok, nullptr);
  StreamingDetokenizer detok(*tok);
  auto byte = [](uint8_t b) { return TokenId(3 + b); };
  EXPECT_EQ(detok.Add(TokenId(259)), " a");
  // 'é' = C3 A9: nothing until the second byte.
  EXPECT_EQ(detok.Add(byte(0xC3)), "");
  EXPECT_EQ(detok.num_pending_bytes(), 1u);
  EXPECT_EQ(detok.Add(byte(0xA9)), "é");
  // '🦙' = F0 9F A6 99, one byte per token.
  EXPECT_EQ(detok.Add(byte(0xF0)), "");
  EXPECT_EQ(detok.Add(byte(0x9F)), "");
  EXPECT_EQ(detok.Add(byte(0xA6)), "");
  EXPECT_EQ(detok.Add(byte(0x99)), "🦙");
  EXPECT_EQ(detok.num_pending_bytes(), 0u);
  // A character cut off at the end becomes U+FFFD on Flush.
  EXPECT_EQ(detok.Add(byte(0xE4)), "");
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  // A broken sequence is replaced, never passed through.
  EXPECT_EQ(detok.Add(byte(0xC3)), "");
  EXPECT_EQ(detok.Add(TokenId(259)), "\xEF\xBF\xBD a");
}

TEST(StreamingDetokenizerTest, ChunksOfRealBpeTextAreValidAndComplete) {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  std::string path = std::string(env ? env : TACHYON_SHARED_DIR) +
                     "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto tok = std::move(Tokenizer::FromGguf(*file)).value();
  const std::string text = "Emoji 😶‍🌫️🦙, CJK 我想在apple工作, Khmer កាន់តែពិសេស, é à ü.";
  std::vector<TokenId> ids = tok->Encode(text, {.add_special = false});
  StreamingDetokenizer detok(*tok);
  std::string joined;
  int num_held = 0;
  for (TokenId id : ids) {
    std::string chunk = detok.Add(id);
    EXPECT_TRUE(IsValidUtf8(chunk)) << "chunk after token " << id.value();
    if (detok.num_pending_bytes() > 0) ++num_held;
    joined += chunk;
  }
  joined += detok.Flush();
  EXPECT_EQ(joined, text);
  EXPECT_GT(num_held, 0) << "the text must exercise characters split across tokens";
}

}  // namespace
}  // namespace tachyon
