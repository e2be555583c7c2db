#include "api/json_parse.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tachyon {
namespace {

// The same value of the same types as nlohmann's own parser gives, or both refuse.
void ExpectSameAsNlohmann(const std::string& text) {
  const nlohmann::json want = nlohmann::json::parse(text, nullptr, false);
  const nlohmann::json got = ParseJson(text);
  ASSERT_EQ(got.is_discarded(), want.is_discarded()) << text;
  if (want.is_discarded()) return;
  // dump() tells 1 from 1.0 and -0.0 from 0, which == does not.
  EXPECT_EQ(got.dump(), want.dump()) << text;
  EXPECT_EQ(got, want) << text;
}

TEST(ParseJsonTest, GivesNlohmannsValue) {
  for (const char* text : {
           R"({"model":"m","prompt":"a b c","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}})",
           R"({"messages":[{"role":"user","content":"h\u00e9llo \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t"}]})",
           R"([1, -1, 0, -0, 1.0, -0.0, 1e2, 1E-2, 2.5e+3, 9223372036854775807, -9223372036854775808])",
           R"([18446744073709551615, 9223372036854775808, 0.1, 1.7976931348623157e308, 5e-324])",
           R"({"a":1,"a":2})",  // a repeated key: the last
           R"(["nul \u0000 inside"])",
           R"(  {"spaced" : [ true , false , null ] }  )",
           "\xEF\xBB\xBF{\"bom\":1}",
           R"("just a string")", "42", "null", "[]", "{}",
       }) {
    ExpectSameAsNlohmann(text);
  }
}

TEST(ParseJsonTest, TellsWhetherAnObjectRepeatsAKey) {
  auto repeated = [](const std::string& text) {
    bool r = false;
    EXPECT_FALSE(ParseJson(text, &r).is_discarded()) << text;
    return r;
  };
  EXPECT_FALSE(repeated(R"({"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]})"));
  EXPECT_FALSE(repeated(R"([1,2,{}])"));
  EXPECT_TRUE(repeated(R"({"a":1,"a":2})"));
  EXPECT_TRUE(repeated(R"({"m":[{"role":"user","content":"x","content":"y"}]})")) << "at any depth";
  EXPECT_TRUE(repeated(R"({"a":{"b":{"c":1,"c":1}}})")) << "even with equal values";
  // Past simdjson's size nlohmann reads the text, which tells nothing: counted as repeated.
  std::string big = "{\"a\":[";
  for (int i = 0; i < 20000; ++i) big += std::to_string(i) + ",";
  big += "0]}";
  ASSERT_GT(big.size(), kSimdJsonMaxBytes);
  EXPECT_TRUE(repeated(big));
}

TEST(ParseJsonTest, RefusesWhatNlohmannRefuses) {
  for (const char* text : {
           "", " ", "{", "}", "[1,]", "{\"a\":}", "{\"a\" 1}", "[01]", "[1.]", "[.5]", "[+1]", "[NaN]", "[Infinity]",
           "{\"a\":1} x", "[\"\\x\"]", "[\"\\ud800\"]", "[\"tab\there\"]", "[\"\xff\"]", "[\"\xc3\"]", "{'a':1}",
           "[1e400]", "[-1e400]",
       }) {
    ExpectSameAsNlohmann(text);
  }
  // Integers past 64 bits are floats in nlohmann; simdjson refuses them, so nlohmann decides.
  ExpectSameAsNlohmann("[123456789012345678901234567890]");
  // At the depth bound: the same value; past it (and so past what simdjson reads),
  // refused whatever nlohmann says: every walk over a value recurses once a level.
  ExpectSameAsNlohmann(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'));
  EXPECT_TRUE(ParseJson(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']')).is_discarded());
  EXPECT_TRUE(ParseJson(std::string(2000, '[') + std::string(2000, ']')).is_discarded());
  // Past the size simdjson is used for: the same value.
  std::string big = "[";
  for (int i = 0; i < 20000; ++i) big += std::to_string(i) + ",";
  big += "0]";
  ASSERT_GT(big.size(), kSimdJsonMaxBytes);
  ExpectSameAsNlohmann(big);
}

// Random documents, then each with bytes changed: the two parsers agree on all of them.
TEST(ParseJsonTest, AgreesOnRandomAndMutatedDocuments) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (depth > 3 ? pick(5) : pick(7)) {
      case 0: return std::to_string(static_cast<int64_t>(rng()) - (1ll << 31));
      case 1: return std::to_string(pick(1000)) + "." + std::to_string(pick(1000)) + (pick(2) ? "e-" + std::to_string(pick(30)) : "");
      case 2: {
        const char* strings[] = {"\"\"", "\"plain\"", "\"\\u00e9\\n\"", "\"caf\xC3\xA9\"", "\"\\\"\\\\\""};
        return strings[pick(5)];
      }
      case 3: return pick(2) ? "true" : "false";
      case 4: return "null";
      case 5: {
        std::string out = "[";
        for (int i = 0, n = pick(4); i < n; ++i) out += (i ? "," : "") + value(depth + 1);
        return out + "]";
      }
      default: {
        std::string out = "{";
        for (int i = 0, n = pick(4); i < n; ++i) out += std::string(i ? "," : "") + "\"k" + std::to_string(pick(3)) + "\":" + value(depth + 1);
        return out + "}";
      }
    }
  };
  const std::string alphabet = "{}[]\",:0123456789.-+eE \\u\xC3\xA9tfnrl";
  for (int i = 0; i < 3000; ++i) {
    std::string doc = value(0);
    ExpectSameAsNlohmann(doc);
    for (int m = 0, n = 1 + pick(3); m < n && !doc.empty(); ++m) {
      const size_t at = static_cast<size_t>(pick(static_cast<int>(doc.size())));
      switch (pick(3)) {
        case 0: doc[at] = alphabet[static_cast<size_t>(pick(static_cast<int>(alphabet.size())))]; break;
        case 1: doc.erase(at, 1); break;
        default: doc.insert(at, 1, alphabet[static_cast<size_t>(pick(static_cast<int>(alphabet.size())))]); break;
      }
    }
    ExpectSameAsNlohmann(doc);
  }
}

}  // namespace
}  // namespace tachyon
