#include "gateway/route/task_router.h"

#include <cstdio>

namespace tachyon {
namespace {

int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool HasTools(const CompletionRequest& r) {
  if (!r.body.is_object()) return false;
  auto it = r.body.find("tools");
  return it != r.body.end() && it->is_array() && !it->empty();
}

bool WantsJson(const CompletionRequest& r) {
  if (!r.body.is_object()) return false;
  auto it = r.body.find("response_format");
  if (it == r.body.end() || !it->is_object()) return false;
  auto type = it->find("type");
  return type != it->end() && type->is_string() && (*type == "json_object" || *type == "json_schema");
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative with one backtrack point: linear in practice, never exponential.
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string LastUserText(const CompletionRequest& request) {
  if (request.endpoint == Endpoint::kCompletions) return request.prompt_is_ids ? "" : request.prompt;
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == "user") return it->content;
  }
  return "";
}

bool TaskRouter::Matches(const RouteRule& rule, const CompletionRequest& r, const std::string& last_user,
                         int64_t prompt_chars) const {
  if (!rule.model_glob.empty() && !GlobMatch(rule.model_glob, r.model)) return false;
  if (prompt_chars < rule.min_prompt_chars) return false;
  if (rule.max_prompt_chars >= 0 && prompt_chars > rule.max_prompt_chars) return false;
  if (rule.max_output_tokens >= 0 && (!r.max_tokens || *r.max_tokens > rule.max_output_tokens)) return false;
  if (rule.min_output_tokens >= 0 && r.max_tokens && *r.max_tokens < rule.min_output_tokens) return false;
  if (rule.tools && *rule.tools != HasTools(r)) return false;
  if (rule.json && *rule.json != WantsJson(r)) return false;
  if (rule.user_regex && !rule.user_regex->Search(last_user)) return false;
  return true;
}

RouteDecision TaskRouter::Decide(const CompletionRequest& r) const {
  const std::string last_user = LastUserText(r);
  int64_t prompt_chars = 0;
  if (r.endpoint == Endpoint::kChatCompletions) {
    for (const ChatMessage& m : r.messages) prompt_chars += CodePoints(m.content);
  } else {
    prompt_chars = r.prompt_is_ids ? static_cast<int64_t>(r.prompt_ids.size()) : CodePoints(r.prompt);
  }
  for (const RouteRule& rule : options_.rules) {
    if (Matches(rule, r, last_user, prompt_chars)) return {rule.class_idx, "rule=" + rule.name};
  }
  if (!options_.classifier) return {options_.default_class, "default"};
  StatusOr<std::vector<TextClassifier::Prediction>> predicted =
      options_.classifier->Predict(std::vector<std::string>{last_user}, *options_.embedder);
  if (!predicted.ok() || predicted->empty()) return {options_.default_class, "default; classifier failed"};
  const TextClassifier::Prediction& p = (*predicted)[0];
  char score[32];
  std::snprintf(score, sizeof(score), "%.3f", p.probability);
  const std::string label = options_.classifier->labels()[p.label];
  const int mapped = options_.label_class[p.label];
  if (mapped < 0 || p.probability < options_.min_probability) {
    return {options_.default_class, "default; classifier=" + label + "; score=" + score};
  }
  return {mapped, "classifier=" + label + "; score=" + score};
}

}  // namespace tachyon
