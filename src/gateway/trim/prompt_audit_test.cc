#include "gateway/trim/prompt_audit.h"

#include <gtest/gtest.h>

#include "embed/hash_embedder.h"

namespace tachyon {
namespace {

TEST(PromptAuditTest, SectionsDuplicatesNearDuplicatesContradictionsAndExamples) {
  const std::string prompt =
      "# Role\n"
      "You are a support assistant for the Acme store.   \n"
      "\n"
      "Rules:\n"
      "- Always answer in a friendly and polite tone.\n"
      "- Cite the order number when you mention an order.\n"
      "- Keep every answer under one hundred words.\n"
      "\n"
      "Example 1:\n"
      "Input: Where is my order 1234 right now?\n"
      "Output: Your order 1234 ships tomorrow morning.\n"
      "\n"
      "\n"
      "\n"
      "More rules:\n"
      "- Always answer in a friendly and polite tone.\n"
      "- Please keep every answer under one hundred words.\n"
      "- Do not cite the order number when you mention an order.\n"
      "\n"
      "Example 2:\n"
      "Input: Where is my order 1234 right now?\n"
      "Output: Your order 1234 ships tomorrow morning.\n";
  auto counter = TokenCounter::ForModel("").value();
  auto embedder = HashEmbedder::Create({}).value();
  StatusOr<AuditReport> r = AuditPrompt(prompt, *counter, *embedder, {.near_threshold = 0.8});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tokens, static_cast<int64_t>(prompt.size()));  // the byte-level tokenizer

  std::vector<std::string> titles;
  for (const AuditSection& s : r->sections) titles.push_back(s.title);
  // A heading opens a section that runs to the next blank line, heading, or start of a list.
  EXPECT_EQ(titles, (std::vector<std::string>{"# Role", "Rules:", "- Always answer in a friendly and polite tone.",
                                              "Example 1:", "More rules:",
                                              "- Always answer in a friendly and polite tone.", "Example 2:"}));
  EXPECT_EQ(r->sections[0].last_line, 2u);
  EXPECT_EQ(r->sections[2].first_line, 5u);
  EXPECT_EQ(r->sections[2].last_line, 7u);
  EXPECT_TRUE(r->sections[3].example);
  EXPECT_FALSE(r->sections[2].example);
  int64_t section_tokens = 0;
  for (const AuditSection& s : r->sections) section_tokens += s.tokens;
  EXPECT_LE(section_tokens, r->tokens);

  ASSERT_EQ(r->duplicates.size(), 3u);
  EXPECT_EQ(r->duplicates[0].text, "Always answer in a friendly and polite tone.");
  EXPECT_EQ(r->duplicates[0].lines, (std::vector<size_t>{5, 16}));
  EXPECT_EQ(r->duplicates[1].text, "Input: Where is my order 1234 right now?");
  ASSERT_FALSE(r->near_duplicates.empty());
  EXPECT_EQ(r->near_duplicates[0].line_a, 7u);
  EXPECT_EQ(r->near_duplicates[0].line_b, 17u);
  ASSERT_EQ(r->contradictions.size(), 1u);
  EXPECT_EQ(r->contradictions[0].line_a, 6u);
  EXPECT_EQ(r->contradictions[0].line_b, 18u);
  ASSERT_EQ(r->repeated_examples.size(), 1u);
  EXPECT_EQ(r->repeated_examples[0].section, 6u);
  EXPECT_EQ(r->repeated_examples[0].earlier, 3u);

  // What --write writes: the whitespace and duplicates steps, nothing reordered.
  EXPECT_EQ(r->removable_tokens, r->tokens - static_cast<int64_t>(r->trimmed.size()));
  EXPECT_EQ(r->whitespace_tokens, 3 + 2 + 1);  // trailing spaces, two blank lines, the final newline
  EXPECT_GT(r->duplicate_tokens, 0);
  EXPECT_EQ(r->trimmed.find("Always answer in a friendly and polite tone."),
            r->trimmed.rfind("Always answer in a friendly and polite tone."));
  EXPECT_NE(r->trimmed.find("Please keep every answer under one hundred words."), std::string::npos);
  EXPECT_LT(r->trimmed.find("Rules:"), r->trimmed.find("More rules:"));
}

}  // namespace
}  // namespace tachyon
