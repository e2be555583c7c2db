#include "gateway/trim/prompt_trimmer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <unordered_set>

namespace tachyon {
namespace {

using nlohmann::json;

struct Line {
  size_t begin, end;  // bytes, the newline excluded
};

// Every line, the last one possibly empty ("a\n" is "a" and "").
std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  size_t begin = 0;
  while (true) {
    const size_t nl = text.find('\n', begin);
    if (nl == std::string_view::npos) {
      lines.push_back({begin, text.size()});
      return lines;
    }
    lines.push_back({begin, nl});
    begin = nl + 1;
  }
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view RightTrim(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool IsCodeFence(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  return line.substr(i, 3) == "```" || line.substr(i, 3) == "~~~";
}

size_t LineTextStart(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && IsSpace(line[i])) ++i;
  if (i + 1 < line.size() && (line[i] == '-' || line[i] == '*' || line[i] == '+') && line[i + 1] == ' ') {
    i += 2;
  } else {
    size_t d = i;
    while (d < line.size() && d - i < 4 && line[d] >= '0' && line[d] <= '9') ++d;
    if (d > i && d + 1 < line.size() && (line[d] == '.' || line[d] == ')') && line[d + 1] == ' ') i = d + 2;
  }
  while (i < line.size() && IsSpace(line[i])) ++i;
  return i;
}

std::vector<std::string_view> TextLines(std::string_view text) {
  std::vector<std::string_view> out;
  for (const Line& l : SplitLines(text)) out.push_back(text.substr(l.begin, l.end - l.begin));
  return out;
}

namespace {

// A sentence ends at . ! or ? (and closing quotes or brackets) followed by
// spaces and something that starts a sentence: an upper-case letter, a digit,
// an opening quote or bracket, markup, or a non-ASCII character. "e.g. this"
// and "3.5" do not end one.
bool StartsSentence(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '"' || c == '\'' || c == '(' || c == '[' ||
         c == '*' || c == '`' || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

bool IsSystem(const json& m) {
  if (!m.is_object()) return false;
  auto role = m.find("role");
  return role != m.end() && role->is_string() && (*role == "system" || *role == "developer");
}

std::string Role(const json& m) {
  if (!m.is_object()) return "";
  auto role = m.find("role");
  return role != m.end() && role->is_string() ? role->get<std::string>() : "";
}

// Applies fn to every text of a message's content (a string, or text parts):
// in place when Json is mutable.
template <typename Json, typename Fn>
void ForEachText(Json& message, Fn fn) {
  using String = std::conditional_t<std::is_const_v<Json>, const std::string&, std::string&>;
  if (!message.is_object()) return;
  auto content = message.find("content");
  if (content == message.end()) return;
  if (content->is_string()) {
    fn(content->template get_ref<String>());
  } else if (content->is_array()) {
    for (auto& part : *content) {
      auto text = part.is_object() ? part.find("text") : part.end();
      if (text != part.end() && text->is_string() && part.value("type", "") == "text") fn(text->template get_ref<String>());
    }
  }
}

// Puts `prefix` before a message's content (a string, text parts, or none).
void Prepend(json& message, const std::string& prefix) {
  json& content = message["content"];
  if (content.is_string()) {
    content = prefix + content.get<std::string>();
  } else if (content.is_array()) {
    content.insert(content.begin(), json{{"type", "text"}, {"text", prefix}});
  } else {
    content = prefix;
  }
}

Status TrimHistory(json& messages, int64_t budget, const TokenCounter& counter, TrimmedTokens* out) {
  const size_t n = messages.size();
  size_t last_user = n;
  for (size_t i = n; i-- > 0;) {
    if (Role(messages[i]) == "user") {
      last_user = i;
      break;
    }
  }
  if (last_user == n) return Status::Ok();  // no user turn: nothing to keep it for
  std::vector<int64_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = MessageTokens(messages[i], counter);
  int64_t left = budget;
  for (size_t i = 0; i < n; ++i) {
    if (IsSystem(messages[i]) || i >= last_user) left -= tokens[i];
  }
  // Whole units from the newest back: an assistant's tool calls with the tool results after them.
  size_t keep_from = last_user;
  for (size_t i = last_user; i-- > 0;) {
    if (IsSystem(messages[i])) continue;
    size_t start = i;
    while (start > 0 && Role(messages[start]) == "tool") --start;
    int64_t cost = 0;
    for (size_t k = start; k <= i; ++k) cost += IsSystem(messages[k]) ? 0 : tokens[k];
    if (cost > left) break;
    left -= cost;
    keep_from = start;
    i = start;  // the loop's decrement moves before the unit
  }
  // The first kept turn is a user's: templates expect one after the system prompt.
  while (keep_from < last_user && (IsSystem(messages[keep_from]) || Role(messages[keep_from]) != "user")) ++keep_from;
  int64_t dropped = 0, removed = 0;
  for (size_t i = 0; i < keep_from; ++i) {
    if (!IsSystem(messages[i])) {
      ++dropped;
      removed += tokens[i];
    }
  }
  if (dropped == 0) return Status::Ok();
  json kept = json::array();
  for (size_t i = 0; i < keep_from; ++i) {
    if (IsSystem(messages[i])) kept.push_back(std::move(messages[i]));
  }
  const size_t first_turn = kept.size();
  for (size_t i = keep_from; i < n; ++i) kept.push_back(std::move(messages[i]));
  const std::string marker = "[" + std::to_string(dropped) + (dropped == 1 ? " earlier message" : " earlier messages") +
                             " left out to fit the history budget]\n\n";
  Prepend(kept[first_turn], marker);
  messages = std::move(kept);
  removed -= counter.Count(marker);
  if (removed > 0) out->emplace_back("history", removed);
  return Status::Ok();
}

struct Document {
  std::string text, id;
  double score = -std::numeric_limits<double>::infinity();  // none: after every scored one
  bool has_score = false;
  size_t order = 0;
  int64_t tokens = 0;
};

Status SelectDocuments(json& body, const TrimOptions& options, const TokenCounter& counter, TrimmedTokens* out) {
  auto it = body.find("documents");
  if (it == body.end()) return Status::Ok();
  if (!it->is_array()) return InvalidArgumentError("'documents' must be an array of {\"text\", \"score\"} objects");
  int64_t top_k = options.documents_top_k, max_tokens = options.max_document_tokens;
  double min_score = options.documents_min_score;
  if (auto r = body.find("retrieval"); r != body.end()) {
    if (!r->is_object()) return InvalidArgumentError("'retrieval' must be an object");
    for (const auto& [key, value] : r->items()) {
      if (key == "top_k" || key == "max_document_tokens") {
        if (!value.is_number_integer() || value.get<int64_t>() < 0) {
          return InvalidArgumentError("'retrieval." + key + "' must be a non-negative integer");
        }
        (key == "top_k" ? top_k : max_tokens) = value.get<int64_t>();
      } else if (key == "min_score") {
        if (!value.is_number()) return InvalidArgumentError("'retrieval.min_score' must be a number");
        min_score = value.get<double>();
      } else {
        return InvalidArgumentError("'retrieval." + key + "' is not known (top_k, min_score, max_document_tokens)");
      }
    }
  }
  std::vector<Document> docs;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& d = (*it)[i];
    const std::string where = "documents[" + std::to_string(i) + "]";
    if (!d.is_object()) return InvalidArgumentError("'" + where + "' must be an object with \"text\"");
    const json* text = d.contains("text") ? &d["text"] : d.contains("content") ? &d["content"] : nullptr;
    if (text == nullptr || !text->is_string()) return InvalidArgumentError("'" + where + ".text' must be a string");
    Document doc{.text = text->get<std::string>(), .order = i};
    if (d.contains("score")) {
      if (!d["score"].is_number()) return InvalidArgumentError("'" + where + ".score' must be a number");
      doc.score = d["score"].get<double>();
      doc.has_score = true;
    }
    for (const char* key : {"id", "title"}) {
      if (doc.id.empty() && d.contains(key) && d[key].is_string()) doc.id = d[key].get<std::string>();
    }
    doc.tokens = counter.Count(doc.text);
    docs.push_back(std::move(doc));
  }
  std::stable_sort(docs.begin(), docs.end(), [](const Document& a, const Document& b) { return a.score > b.score; });
  std::vector<const Document*> kept;
  int64_t used = 0, dropped = 0;
  for (const Document& d : docs) {
    const bool fits = (top_k == 0 || static_cast<int64_t>(kept.size()) < top_k) &&
                      (max_tokens == 0 || used + d.tokens <= max_tokens) && (!d.has_score ? min_score <= -1e300
                                                                                         : d.score >= min_score);
    if (!fits) {
      dropped += d.tokens;
      continue;
    }
    kept.push_back(&d);
    used += d.tokens;
  }
  json& messages = body["messages"];
  size_t last_user = messages.size();
  for (size_t i = messages.size(); i-- > 0;) {
    if (Role(messages[i]) == "user") {
      last_user = i;
      break;
    }
  }
  if (last_user == messages.size()) return InvalidArgumentError("'documents' need a user message to go with");
  if (!kept.empty()) {
    std::string block = "<documents>\n";
    for (size_t k = 0; k < kept.size(); ++k) {
      block += "<document index=\"" + std::to_string(k + 1) + "\"";
      if (!kept[k]->id.empty()) {
        std::string id;
        for (char c : kept[k]->id) id += c == '"' ? std::string("&quot;") : std::string(1, c);
        block += " id=\"" + id + "\"";
      }
      block += ">\n" + kept[k]->text + "\n</document>\n";
    }
    block += "</documents>\n\n";
    Prepend(messages[last_user], block);
  }
  body.erase("documents");
  body.erase("retrieval");
  if (dropped > 0) out->emplace_back("documents", dropped);
  return Status::Ok();
}

}  // namespace

std::string NormalizeWhitespace(std::string_view text, bool interior) {
  std::string out;
  out.reserve(text.size());
  bool any = false, blank_pending = false, in_fence = false;
  auto put = [&](std::string_view line) {
    if (any) {
      out += '\n';
      if (blank_pending) out += '\n';
    }
    out.append(line);
    any = true;
    blank_pending = false;
  };
  for (const Line& l : SplitLines(text)) {
    const std::string_view line = text.substr(l.begin, l.end - l.begin);
    if (in_fence) {
      put(line);  // code keeps every byte
      in_fence = !IsCodeFence(line);
      continue;
    }
    if (IsCodeFence(line)) {
      put(RightTrim(line));
      in_fence = true;
      continue;
    }
    const std::string_view trimmed = RightTrim(line);
    if (trimmed.empty()) {
      blank_pending = any;
      continue;
    }
    if (!interior) {
      put(trimmed);
      continue;
    }
    std::string collapsed;
    size_t i = 0;
    while (i < trimmed.size() && IsSpace(trimmed[i])) collapsed += trimmed[i++];  // indentation kept
    for (; i < trimmed.size(); ++i) {
      if (IsSpace(trimmed[i])) {
        if (collapsed.back() != ' ') collapsed += ' ';
      } else {
        collapsed += trimmed[i];
      }
    }
    put(collapsed);
  }
  return out;
}

std::vector<Instruction> SplitInstructions(std::string_view text) {
  std::vector<Instruction> out;
  bool in_fence = false;
  const std::vector<Line> lines = SplitLines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = text.substr(lines[n].begin, lines[n].end - lines[n].begin);
    if (in_fence || IsCodeFence(line)) {
      if (!RightTrim(line).empty()) out.push_back({n, lines[n].begin, lines[n].begin + RightTrim(line).size(), true});
      in_fence = in_fence ? !IsCodeFence(line) : true;
      continue;
    }
    size_t begin = LineTextStart(line);
    for (size_t i = begin; i < line.size(); ++i) {
      if (line[i] != '.' && line[i] != '!' && line[i] != '?') continue;
      size_t end = i + 1;
      while (end < line.size() && (line[end] == '"' || line[end] == '\'' || line[end] == ')' || line[end] == ']')) ++end;
      size_t next = end;
      while (next < line.size() && IsSpace(line[next])) ++next;
      if (next == end || next >= line.size() || !StartsSentence(line[next])) continue;
      out.push_back({n, lines[n].begin + begin, lines[n].begin + end, false});
      begin = next;
      i = next - 1;
    }
    const std::string_view rest = RightTrim(line.substr(std::min(begin, line.size())));
    if (!rest.empty()) out.push_back({n, lines[n].begin + begin, lines[n].begin + begin + rest.size(), false});
  }
  return out;
}

std::string InstructionKey(std::string_view instruction) {
  instruction = instruction.substr(LineTextStart(instruction));
  std::string key;
  for (char c : instruction) {
    if (IsSpace(c)) {
      if (!key.empty() && key.back() != ' ') key += ' ';
    } else {
      key += c;
    }
  }
  while (!key.empty() && key.back() == ' ') key.pop_back();
  return key;
}

int64_t CountWords(std::string_view text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = IsSpace(c) || c == '\n';
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

DuplicateRemoval RemoveDuplicateInstructions(std::string_view text, int64_t min_words) {
  DuplicateRemoval result;
  const std::vector<Line> lines = SplitLines(text);
  const std::vector<Instruction> instructions = SplitInstructions(text);
  std::unordered_set<std::string> seen;
  std::vector<std::string> out;
  bool dropped_since = false;  // a line was dropped since the last non-blank one
  auto push = [&](std::string line) {
    const bool blank = RightTrim(line).empty();
    if (blank && dropped_since && !out.empty() && RightTrim(out.back()).empty()) return;  // no double blank
    if (!blank) dropped_since = false;
    out.push_back(std::move(line));
  };
  size_t next = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = text.substr(lines[n].begin, lines[n].end - lines[n].begin);
    const size_t first = next;
    while (next < instructions.size() && instructions[next].line == n) ++next;
    if (first == next || instructions[first].in_code) {
      push(std::string(line));
      continue;
    }
    std::string kept;
    bool removed_any = false;
    for (size_t k = first; k < next; ++k) {
      const Instruction& s = instructions[k];
      const std::string_view sentence = text.substr(s.begin, s.end - s.begin);
      const size_t gap_end = k + 1 < next ? instructions[k + 1].begin : s.end;
      const std::string key = InstructionKey(sentence);
      if (CountWords(key) >= min_words && !seen.insert(key).second) {
        result.removed.emplace_back(sentence);
        removed_any = true;
        continue;
      }
      kept.append(text.substr(s.begin, gap_end - s.begin));
    }
    if (!removed_any) {
      push(std::string(line));
      continue;
    }
    kept = std::string(RightTrim(kept));
    if (kept.empty()) {
      dropped_since = true;
      continue;
    }
    push(std::string(line.substr(0, instructions[first].begin - lines[n].begin)) + kept);
  }
  if (dropped_since) {  // the last lines went: so do the blank lines before them
    while (!out.empty() && RightTrim(out.back()).empty()) out.pop_back();
    if (!text.empty() && text.back() == '\n' && !out.empty()) out.emplace_back();
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) result.text += '\n';
    result.text += out[i];
  }
  return result;
}

