#include "gateway/trim/prompt_trimmer.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

using nlohmann::json;

const TokenCounter& Bytes() {
  static std::shared_ptr<const TokenCounter> counter = TokenCounter::ForModel("").value();
  return *counter;
}

TEST(NormalizeWhitespaceTest, TrailingSpacesBlankRunsAndInteriorRuns) {
  EXPECT_EQ(NormalizeWhitespace("\n\n  Be   brief.  \n\n\n\nAnswer\tin  French.\n\n", false),
            "  Be   brief.\n\nAnswer\tin  French.");
  EXPECT_EQ(NormalizeWhitespace("\n\n  Be   brief.  \n\n\n\nAnswer\tin  French.\n\n", true),
            "  Be brief.\n\nAnswer in French.");
  EXPECT_EQ(NormalizeWhitespace("a\r\nb  \r\n", true), "a\nb");
  EXPECT_EQ(NormalizeWhitespace("plain", true), "plain");
}

TEST(NormalizeWhitespaceTest, CodeFencesKeepEveryByte) {
  const std::string code = "Run this:\n```python\ndef f():\n    return  1   \n\n\n\nx = 2\n```\n\n\n\nDone.  ";
  EXPECT_EQ(NormalizeWhitespace(code, true),
            "Run this:\n```python\ndef f():\n    return  1   \n\n\n\nx = 2\n```\n\nDone.");
  // An unclosed fence keeps the rest as it is.
  EXPECT_EQ(NormalizeWhitespace("x\n~~~\na   b  \n\n\n", true), "x\n~~~\na   b  \n\n\n");
}

TEST(SplitInstructionsTest, SentencesListItemsAndWhatDoesNotEndOne) {
  const std::string text = "Be concise. Use examples, e.g. this one. Version 3.5 is fine!\n- Cite sources. \"Quote\" them.";
  std::vector<std::string> got;
  for (const Instruction& s : SplitInstructions(text)) got.push_back(text.substr(s.begin, s.end - s.begin));
  EXPECT_EQ(got, (std::vector<std::string>{"Be concise.", "Use examples, e.g. this one.", "Version 3.5 is fine!",
                                           "Cite sources.", "\"Quote\" them."}));
  EXPECT_EQ(InstructionKey("- Always  cite   sources."), "Always cite sources.");
  EXPECT_EQ(InstructionKey("12. Always cite sources."), "Always cite sources.");
  EXPECT_EQ(CountWords("  one two\tthree "), 3);
}

TEST(RemoveDuplicateInstructionsTest, LaterCopiesGoTheFirstStays) {
  const std::string text =
      "You are a helpful assistant for our store.\n"
      "\n"
      "Rules:\n"
      "- Always answer in a friendly tone.\n"
      "- Never reveal internal pricing data. Keep it short.\n"
      "\n"
      "- Always answer in a friendly tone.\n"
      "\n"
      "Keep it short. Never reveal internal pricing data. Thank the customer at the end.\n"
      "Yes. Yes.\n"
      "```\n"
      "Always answer in a friendly tone.\n"
      "```\n";
  DuplicateRemoval d = RemoveDuplicateInstructions(text, 5);
  EXPECT_EQ(d.text,
            "You are a helpful assistant for our store.\n"
            "\n"
            "Rules:\n"
            "- Always answer in a friendly tone.\n"
            "- Never reveal internal pricing data. Keep it short.\n"
            "\n"
            "Keep it short. Thank the customer at the end.\n"
            "Yes. Yes.\n"
            "```\n"
            "Always answer in a friendly tone.\n"
            "```\n");
  EXPECT_EQ(d.removed,
            (std::vector<std::string>{"Always answer in a friendly tone.", "Never reveal internal pricing data."}));
  // Nothing repeated: the text comes back byte for byte.
  EXPECT_EQ(RemoveDuplicateInstructions("One two three four five.\n\nSix seven.\n", 5).text,
            "One two three four five.\n\nSix seven.\n");
}

json Chat(std::vector<json> messages) { return json{{"model", "m"}, {"messages", messages}}; }
json Msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

TEST(TrimChatBodyTest, WhitespaceAndDuplicatesCountTheirTokens) {
  json body = Chat({Msg("system", "Be brief.   Be brief and kind to everyone here.\n\n\n\nBe brief and kind to everyone here."),
                    Msg("user", "hi  there   \n\n\n\nfriend")});
  StatusOr<TrimmedTokens> t = TrimChatBody(body, {.whitespace = true, .duplicates = true}, Bytes());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(body["messages"][0]["content"], "Be brief. Be brief and kind to everyone here.");
  // A user's interior spaces stay; trailing ones and blank runs go.
  EXPECT_EQ(body["messages"][1]["content"], "hi  there\n\nfriend");
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].first, "whitespace");
  EXPECT_EQ((*t)[0].second, 2 + 2 + 3 + 2);  // the system's 2 spaces + 2 newlines, the user's 3 + 2
  EXPECT_EQ((*t)[1].first, "duplicates");
  EXPECT_EQ((*t)[1].second, 2 + 35);  // the blank line before the copy, and the copy
  // Users' repeats are theirs.
  json user = Chat({Msg("user", "Tell me a joke about cats please. Tell me a joke about cats please.")});
  EXPECT_TRUE(TrimChatBody(user, {.duplicates = true}, Bytes())->empty());
}

