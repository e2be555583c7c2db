// PromptAudit: what `tachyon prompt audit` reports of a system prompt: tokens
// per section, instructions repeated word for word (what the trimmer's
// duplicates step removes), near-duplicate instructions (embedder cosine at or
// above a threshold: for a person to merge), instructions that contradict by
// negation, example sections that repeat, and the tokens the trimmer's
// whitespace and duplicates steps would remove (AuditReport::trimmed is that text).
//
// Sections: a blank line ends one; a heading (`# ...`, a short line ending in
// ':', a line that is all **bold**) starts one; so does the start or the end of
// a list. Line numbers are 1-based lines of the audited text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"
#include "gateway/trim/token_counter.h"

namespace tachyon {

struct AuditOptions {
  int64_t min_words = 5;            // instructions shorter than this are never duplicates
  double near_threshold = 0.8;      // cosine of near-duplicate instructions
  double contradiction_cosine = 0.5;  // a negated pair must be at least this close
  size_t max_pairs = 50;            // near duplicates and contradictions listed, closest first
};

struct AuditSection {
  size_t first_line = 0, last_line = 0;
  std::string title;  // its first line, cut to 60 bytes
  int64_t tokens = 0;
  bool example = false;  // titled Example / Input / Q: ...
};

struct AuditDuplicate {
  std::string text;            // the first copy, as written
  std::vector<size_t> lines;   // of every copy
  int64_t tokens_each = 0;
};

struct AuditPair {
  size_t line_a = 0, line_b = 0;
  std::string a, b;
  double cosine = 0;
};

struct AuditRepeatedExample {
  size_t section = 0, earlier = 0;  // indices into sections
  double cosine = 0;                // 1 for a word-for-word repeat
};

struct AuditReport {
  int64_t tokens = 0;             // of the text as given
  int64_t whitespace_tokens = 0;  // the whitespace step would remove
  int64_t duplicate_tokens = 0;   // the duplicates step would remove, after whitespace
  int64_t removable_tokens = 0;   // both: tokens - tokens of `trimmed`
  int64_t review_tokens = 0;      // the later instruction of each near-duplicate pair
  std::vector<AuditSection> sections;
  std::vector<AuditDuplicate> duplicates;
  std::vector<AuditPair> near_duplicates, contradictions;
  std::vector<AuditRepeatedExample> repeated_examples;
  std::string trimmed;  // the text with the whitespace and duplicates steps applied
};

StatusOr<AuditReport> AuditPrompt(std::string_view text, const TokenCounter& counter, Embedder& embedder,
                                  const AuditOptions& options = {});

}  // namespace tachyon
