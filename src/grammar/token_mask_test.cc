#include "grammar/token_mask.h"

#include <random>

#include <gtest/gtest.h>

#include "tests/support/json_schema_validator.h"
#include "tests/support/test_schemas.h"

namespace tachyon {
namespace {

using json = nlohmann::json;

// A vocabulary with every printable byte, whitespace runs, UTF-8 pieces (whole
// and split), and multi-byte pieces that cross JSON's structure: tokens that
// close a string and open the next key, numbers with their comma, and so on.
std::vector<std::string> TestVocab() {
  std::vector<std::string> v = {""};  // id 0: a control token (never produced)
  for (int c = 32; c < 127; ++c) v.push_back(std::string(1, static_cast<char>(c)));
  for (const char* piece :
       {"\n", "\t", "  ", "\n  ", "    ", "{\"", "\":", "\": ", "\",", "\", \"", "\"}", "\"]", "}]", "]}", "},", "],",
        ",\"", ":\"", "\"x", "[{", "[\"", "true", "false", "null", "nul", "12", "-3", "0.", ".5", "e+", "E-",
        "07", "123", "\\n", "\\u00", "e9", "\\\"", "\xc3\xa9", "\xc3", "\xa9", "\xe2\x82", "\xac", "\xf0\x9f\x98\x80",
        "name", "\"name\"", "\"age\":", "age", "tags", "color", "red", "\"red\"", "green", "blue", "point", "kids",
        "\"v\":", "v", "20", "24-", "-02-", "29T", "23:", "59:", "59.", "Z\"", "+05:", "30\"", "123e4567", "-e89b",
        "-12d3", "-a456-", "426614174000", "scores", "extra", "ok", "x", "note", " \"", "\" ", "\"\"", "{}", "[]",
        "},{\"", "\"a", "b\"", "ab", "cd"}) {
    v.push_back(piece);
  }
  return v;
}

std::shared_ptr<const TokenTrie> Trie(const std::vector<std::string>& vocab) {
  return std::make_shared<TokenTrie>(vocab);
}

std::vector<int32_t> AllowedBruteForce(const GrammarMatcher& m, const std::vector<std::string>& vocab) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < vocab.size(); ++id) {
    GrammarMatcher copy = m;
    if (!vocab[id].empty() && copy.Feed(vocab[id])) out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

std::vector<int32_t> Allowed(GrammarMasker& masker, const GrammarMatcher& m) {
  std::vector<uint64_t> bits;
  masker.FillMask(m.state(), &bits);
  std::vector<int32_t> out;
  for (int32_t id = 0; id < masker.trie().vocab_size(); ++id) {
    if (bits[id >> 6] >> (id & 63) & 1) out.push_back(id);
  }
  return out;
}

TEST(TokenTrieTest, EveryTokenSitsAtTheEndOfItsBytes) {
  std::vector<std::string> vocab = {"ab", "a", "", "abc", "b", "ab"};
  TokenTrie t(vocab);
  EXPECT_EQ(t.vocab_size(), 6);
  EXPECT_EQ(t.num_nodes(), 4);  // a, ab, abc, b
  std::vector<std::string> path(8);
  std::map<int32_t, std::string> seen;
  for (int32_t i = 0; i < t.num_nodes(); ++i) {
    path[t.depth(i)] = path[t.depth(i) - 1] + static_cast<char>(t.byte(i));
    for (const int32_t* id = t.tokens_begin(i); id != t.tokens_end(i); ++id) seen[*id] = path[t.depth(i)];
    EXPECT_GT(t.end(i), i);
  }
  EXPECT_EQ(seen, (std::map<int32_t, std::string>{{0, "ab"}, {1, "a"}, {3, "abc"}, {4, "b"}, {5, "ab"}}));
}

// The cached masks (top frame + exits) equal feeding every token on a copy of
// the state, along random walks under every test schema and json_object.
TEST(GrammarMaskerTest, MaskEqualsFeedingEveryToken) {
  const std::vector<std::string> vocab = TestVocab();
  auto trie = Trie(vocab);
  std::vector<std::shared_ptr<const JsonGrammar>> grammars = {AnyJsonObjectGrammar()};
  for (const std::string& s : testing::TestSchemas()) grammars.push_back(*CompileJsonSchema(nlohmann::ordered_json::parse(s)));
  std::mt19937 rng(7);
  int steps = 0;
  for (const auto& g : grammars) {
    GrammarMasker masker(g, trie);
    for (int walk = 0; walk < 12; ++walk) {
      GrammarMatcher m(g);
      for (int step = 0; step < 150 && !m.IsFinished(); ++step, ++steps) {
        const std::vector<int32_t> expected = AllowedBruteForce(m, vocab);
        ASSERT_EQ(Allowed(masker, m), expected) << "walk " << walk << " step " << step;
        // The shortest completion completes.
        std::string rest;
        ASSERT_TRUE(m.Shortest(&rest));
        GrammarMatcher closed = m;
        ASSERT_TRUE(closed.Feed(rest)) << rest;
        ASSERT_TRUE(closed.IsComplete()) << rest;
        if (expected.empty()) break;
        ASSERT_TRUE(m.Feed(vocab[expected[rng() % expected.size()]]));
      }
    }
    EXPECT_GT(masker.stats().hits, 0) << "frames recur";
  }
  EXPECT_GT(steps, 3000);
}

// Answers drawn token by token from the masks are valid under the schema
// (checked by an independent validator) whenever the grammar says finished.
TEST(GrammarMaskerTest, SampledAnswersValidate) {
  const std::vector<std::string> vocab = TestVocab();
  auto trie = Trie(vocab);
  std::mt19937 rng(11);
  for (const std::string& text : testing::TestSchemas()) {
    const json schema = json::parse(text);
    auto g = *CompileJsonSchema(schema);
    GrammarMasker masker(g, trie);
    testing::SchemaValidator validator(schema);
    int finished = 0;
    for (int answer = 0; answer < 200; ++answer) {
      GrammarMatcher m(g);
      std::string out;
      for (int step = 0; step < 2000 && !m.IsFinished(); ++step) {
        std::vector<int32_t> allowed = Allowed(masker, m);
        // Stop where the grammar may end, now and then (as a model's end-of-text would).
        if (allowed.empty() || (m.IsComplete() && rng() % 4 == 0)) break;
        const std::string& piece = vocab[allowed[rng() % allowed.size()]];
        ASSERT_TRUE(m.Feed(piece));
        out += piece;
      }
      if (!m.IsComplete()) continue;
      ++finished;
      json value = json::parse(out, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << text << "\n" << out;
      EXPECT_EQ(validator.Check(value), "") << text << "\n" << out;
    }
    EXPECT_GE(finished, 150) << text;
  }
}

}  // namespace
}  // namespace tachyon
