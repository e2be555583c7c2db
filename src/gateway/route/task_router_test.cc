#include "gateway/route/task_router.h"

#include <gtest/gtest.h>

#include "embed/hash_embedder.h"

namespace tachyon {
namespace {

CompletionRequest Chat(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  return std::get<CompletionRequest>(parsed);
}

std::string Body(const std::string& user, const std::string& extra = "", const std::string& model = "auto") {
  return R"({"model":")" + model + R"(","messages":[{"role":"system","content":"be brief"},{"role":"user","content":")" +
         user + "\"}]" + extra + "}";
}

std::shared_ptr<BoundedRegex> Regex(const std::string& pattern) {
  StatusOr<std::shared_ptr<BoundedRegex>> r = BoundedRegex::Compile(pattern);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : nullptr;
}

TEST(GlobMatchTest, StarsAndQuestionMarks) {
  EXPECT_TRUE(GlobMatch("gpt-4o-mini", "gpt-4o-mini"));
  EXPECT_FALSE(GlobMatch("gpt-4o-mini", "gpt-4o"));
  EXPECT_TRUE(GlobMatch("*-mini", "gpt-4o-mini"));
  EXPECT_TRUE(GlobMatch("gpt-*", "gpt-"));
  EXPECT_TRUE(GlobMatch("a*b*c", "axxbyyc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "axxbyy"));
  EXPECT_TRUE(GlobMatch("claude-?-haiku", "claude-3-haiku"));
  EXPECT_FALSE(GlobMatch("claude-?-haiku", "claude-35-haiku"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_FALSE(GlobMatch("", "x"));
  // Many stars over a long miss stay fast (one backtrack point, not exponential).
  EXPECT_FALSE(GlobMatch("*a*a*a*a*a*a*a*a*b", std::string(20000, 'a')));
}

TEST(BoundedRegexTest, MatchesAndRefusesBadPatterns) {
  auto r = Regex("(?i)\\b(extract|classify)\\b");
  EXPECT_TRUE(r->Search("Please EXTRACT the dates"));
  EXPECT_FALSE(r->Search("extraction is not a word match"));
  StatusOr<std::shared_ptr<BoundedRegex>> bad = BoundedRegex::Compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("offset"), std::string::npos) << bad.status().message();
  // Unicode classes see characters, not bytes.
  EXPECT_TRUE(Regex("^\\w{3}$")->Search("日本語"));
}

TEST(BoundedRegexTest, CatastrophicBacktrackingStopsAtItsLimit) {
  // (a+)+$ on a's then a b backtracks exponentially without a limit.
  auto r = Regex("(a+)+$");
  const std::string hostile = std::string(5000, 'a') + "b";
  // Unbounded, this search takes ~2^5000 steps (the test would never end); bounded, it gives up: no match.
  EXPECT_FALSE(r->Search(hostile));
  EXPECT_TRUE(r->Search("aaaa"));
}

TaskRouterOptions TwoClasses() {
  TaskRouterOptions o{.classes = {"small", "large"}, .default_class = 1};
  o.rules.push_back(RouteRule{.name = "mini-model", .class_idx = 0, .model_glob = "*-mini"});
  o.rules.push_back(RouteRule{.name = "extraction", .class_idx = 0, .user_regex = Regex("(?i)^(extract|classify)\\b")});
  o.rules.push_back(RouteRule{.name = "short-json", .class_idx = 0, .max_output_tokens = 64, .json = true});
  o.rules.push_back(RouteRule{.name = "tools", .class_idx = 1, .tools = true});
  o.rules.push_back(RouteRule{.name = "long-prompt", .class_idx = 1, .min_prompt_chars = 200});
  o.rules.push_back(RouteRule{.name = "short-prompt", .class_idx = 0, .max_prompt_chars = 30});
  return o;
}

TEST(TaskRouterTest, RulesInOrderThenTheDefault) {
  TaskRouter router(TwoClasses());
  auto decide = [&](const std::string& body) { return router.Decide(Chat(body)); };
  RouteDecision d = decide(Body("write me a long poem about the sea and the sky", "", "gpt-4o-mini"));
  EXPECT_EQ(d.class_idx, 0);
  EXPECT_EQ(d.reason, "rule=mini-model");
  d = decide(Body("Extract every date from this letter, please and thank you"));
  EXPECT_EQ(d.reason, "rule=extraction");
  EXPECT_EQ(decide(Body("tell me the capital cities of every country of europe",
                        R"(,"max_tokens":32,"response_format":{"type":"json_object"})"))
                .reason,
            "rule=short-json");
  // A JSON answer without a small max_tokens, or a small max_tokens without JSON, is not that rule's.
  EXPECT_EQ(decide(Body("tell me the capital cities of every country of europe",
                        R"(,"response_format":{"type":"json_object"})"))
                .reason,
            "default");
  EXPECT_EQ(decide(Body("tell me the capital cities of every country of europe", R"(,"max_tokens":32)")).reason,
            "default");
  d = decide(Body("what is the weather in Paris right now, in celsius?",
                  R"(,"tools":[{"type":"function","function":{"name":"weather"}}])"));
  EXPECT_EQ(d.class_idx, 1);
  EXPECT_EQ(d.reason, "rule=tools");
  EXPECT_EQ(decide(Body(std::string(250, 'x'))).reason, "rule=long-prompt");
  // "be brief" (8) + "hi there" (8) characters: the whole prompt's.
  EXPECT_EQ(decide(Body("hi there")).reason, "rule=short-prompt");
  d = decide(Body("what do you think about the history of rome, in detail"));
  EXPECT_EQ(d.class_idx, 1);
  EXPECT_EQ(d.reason, "default");
}

TEST(TaskRouterTest, OutputBoundsReadTheClientsMaxTokens) {
  TaskRouterOptions o{.classes = {"small", "large"}, .default_class = 0};
  o.rules.push_back(RouteRule{.name = "long-answer", .class_idx = 1, .min_output_tokens = 1000});
  TaskRouter router(std::move(o));
  EXPECT_EQ(router.Decide(Chat(Body("essay", R"(,"max_tokens":2000)"))).class_idx, 1);
  EXPECT_EQ(router.Decide(Chat(Body("essay"))).class_idx, 1);  // no limit: as long as it likes
  EXPECT_EQ(router.Decide(Chat(Body("essay", R"(,"max_tokens":100)"))).class_idx, 0);
}

TEST(TaskRouterTest, TheClassifierTakesWhatTheRulesLeave) {
  std::vector<LabeledText> examples;
  for (const std::string opening : {"", "please ", "now "}) {
    for (const std::string t : {"classify this review as positive or negative", "label the sentiment of this tweet",
                                "is this email spam or not", "categorize this support ticket"}) {
      examples.push_back({opening + t, "classification"});
    }
    for (const std::string t : {"write a story about a dragon", "compose a poem on autumn leaves",
                                "draft a speech for a wedding", "write an essay on the french revolution"}) {
      examples.push_back({opening + t, "writing"});
    }
  }
  std::shared_ptr<Embedder> embedder = HashEmbedder::Create({}).value();
  StatusOr<TextClassifier> trained = TextClassifier::Train(examples, *embedder, "hash");
  ASSERT_TRUE(trained.ok());
  auto classifier = std::make_shared<const TextClassifier>(std::move(trained).value());
  ASSERT_EQ(classifier->labels(), (std::vector<std::string>{"classification", "writing"}));

  TaskRouterOptions o{.classes = {"small", "large"}, .default_class = 1};
  o.rules.push_back(RouteRule{.name = "mini", .class_idx = 1, .model_glob = "*-mini"});
  o.classifier = classifier;
  o.embedder = embedder;
  o.label_class = {0, 1};
  o.min_probability = 0.5;
  TaskRouter router(o);
  RouteDecision d = router.Decide(Chat(Body("please classify the sentiment of this review")));
  EXPECT_EQ(d.class_idx, 0);
  EXPECT_EQ(d.reason.rfind("classifier=classification; score=", 0), 0u) << d.reason;
  d = router.Decide(Chat(Body("write a poem about a dragon")));
  EXPECT_EQ(d.class_idx, 1);
  EXPECT_EQ(d.reason.rfind("classifier=writing; score=", 0), 0u) << d.reason;
  // A rule still comes first.
  EXPECT_EQ(router.Decide(Chat(Body("classify the sentiment of this review", "", "x-mini"))).reason, "rule=mini");

  // Under min_probability, or a label mapped to no class: the default, with the score shown.
  o.min_probability = 1.0;
  TaskRouter strict(o);
  d = strict.Decide(Chat(Body("please classify the sentiment of this review")));
  EXPECT_EQ(d.class_idx, 1);
  EXPECT_EQ(d.reason.rfind("default; classifier=classification; score=", 0), 0u) << d.reason;
  o.min_probability = 0;
  o.label_class = {-1, 1};
  TaskRouter unmapped(o);
  EXPECT_EQ(unmapped.Decide(Chat(Body("please classify the sentiment of this review"))).class_idx, 1);
}

}  // namespace
}  // namespace tachyon
