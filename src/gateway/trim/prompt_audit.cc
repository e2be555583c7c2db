#include "gateway/trim/prompt_audit.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "embed/pair_verifier.h"
#include "gateway/trim/prompt_trimmer.h"

namespace tachyon {
namespace {

// Instructions considered for pairs: more than this many unique ones are cut
// to the first (pairs grow with the square).
constexpr size_t kMaxPairInstructions = 4000;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsListItem(std::string_view line) {
  const size_t start = LineTextStart(line);
  size_t indent = 0;
  while (indent < line.size() && (line[indent] == ' ' || line[indent] == '\t')) ++indent;
  return start > indent;
}

bool IsHeading(std::string_view line) {
  const std::string_view t = Trim(line);
  if (t.empty()) return false;
  if (t[0] == '#') return true;
  if (t.size() <= 80 && t.back() == ':' && !IsListItem(line)) return true;
  return t.size() > 4 && t.substr(0, 2) == "**" && t.substr(t.size() - 2) == "**";
}

bool IsExampleTitle(std::string_view title) {
  std::string t = Lower(Trim(title));
  while (!t.empty() && (t[0] == '#' || t[0] == '*' || t[0] == ' ')) t.erase(0, 1);
  for (const char* opening : {"example", "e.g.", "sample", "input:", "q:", "user:", "question:"}) {
    if (t.rfind(opening, 0) == 0) return true;
  }
  return false;
}

std::string Title(std::string_view line) {
  std::string_view t = Trim(line);
  if (t.size() <= 60) return std::string(t);
  size_t cut = 60;
  while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;  // a whole UTF-8 character
  return std::string(t.substr(0, cut)) + "...";
}

std::vector<AuditSection> Sections(const std::vector<std::string_view>& lines, const TokenCounter& counter) {
  std::vector<AuditSection> sections;
  bool open = false, in_fence = false, list = false;
  std::string body;
  auto close = [&] {
    if (!open) return;
    sections.back().tokens = counter.Count(body);
    body.clear();
    open = false;
  };
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = lines[n];
    const bool blank = Trim(line).empty();
    if (!in_fence) {
      const bool item = IsListItem(line);
      if (blank || IsHeading(line) || (open && item != list)) close();
      list = item;
    }
    if (IsCodeFence(line)) in_fence = !in_fence;
    if (blank && !in_fence) continue;
    if (!open) {
      sections.push_back({.first_line = n + 1, .last_line = n + 1, .title = Title(line)});
      sections.back().example = IsExampleTitle(line);
      open = true;
    }
    sections.back().last_line = n + 1;
    if (!body.empty()) body += '\n';
    body.append(line);
  }
  close();
  return sections;
}

std::string SectionKey(const std::vector<std::string_view>& lines, const AuditSection& s) {
  std::string key;
  for (size_t n = s.first_line; n <= s.last_line; ++n) key += InstructionKey(lines[n - 1]) + "\n";
  return key;
}

}  // namespace

