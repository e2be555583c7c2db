// TaskRouter: which class of backends a request of a `classify` route goes to.
//
// Rules first, in the order written: a rule names a class and conditions that
// must all hold (the model name the client sent, a regular expression on the
// last user message, bounds on the prompt's length and on the output the client
// asked for, the presence of tools or of a JSON response format). What no rule
// takes goes to the trained classifier (TextClassifier over the last user
// message), whose label maps to a class when its probability reaches
// min_probability; the rest goes to the default class. Every decision says why
// (RouteDecision::reason), for the x-tachyon-route header and the access log.
//
// Pure: no clock, no I/O once built (the classifier's embedder may be remote:
// a route that has one marks its stage costly, so it runs on a worker).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/openai.h"
#include "base/bounded_regex.h"
#include "base/status.h"
#include "embed/embedder.h"
#include "embed/text_classifier.h"

namespace tachyon {

// `*` any run of characters, `?` one byte, everything else itself.
bool GlobMatch(std::string_view pattern, std::string_view text);

struct RouteRule {
  std::string name;   // for the header: "extraction", or "#2" when the config names none
  int class_idx = 0;
  std::string model_glob;                  // "" : any model name
  std::shared_ptr<BoundedRegex> user_regex;  // null: any last user message
  int64_t min_prompt_chars = 0, max_prompt_chars = -1;  // -1: no bound
  // The client's max_tokens: a maximum bound matches only requests that set one
  // at or under it; a minimum bound matches requests that set none (no limit).
  int64_t min_output_tokens = -1, max_output_tokens = -1;
  std::optional<bool> tools;  // the request has tools (true) or has none (false)
  std::optional<bool> json;   // response_format json_object / json_schema, or not
};

struct RouteDecision {
  int class_idx = 0;
  std::string reason;  // "rule=extraction", "classifier=coding; score=0.912", "default"
};

struct TaskRouterOptions {
  std::vector<std::string> classes;  // names, by index
  std::vector<RouteRule> rules;
  int default_class = 0;
  std::shared_ptr<const TextClassifier> classifier;  // null: rules and the default only
  std::shared_ptr<Embedder> embedder;                // the classifier's
  std::vector<int> label_class;  // the classifier's label k -> class index, -1: the default
  double min_probability = 0;    // a classifier label under it goes to the default
};

class TaskRouter {
 public:
  explicit TaskRouter(TaskRouterOptions options) : options_(std::move(options)) {}

  // The request's class and why. A classifier that fails (a remote embedder that
  // is down) leaves the request to the default, and says so.
  RouteDecision Decide(const CompletionRequest& request) const;

  bool has_classifier() const { return options_.classifier != nullptr; }
  const std::vector<std::string>& classes() const { return options_.classes; }

 private:
  bool Matches(const RouteRule& rule, const CompletionRequest& request, const std::string& last_user,
               int64_t prompt_chars) const;
  TaskRouterOptions options_;
};

// The text the rules' expressions and the classifier see: the last user
// message of a chat, the prompt of a completion (token ids: "").
std::string LastUserText(const CompletionRequest& request);

}  // namespace tachyon