int64_t MessageTokens(const json& message, const TokenCounter& counter) {
  int64_t n = 4;
  ForEachText(message, [&](const std::string& text) { n += counter.Count(text); });
  if (message.is_object()) {
    if (auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
      for (const json& call : *calls) n += counter.Count(call.dump());
    }
  }
  return n;
}

StatusOr<TrimmedTokens> TrimChatBody(json& body, const TrimOptions& options, const TokenCounter& counter) {
  TrimmedTokens out;
  if (!body.is_object() || !body.contains("messages") || !body["messages"].is_array()) return out;
  json& messages = body["messages"];
  if (options.whitespace) {
    int64_t removed = 0;
    for (json& m : messages) {
      const bool system = IsSystem(m);
      ForEachText(m, [&](std::string& text) {
        std::string normalized = NormalizeWhitespace(text, system);
        if (normalized == text) return;
        removed += std::max<int64_t>(0, counter.Count(text) - counter.Count(normalized));
        text = std::move(normalized);
      });
    }
    if (removed > 0) out.emplace_back("whitespace", removed);
  }
  if (options.duplicates) {
    int64_t removed = 0;
    for (json& m : messages) {
      if (!IsSystem(m)) continue;
      ForEachText(m, [&](std::string& text) {
        DuplicateRemoval d = RemoveDuplicateInstructions(text, options.min_duplicate_words);
        if (d.removed.empty()) return;
        removed += std::max<int64_t>(0, counter.Count(text) - counter.Count(d.text));
        text = std::move(d.text);
      });
    }
    if (removed > 0) out.emplace_back("duplicates", removed);
  }
  if (options.history_tokens > 0) RETURN_IF_ERROR(TrimHistory(messages, options.history_tokens, counter, &out));
  if (options.documents) RETURN_IF_ERROR(SelectDocuments(body, options, counter, &out));
  return out;
}

}  // namespace tachyon