StatusOr<AuditReport> AuditPrompt(std::string_view text, const TokenCounter& counter, Embedder& embedder,
                                  const AuditOptions& options) {
  AuditReport report;
  const std::vector<std::string_view> lines = TextLines(text);
  report.tokens = counter.Count(text);
  report.sections = Sections(lines, counter);

  // What the trimmer's whitespace and duplicates steps would leave.
  const std::string normalized = NormalizeWhitespace(text, /*interior=*/true);
  report.trimmed = RemoveDuplicateInstructions(normalized, options.min_words).text;
  const int64_t normalized_tokens = counter.Count(normalized);
  report.whitespace_tokens = std::max<int64_t>(0, report.tokens - normalized_tokens);
  report.duplicate_tokens = std::max<int64_t>(0, normalized_tokens - counter.Count(report.trimmed));
  report.removable_tokens = report.whitespace_tokens + report.duplicate_tokens;

  // Exact duplicates, and the unique instructions for the pairs.
  struct Unique {
    std::string key;
    std::string_view text;
    size_t line;
  };
  std::vector<Unique> unique;
  std::unordered_map<std::string, size_t> duplicate_of;  // key -> index into report.duplicates
  std::unordered_map<std::string, size_t> first_seen;    // key -> index into unique
  for (const Instruction& s : SplitInstructions(text)) {
    if (s.in_code) continue;
    const std::string_view sentence = text.substr(s.begin, s.end - s.begin);
    std::string key = InstructionKey(sentence);
    if (CountWords(key) < options.min_words) continue;
    auto seen = first_seen.find(key);
    if (seen == first_seen.end()) {
      first_seen.emplace(key, unique.size());
      unique.push_back({std::move(key), sentence, s.line + 1});
      continue;
    }
    auto dup = duplicate_of.find(key);
    if (dup == duplicate_of.end()) {
      const Unique& first = unique[seen->second];
      dup = duplicate_of.emplace(key, report.duplicates.size()).first;
      report.duplicates.push_back(
          {.text = std::string(first.text), .lines = {first.line}, .tokens_each = counter.Count(first.text)});
    }
    report.duplicates[dup->second].lines.push_back(s.line + 1);
  }

  // Near duplicates and contradictions among the unique instructions.
  if (unique.size() > kMaxPairInstructions) unique.resize(kMaxPairInstructions);
  std::vector<std::string> texts;
  for (const Unique& u : unique) texts.push_back(u.key);
  std::vector<float> vectors;
  if (!texts.empty()) {
    StatusOr<std::vector<float>> embedded = embedder.Embed(texts);
    if (!embedded.ok()) return embedded.status();
    vectors = std::move(embedded).value();
  }
  const int dim = embedder.dimension();
  for (size_t i = 0; i < unique.size(); ++i) {
    for (size_t j = i + 1; j < unique.size(); ++j) {
      const double cosine = Dot(&vectors[i * dim], &vectors[j * dim], dim);
      if (cosine < options.contradiction_cosine) continue;
      const PairAlignment a = AlignPair(unique[i].key, unique[j].key);
      AuditPair pair{unique[i].line, unique[j].line, std::string(unique[i].text), std::string(unique[j].text), cosine};
      if (a.negation_differs && a.unmatched_a <= 2 && a.unmatched_b <= 2) {
        report.contradictions.push_back(std::move(pair));
      } else if (cosine >= options.near_threshold) {
        report.review_tokens += counter.Count(unique[j].text);
        report.near_duplicates.push_back(std::move(pair));
      }
    }
  }
  auto closest_first = [](const AuditPair& x, const AuditPair& y) { return x.cosine > y.cosine; };
  for (auto* list : {&report.near_duplicates, &report.contradictions}) {
    std::stable_sort(list->begin(), list->end(), closest_first);
    if (list->size() > options.max_pairs) list->resize(options.max_pairs);
  }

  // Example sections that repeat an earlier one, word for word or nearly.
  std::vector<size_t> examples;
  for (size_t k = 0; k < report.sections.size(); ++k) {
    if (report.sections[k].example) examples.push_back(k);
  }
  std::vector<std::string> example_keys;
  for (size_t k : examples) example_keys.push_back(SectionKey(lines, report.sections[k]));
  if (!examples.empty()) {
    ASSIGN_OR_RETURN(std::vector<float> ev, embedder.Embed(example_keys));
    for (size_t b = 0; b < examples.size(); ++b) {
      for (size_t a = 0; a < b; ++a) {
        const double cosine =
            example_keys[a] == example_keys[b] ? 1.0 : Dot(&ev[a * dim], &ev[b * dim], dim);
        if (cosine >= options.near_threshold) {
          report.repeated_examples.push_back({examples[b], examples[a], cosine});
          break;  // the first earlier one it repeats
        }
      }
    }
  }
  return report;
}

}  // namespace tachyon
