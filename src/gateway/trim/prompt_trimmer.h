// The trimmer's steps, as pure functions over text and over a chat request's
// JSON body, shared by the gateway's TrimStage and `tachyon prompt audit`.
//
//   whitespace   trailing spaces dropped, runs of blank lines cut to one, leading
//                and trailing blank lines dropped; in system messages also runs
//                of spaces inside a line cut to one (indentation kept)
//   duplicates   a later exact copy of an instruction (a sentence or a list item
//                of at least min_duplicate_words words) in the system prompt
//                removed; the first copy stays where it was
//   history      the system messages and the most recent turns kept within a
//                token budget; an assistant's tool calls stay with their results;
//                the first kept turn is a user's, and it starts with a one-line
//                marker saying how many messages were left out
//   documents    a request's `documents` (the retrieval extension) cut to the
//                best that fit: min_score, top_k, max_document_tokens; the kept
//                ones rendered into the last user message, best first
//
// Meaning is never changed: nothing is reordered or reworded, text inside code
// fences (``` or ~~~) is never touched, and only system messages lose
// duplicates (a user repeating themselves may mean it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "gateway/trim/token_counter.h"

namespace tachyon {

// The lines of a text, without their newlines ("a\n" is "a" and "").
std::vector<std::string_view> TextLines(std::string_view text);
// A line that opens or closes a code fence: ``` or ~~~ after at most three spaces.
bool IsCodeFence(std::string_view line);
// Where a line's text starts after its indentation and list marker ("- ", "* ", "+ ", "12. ", "3) ").
size_t LineTextStart(std::string_view line);

// Whitespace normalization; `interior` also cuts runs of spaces inside lines.
std::string NormalizeWhitespace(std::string_view text, bool interior);

// One instruction of a prompt: a sentence, or a list item's text, within one line.
struct Instruction {
  size_t line = 0;           // 0-based line of the text
  size_t begin = 0, end = 0; // bytes of the text, trailing spaces excluded
  bool in_code = false;      // inside a code fence (never compared)
};
// Every instruction of the text, in order (code-fence lines as one each, marked).
std::vector<Instruction> SplitInstructions(std::string_view text);
// What two instructions must share to be copies: the words, with list markers
// and whitespace runs dropped ("- Always cite sources." == "3. Always  cite sources.").
std::string InstructionKey(std::string_view instruction);
int64_t CountWords(std::string_view text);

struct DuplicateRemoval {
  std::string text;
  std::vector<std::string> removed;  // the later copies, as written
};
DuplicateRemoval RemoveDuplicateInstructions(std::string_view text, int64_t min_words);

struct TrimOptions {
  bool whitespace = false;
  bool duplicates = false;
  int64_t min_duplicate_words = 5;
  int64_t history_tokens = 0;  // 0: no history budget
  bool documents = false;      // interpret the `documents` extension
  // Defaults for a request's "retrieval": {top_k, min_score, max_document_tokens}.
  int64_t documents_top_k = 0;            // 0: no limit
  double documents_min_score = -1e300;
  int64_t max_document_tokens = 0;        // 0: no limit
};

// Tokens removed, by step, in the order the steps ran (steps that removed nothing are left out).
using TrimmedTokens = std::vector<std::pair<std::string, int64_t>>;

// Trims a chat request's body in place. A malformed `documents` or
// `retrieval` is an InvalidArgument error naming the field (a 400).
StatusOr<TrimmedTokens> TrimChatBody(nlohmann::json& body, const TrimOptions& options, const TokenCounter& counter);

// Tokens a message counts for the history budget: its text, its tool calls,
// and 4 for the template's markup around it.
int64_t MessageTokens(const nlohmann::json& message, const TokenCounter& counter);

}  // namespace tachyon
