#include "grammar/json_grammar.h"

#include <gtest/gtest.h>

#include "grammar/matcher.h"

namespace tachyon {
namespace {

using json = nlohmann::json;

std::shared_ptr<const JsonGrammar> Compile(const std::string& schema) {
  auto g = CompileJsonSchema(nlohmann::ordered_json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : nullptr;
}

// Whether `text` is a whole answer under the grammar.
bool Accepts(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.Feed(text) && m.IsComplete();
}

// Whether `text` can still become an answer.
bool Prefix(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.Feed(text);
}

TEST(JsonGrammarTest, ObjectPropertiesInOrderRequiredAndOptional) {
  auto g = Compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                      "required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(Accepts(g, R"({"b":"x"})"));
  EXPECT_TRUE(Accepts(g, R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(Accepts(g, "{ \"a\" : -12 ,\n \"b\":\"\" }"));
  EXPECT_FALSE(Accepts(g, R"({"a":1})")) << "b is required";
  EXPECT_FALSE(Prefix(g, R"({"c":true,)")) << "c cannot come before the required b";
  EXPECT_FALSE(Prefix(g, R"({"b":"x","a")")) << "properties come in order";
  EXPECT_FALSE(Prefix(g, R"({"d")")) << "no undeclared property";
  EXPECT_FALSE(Prefix(g, R"({"a":1.5)")) << "a is an integer";
  EXPECT_FALSE(Accepts(g, R"({"b":"x"} )")) << "nothing after the root value";
  EXPECT_FALSE(Prefix(g, R"({"b":"x",})"));
}

TEST(JsonGrammarTest, StringsEscapesUtf8AndLengths) {
  auto g = Compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(Accepts(g, R"("ab")"));
  EXPECT_TRUE(Accepts(g, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"")) << "three code points";
  EXPECT_TRUE(Accepts(g, R"("\n\u00e9")"));
  EXPECT_FALSE(Accepts(g, R"("a")"));
  EXPECT_FALSE(Prefix(g, R"("abcd)"));
  EXPECT_FALSE(Prefix(g, "\"a\x01")) << "control characters must be escaped";
  EXPECT_FALSE(Prefix(g, "\"\xc0\xaf")) << "overlong UTF-8";
  EXPECT_FALSE(Prefix(g, "\"\xed\xa0\x80")) << "a surrogate in UTF-8";
  EXPECT_FALSE(Prefix(g, R"("\ud800)")) << "a surrogate escape";
  EXPECT_FALSE(Prefix(g, R"("\x)"));
}

TEST(JsonGrammarTest, NumbersAndIntegerRanges) {
  auto n = Compile(R"({"type":"number"})");
  for (const char* ok : {"0", "-0", "12", "-3.25", "1e5", "2.5E-3", "0.0"}) EXPECT_TRUE(Accepts(n, ok)) << ok;
  for (const char* bad : {"01", "-", "1.", ".5", "1e", "+1", "1.5.2"}) EXPECT_FALSE(Accepts(n, bad)) << bad;
  auto i = Compile(R"({"type":"integer","minimum":-20,"maximum":130})");
  for (int v = -25; v <= 140; ++v) EXPECT_EQ(Accepts(i, std::to_string(v)), v >= -20 && v <= 130) << v;
  EXPECT_FALSE(Prefix(i, "2000")) << "no completion is in range";
  EXPECT_TRUE(Prefix(i, "-3"));
  EXPECT_FALSE(Prefix(i, "-30")) << "below the minimum, and digits only take it further";
}

TEST(JsonGrammarTest, EnumConstAnyOfAndRefs) {
  auto e = Compile(R"({"enum":["red","redder",1,null,{"a":[1]}]})");
  for (const char* ok : {R"("red")", R"("redder")", "1", "null", R"({"a":[1]})"}) EXPECT_TRUE(Accepts(e, ok)) << ok;
  for (const char* bad : {R"("re")", "12", R"({"a":[1 ]})", "true"}) EXPECT_FALSE(Accepts(e, bad)) << bad;
  auto r = Compile(R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                      "required":["next"]}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(Accepts(r, R"({"next":{"next":{"next":null}}})"));
  EXPECT_FALSE(Accepts(r, R"({"next":{"next":1}})"));
  auto t = Compile(R"({"type":["integer","string"]})");
  EXPECT_TRUE(Accepts(t, "7"));
  EXPECT_TRUE(Accepts(t, R"("x")"));
  EXPECT_FALSE(Accepts(t, "null"));
}

TEST(JsonGrammarTest, ArraysMapsAndAnyJson) {
  auto a = Compile(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})");
  EXPECT_TRUE(Accepts(a, "[1]"));
  EXPECT_TRUE(Accepts(a, "[1, 2]"));
  EXPECT_FALSE(Accepts(a, "[]"));
  EXPECT_FALSE(Prefix(a, "[1,2,"));
  auto any = AnyJsonObjectGrammar();
  EXPECT_TRUE(Accepts(any, R"({"a":[1,{"b":null}],"c":"d","e":-1.5e3,"f":true})"));
  EXPECT_TRUE(Accepts(any, "{}"));
  EXPECT_FALSE(Accepts(any, "[1]")) << "json_object: an object";
  EXPECT_FALSE(Accepts(any, R"({"a":})"));
}

TEST(JsonGrammarTest, FormatsAndWhitespaceBound) {
  auto d = Compile(R"({"type":"string","format":"date-time"})");
  EXPECT_FALSE(Accepts(d, R"("2024-02-29T23:59:60Z")")) << "seconds go to 59";
  EXPECT_TRUE(Accepts(d, R"("2024-02-29T23:59:59.123+05:30")"));
  EXPECT_FALSE(Accepts(d, R"("2024-13-01T00:00:00Z")"));
  auto u = Compile(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(Accepts(u, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(Accepts(u, R"("123e4567e89b-12d3-a456-426614174000")"));
  auto o = Compile(R"({"type":"object","properties":{"a":{"type":"null"}}})");
  EXPECT_TRUE(Prefix(o, "{" + std::string(kMaxWhitespace, ' ')));
  EXPECT_FALSE(Prefix(o, "{" + std::string(kMaxWhitespace + 1, ' ')));
}

TEST(JsonGrammarTest, FinishedWhenNothingMayFollow) {
  auto g = Compile(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.Feed(R"({"a":1)"));
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.Feed("}"));
  EXPECT_TRUE(m.IsFinished());
  auto n = Compile(R"({"type":"integer","maximum":50})");
  GrammarMatcher k(n);
  ASSERT_TRUE(k.Feed("4"));
  EXPECT_TRUE(k.IsComplete());
  EXPECT_FALSE(k.IsFinished()) << "40..49 may follow";
  ASSERT_TRUE(k.Feed("9"));
  EXPECT_TRUE(k.IsFinished());
}

TEST(JsonGrammarTest, RefusesWhatItCannotHonourByName) {
  for (const auto& [schema, word] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"string","pattern":"^a"})", "pattern"},
           {R"({"type":"integer","multipleOf":3})", "multipleOf"},
           {R"({"oneOf":[{"type":"string"}]})", "oneOf"},
           {R"({"type":"number","minimum":1})", "minimum"},
           {R"({"type":"string","format":"email"})", "email"},
           {R"({"$ref":"#/$defs/missing"})", "#/$defs/missing"},
           {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'b'"},
           {R"({"type":"integer","minimum":5,"maximum":4})", "minimum"},
           {R"({"type":"wat"})", "wat"},
           {R"(false)", "false"},
           {R"({"type":"array","minItems":100000,"items":{"type":"array","minItems":100000}})", "1 MiB"},
           {R"({"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["n"]}},"$ref":"#/$defs/n"})",
            "finite"}}) {
    auto g = CompileJsonSchema(nlohmann::ordered_json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(word), std::string::npos) << g.status().message();
  }
  auto nested = CompileJsonSchema(nlohmann::ordered_json::parse(R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})"));
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("#/properties/age"), std::string::npos) << nested.status().message();
}

}  // namespace
}  // namespace tachyon