TEST(TrimChatBodyTest, HistoryKeepsTheSystemTheNewestTurnsAndToolCallsWithTheirResults) {
  const std::string filler(100, 'x');
  json call = {{"role", "assistant"},
               {"content", nullptr},
               {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                            {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}};
  json body = Chat({Msg("system", "sys"), Msg("user", "u1 " + filler), Msg("assistant", "a1 " + filler),
                    Msg("user", "u2 " + filler), call, Msg("tool", "result " + filler), Msg("assistant", "a2"),
                    Msg("user", "u3")});
  // Budget: the system (7), the last user (6), a2 (6), then the tool unit (call + result) does not fit in 200.
  StatusOr<TrimmedTokens> t = TrimChatBody(body, {.history_tokens = 200}, Bytes());
  ASSERT_TRUE(t.ok());
  const json& m = body["messages"];
  // The tool result did not fit with its call: both go, and a2 cannot open the kept turns (not a user's):
  // everything before u3 is left out but the system.
  ASSERT_EQ(m.size(), 2u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "[6 earlier messages left out to fit the history budget]\n\nu3");
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].first, "history");

  // A budget the tool unit fits in keeps it whole, from the user turn before it.
  body = Chat({Msg("system", "sys"), Msg("user", "u1 " + filler), Msg("assistant", "a1 " + filler),
               Msg("user", "u2 " + filler), call, Msg("tool", "result " + filler), Msg("assistant", "a2"),
               Msg("user", "u3")});
  t = TrimChatBody(body, {.history_tokens = 400}, Bytes());
  const json& k = body["messages"];
  ASSERT_EQ(k.size(), 6u) << k.dump();
  EXPECT_EQ(k[1]["content"].get<std::string>().rfind("[2 earlier messages left out", 0), 0u);
  EXPECT_EQ(k[1]["role"], "user");
  EXPECT_EQ(k[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(k[3]["role"], "tool");
  // Everything fits: nothing changes.
  json small = Chat({Msg("system", "s"), Msg("user", "a"), Msg("assistant", "b"), Msg("user", "c")});
  const json before = small;
  EXPECT_TRUE(TrimChatBody(small, {.history_tokens = 1000}, Bytes())->empty());
  EXPECT_EQ(small, before);
}

TEST(TrimChatBodyTest, DocumentsKeepTheBestThatFit) {
  json body = Chat({Msg("system", "Answer from the documents."), Msg("user", "What is our refund window?")});
  body["documents"] = json::array({{{"text", "Refunds within 30 days."}, {"score", 0.9}, {"id", "refunds"}},
                                   {{"text", "Shipping takes 5 days."}, {"score", 0.4}},
                                   {{"text", std::string(500, 'z')}, {"score", 0.8}},
                                   {{"text", "Opening hours: 9 to 5."}, {"score", 0.1}},
                                   {{"text", "Returns need a receipt."}, {"score", 0.7}}});
  body["retrieval"] = {{"top_k", 3}, {"min_score", 0.3}};
  StatusOr<TrimmedTokens> t = TrimChatBody(body, {.documents = true, .max_document_tokens = 100}, Bytes());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(body.contains("documents"));
  EXPECT_FALSE(body.contains("retrieval"));
  EXPECT_EQ(body["messages"][1]["content"],
            "<documents>\n<document index=\"1\" id=\"refunds\">\nRefunds within 30 days.\n</document>\n"
            "<document index=\"2\">\nReturns need a receipt.\n</document>\n"
            "<document index=\"3\">\nShipping takes 5 days.\n</document>\n</documents>\n\n"
            "What is our refund window?");
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0], (std::pair<std::string, int64_t>{"documents", 500 + 22}));

  for (const auto& [bad, message] : std::vector<std::pair<json, std::string>>{
           {json{{"documents", "x"}}, "'documents' must be an array"},
           {json{{"documents", json::array({{{"score", 1}}})}}, "'documents[0].text' must be a string"},
           {json{{"documents", json::array({{{"text", "a"}, {"score", "high"}}})}}, "'documents[0].score'"},
           {json{{"documents", json::array()}, {"retrieval", {{"top_k", -1}}}}, "'retrieval.top_k'"},
           {json{{"documents", json::array()}, {"retrieval", {{"k", 1}}}}, "'retrieval.k' is not known"}}) {
    json b = Chat({Msg("user", "q")});
    b.update(bad);
    StatusOr<TrimmedTokens> r = TrimChatBody(b, {.documents = true}, Bytes());
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace tachyon
