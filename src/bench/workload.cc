#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/messages_front.h"
#include "api/responses_front.h"
#include "obs/capture.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

// Common English words, each one token (with its leading space) in the BPE
// vocabularies of GPT-2, Llama 3 and Qwen 2 alike.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
    "who", "so", "no", "she", "other", "its", "may", "these", "what", "them", "than", "some", "him", "time",
    "into", "only", "do", "out", "people", "also", "two", "any", "first", "could", "new", "like", "many",
    "over", "then", "such", "our", "man", "me", "even", "most", "made", "after", "about", "should", "well",
    "through", "years", "where", "much", "your", "way", "down", "work", "world", "very", "life", "own",
    "good", "just", "those", "used", "because", "each", "long", "same", "part", "day", "state", "three",
    "great", "before", "little", "might", "never", "old", "year", "under", "while", "back", "last", "since",
    "right", "place", "city", "water", "house", "family", "school", "number", "system", "group", "country",
    "problem", "hand", "point", "government", "company", "week", "case", "fact", "home", "night", "money",
    "story", "month", "book", "word", "business", "issue", "side", "kind", "head", "service", "friend",
    "power", "hour", "game", "line", "end", "member", "law", "car", "name", "idea", "body", "information",
    "face", "others", "level", "office", "door", "health", "person", "art", "war", "history", "party",
    "result", "change", "morning", "reason", "research", "girl", "guy", "moment", "air", "teacher", "force",
    "education", "food", "light", "open", "small", "large", "early", "young", "important", "few", "public",
    "bad", "able", "high", "best", "better", "true", "free", "full", "clear", "whole", "real", "sure", "short",
    "local", "black", "white", "red", "green", "blue", "strong", "simple", "easy", "hard", "late", "general",
    "make", "know", "take", "see", "come", "think", "look", "want", "give", "use", "find", "tell", "ask",
    "seem", "feel", "try", "leave", "call", "keep", "let", "begin", "help", "talk", "turn", "start", "show",
    "hear", "play", "run", "move", "live", "believe", "hold", "bring", "happen", "write", "provide", "sit",
    "stand", "lose", "pay", "meet", "include", "continue", "set", "learn", "lead", "understand", "watch",
    "follow", "stop", "create", "speak", "read", "spend", "grow", "walk", "win", "offer", "remember", "love",
    "consider", "appear", "buy", "wait", "serve", "die", "send", "build", "stay", "fall", "cut", "reach",
    "kill", "remain", "suggest", "raise", "pass", "sell", "decide", "return", "explain", "hope", "develop",
    "carry", "break", "receive", "agree", "support", "hit", "produce", "eat", "cover", "catch", "draw",
    "choose", "river", "mountain", "tree", "field", "road", "music", "table", "window", "garden", "village",
    "market", "paper", "letter", "picture", "question", "answer", "language", "animal", "summer", "winter",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// A generator for one (purpose, index) pair: splitmix64 of the seed mixed with both.
std::mt19937_64 Rng(uint64_t seed, uint64_t purpose, uint64_t idx) {
  uint64_t z = seed ^ (purpose * 0x9E3779B97F4A7C15ull) ^ (idx * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return std::mt19937_64(z ^ (z >> 31));
}
enum Purpose : uint64_t { kRequest = 1, kPrefix = 2, kBlock = 3, kTail = 4 };

void AppendWords(std::mt19937_64& rng, int64_t n, std::string* out) {
  std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
  for (int64_t i = 0; i < n; ++i) {
    if (!out->empty()) out->push_back(' ');
    out->append(kWords[pick(rng)]);
  }
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StatusOr<LengthDist> LengthDist::Parse(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("length '" + spec + "': " + why +
                                " (expected N, uniform:LO:HI, normal:MEAN:STD or lognormal:MEDIAN:SIGMA)");
  };
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  std::vector<double> numbers;
  for (size_t i = parts.size() == 1 ? 0 : 1; i < parts.size(); ++i) {
    char* end = nullptr;
    const double v = std::strtod(parts[i].c_str(), &end);
    if (parts[i].empty() || *end != '\0' || !std::isfinite(v)) return bad("'" + parts[i] + "' is not a number");
    numbers.push_back(v);
  }
  LengthDist d;
  if (parts.size() == 1) {
    if (numbers[0] < 1 || numbers[0] != std::floor(numbers[0])) return bad("a fixed length is a whole number >= 1");
    d.a = numbers[0];
    return d;
  }
  if (parts.size() != 3) return bad("two numbers after the kind");
  d.a = numbers[0];
  d.b = numbers[1];
  const std::string kind = Lower(parts[0]);
  if (kind == "uniform") {
    d.kind = Kind::kUniform;
    if (d.a < 1 || d.b < d.a) return bad("uniform needs 1 <= LO <= HI");
  } else if (kind == "normal") {
    d.kind = Kind::kNormal;
    if (d.a < 1 || d.b < 0) return bad("normal needs MEAN >= 1 and STD >= 0");
  } else if (kind == "lognormal") {
    d.kind = Kind::kLognormal;
    if (d.a < 1 || d.b < 0) return bad("lognormal needs MEDIAN >= 1 and SIGMA >= 0");
  } else {
    return bad("unknown kind '" + parts[0] + "'");
  }
  return d;
}

int64_t LengthDist::Sample(std::mt19937_64& rng) const {
  double v = a;
  switch (kind) {
    case Kind::kFixed:
      break;
    case Kind::kUniform:
      v = static_cast<double>(std::uniform_int_distribution<int64_t>(static_cast<int64_t>(a),
                                                                     static_cast<int64_t>(b))(rng));
      break;
    case Kind::kNormal:
      v = std::normal_distribution<double>(a, b)(rng);
      break;
    case Kind::kLognormal:
      v = a * std::exp(std::normal_distribution<double>(0, b)(rng));
      break;
  }
  return std::max<int64_t>(1, std::llround(v));
}

std::string LengthDist::ToString() const {
  auto num = [](double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  switch (kind) {
    case Kind::kFixed: return num(a);
    case Kind::kUniform: return "uniform:" + num(a) + ":" + num(b);
    case Kind::kNormal: return "normal:" + num(a) + ":" + num(b);
    case Kind::kLognormal: return "lognormal:" + num(a) + ":" + num(b);
  }
  return "";
}

StatusOr<std::unique_ptr<Workload>> Workload::Create(const WorkloadOptions& options) {
  std::unique_ptr<Workload> w(new Workload(options));
  const std::string& kind = options.kind;
  if (options.prompt_ids && options.tokenizer == nullptr) {
    return InvalidArgumentError("--prompt-ids needs --tokenizer (a GGUF file with the server's vocabulary)");
  }
  if (options.prompt_ids && kind == "conversation") {
    return InvalidArgumentError("--prompt-ids does not work with the conversation workload (replies come back as text)");
  }
  if (options.num_requests < 0) return InvalidArgumentError("--num-requests must be >= 0");
  if (options.prompt_ids) w->bos_ = options.tokenizer->Encode("", {});
  const int64_t synthetic_count = options.num_requests > 0 ? options.num_requests : 100;
  if (kind == "random") {
    for (int64_t i = 0; i < synthetic_count; ++i) w->sessions_.push_back({-1, 1, i});
  } else if (kind == "shared-prefix") {
    if (options.num_prefixes < 1) return InvalidArgumentError("--num-prefixes must be >= 1");
    if (options.prefix_len < 1) return InvalidArgumentError("--prefix-len must be >= 1");
    for (int64_t i = 0; i < synthetic_count; ++i) w->sessions_.push_back({-1, 1, i});
  } else if (kind == "trace") {
    if (options.trace_path.empty()) return InvalidArgumentError("the trace workload needs --trace FILE");
    if (!(options.time_scale > 0)) return InvalidArgumentError("--time-scale must be > 0");
    StatusOr<std::vector<TraceRequest>> trace = EndsWith(Lower(options.trace_path), ".csv")
                                                    ? ReadAzureTrace(options.trace_path)
                                                    : ReadMooncakeTrace(options.trace_path);
    if (!trace.ok()) return trace.status();
    if (trace->empty()) return InvalidArgumentError(options.trace_path + ": the trace has no requests");
    w->trace_ = std::move(trace).value();
    const int64_t n = options.num_requests > 0 ? std::min<int64_t>(options.num_requests, w->trace_.size())
                                               : static_cast<int64_t>(w->trace_.size());
    w->trace_.resize(n);
    if (options.max_input_len < 0 || options.max_output_len < 0) {
      return InvalidArgumentError("--max-input-len and --max-output-len must be >= 0");
    }
    // Caps keep a trace replayable on a server with a short context; a capped Mooncake
    // request keeps its first blocks, so the reuse between requests stays.
    for (TraceRequest& r : w->trace_) {
      if (options.max_input_len > 0) r.input_tokens = std::min(r.input_tokens, options.max_input_len);
      if (options.max_output_len > 0) r.output_tokens = std::min(r.output_tokens, options.max_output_len);
    }
    for (int64_t i = 0; i < n; ++i) {
      w->sessions_.push_back({w->trace_[i].arrival_seconds / options.time_scale, 1, i});
    }
    w->arrival_times_ = true;
  } else if (kind == "replay") {
    if (options.traffic_path.empty()) return InvalidArgumentError("the replay workload needs --traffic FILE");
    if (!(options.time_scale > 0)) return InvalidArgumentError("--time-scale must be > 0");
    RETURN_IF_ERROR(w->LoadReplay());
    const double first = w->replay_.front().ts;
    w->arrival_times_ = first >= 0;
    for (size_t i = 0; i < w->replay_.size(); ++i) {
      const double at = w->arrival_times_ ? (w->replay_[i].ts - first) / options.time_scale : -1;
      w->sessions_.push_back({at, 1, static_cast<int64_t>(i)});
    }
  } else if (kind == "prompts" || kind == "conversation") {
    if (kind == "prompts" && options.prompts_path.empty()) {
      return InvalidArgumentError("the prompts workload needs --prompts FILE");
    }
    if (!options.prompts_path.empty()) {
      Status s = w->LoadPrompts();
      if (!s.ok()) return s;
    }
    if (kind == "conversation" && options.prompts_path.empty() && options.num_turns < 1) {
      return InvalidArgumentError("--turns must be >= 1");
    }
    // Sessions until the request count is reached (the last one cut short), or the whole file.
    int64_t total = 0;
    const int64_t want = options.num_requests > 0 ? options.num_requests
                         : options.prompts_path.empty() ? 100 : -1;
    for (int64_t i = 0;; ++i) {
      if (want < 0 && i == static_cast<int64_t>(w->prompts_.size())) break;
      if (want >= 0 && total >= want) break;
      int turns = 1;
      if (kind == "conversation") {
        turns = options.prompts_path.empty() ? options.num_turns
                                             : static_cast<int>(w->prompts_[i % w->prompts_.size()].turns.size());
        if (!w->prompts_.empty() && !w->prompts_[i % w->prompts_.size()].messages_json.empty()) turns = 1;
      }
      if (want >= 0) turns = static_cast<int>(std::min<int64_t>(turns, want - total));
      w->sessions_.push_back({-1, turns, options.prompts_path.empty() ? i : i % int64_t(w->prompts_.size())});
      total += turns;
    }
  } else {
    return InvalidArgumentError("unknown --workload '" + kind +
                                "' (random, shared-prefix, trace, prompts, conversation, replay)");
  }
  return w;
}

Status Workload::LoadReplay() {
  std::ifstream in(options_.traffic_path, std::ios::binary);
  if (!in) return InvalidArgumentError("cannot read --traffic " + options_.traffic_path);
  std::string line, error;
  CapturedRequest r;
  int64_t number = 0, malformed = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (!ParseCaptureLine(line, &r, &error)) {
      ++malformed;
      continue;
    }
    const bool messages = r.endpoint == "/v1/messages", responses = r.endpoint == "/v1/responses";
    if (!messages && !responses && r.endpoint != "/v1/chat/completions" && r.endpoint != "/v1/completions") continue;
    if (!options_.routes.empty() &&
        std::find(options_.routes.begin(), options_.routes.end(), r.route) == options_.routes.end()) {
      continue;
    }
    if (r.status >= 400 && r.status < 500) {  // refused: nothing to measure
      ++replay_skipped_;
      continue;
    }
    ReplayEntry e{.ts = r.ts,
                  .endpoint = r.endpoint == "/v1/completions" ? "completions" : "chat",
                  .model = r.model,
                  .stream = r.stream,
                  .prompt_tokens = r.prompt_tokens,
                  .completion_tokens = r.completion_tokens};
    for (const auto& [from, to] : options_.model_map) {
      if (e.model == from) e.model = to;
    }
    if (r.body.is_object()) {
      nlohmann::json body = std::move(r.body);
      if (messages) {
        auto chat = ChatBodyFromMessagesRequest(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        if (chat.index() != 0) {
          ++replay_skipped_;
          continue;
        }
        body = std::move(std::get<0>(chat));
        body["stream"] = r.stream;
      } else if (responses) {  // the request alone: an earlier turn it continued is not in the line
        auto parsed = ParseResponsesRequest(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        if (parsed.index() != 0) {
          ++replay_skipped_;
          continue;
        }
        body = ChatBodyFromResponses(std::get<0>(parsed), nlohmann::json::array());
        body.erase("stream_options");
        body["stream"] = r.stream;
      }
      if (!e.model.empty()) body["model"] = e.model;
      e.body_json = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      ++replay_without_body_;
    }
    replay_.push_back(std::move(e));
  }
  if (replay_.empty()) {
    return InvalidArgumentError(options_.traffic_path + ": no chat or completion request to replay (" +
                                std::to_string(number) + " lines, " + std::to_string(malformed) + " malformed)");
  }
  // A capture is written as requests end: replayed in the order they arrived.
  std::stable_sort(replay_.begin(), replay_.end(), [](const ReplayEntry& a, const ReplayEntry& b) { return a.ts < b.ts; });
  if (options_.num_requests > 0 && static_cast<int64_t>(replay_.size()) > options_.num_requests) {
    replay_.resize(options_.num_requests);
  }
  return Status::Ok();
}

Status Workload::LoadPrompts() {
  const std::string& path = options_.prompts_path;
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  if (in >> std::ws; in.peek() == '[') return LoadShareGpt(in);
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + why);
    };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return bad("not a JSON object");
    PromptEntry e;
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1) {
        return bad("'max_tokens' must be an integer >= 1");
      }
      e.max_tokens = j["max_tokens"].get<int64_t>();
    }
    nlohmann::json fields = nlohmann::json::object();
    for (const char* key : {"tools", "tool_choice", "parallel_tool_calls", "response_format"}) {
      if (j.contains(key)) fields[key] = j[key];
    }
    if (!fields.empty()) e.request_fields = fields.dump();
    if (j.contains("messages")) {
      const nlohmann::json& m = j["messages"];
      if (!m.is_array() || m.empty()) return bad("'messages' must be a non-empty array");
      for (const auto& msg : m) {
        if (!msg.is_object() || !msg.contains("role") || !msg.contains("content") || !msg["role"].is_string()) {
          return bad("each message needs a string 'role' and a 'content'");
        }
      }
      e.messages_json = m.dump();
      // For the completions endpoint: the chat's texts, one a line.
      std::string text;
      for (const auto& msg : m) {
        if (msg["content"].is_string()) text += (text.empty() ? "" : "\n") + msg["content"].get<std::string>();
      }
      e.turns.push_back(text);
    } else if (j.contains("turns")) {
      if (!j["turns"].is_array() || j["turns"].empty()) return bad("'turns' must be a non-empty array of strings");
      for (const auto& t : j["turns"]) {
        if (!t.is_string()) return bad("'turns' must be a non-empty array of strings");
        e.turns.push_back(t.get<std::string>());
      }
    } else {
      for (const char* key : {"prompt", "instruction", "text", "question"}) {
        if (!j.contains(key)) continue;
        if (!j[key].is_string()) return bad(std::string("'") + key + "' must be a string");
        std::string text = j[key].get<std::string>();
        // self-instruct: the first instance's input belongs to the instruction.
        if (std::string(key) == "instruction" && j.contains("instances") && j["instances"].is_array() &&
            !j["instances"].empty() && j["instances"][0].is_object() && j["instances"][0].contains("input") &&
            j["instances"][0]["input"].is_string() && !j["instances"][0]["input"].get<std::string>().empty()) {
          text += "\n" + j["instances"][0]["input"].get<std::string>();
        }
        e.turns.push_back(std::move(text));
        break;
      }
      if (e.turns.empty()) return bad("no prompt: expected 'prompt', 'messages', 'turns', 'instruction', 'text' or 'question'");
    }
    prompts_.push_back(std::move(e));
  }
  if (prompts_.empty()) return InvalidArgumentError(path + ": no prompts in the file");
  return Status::Ok();
}

// ShareGPT / FastChat: [{"conversations": [{"from": "human" | "gpt" | "system", "value": ...}]}].
// Each human turn is one request: the conversation up to it, the earlier answers as the assistant's.
Status Workload::LoadShareGpt(std::istream& in) {
  const std::string& path = options_.prompts_path;
  nlohmann::json all = nlohmann::json::parse(in, nullptr, false);
  if (all.is_discarded() || !all.is_array()) return InvalidArgumentError(path + ": not a JSON array (ShareGPT)");
  for (size_t i = 0; i < all.size(); ++i) {
    const nlohmann::json& c = all[i];
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError(path + ": item " + std::to_string(i) + ": " + why);
    };
    if (!c.is_object() || !c.contains("conversations") || !c["conversations"].is_array()) {
      return bad("expected {\"conversations\": [{\"from\", \"value\"}]}");
    }
    nlohmann::json messages = nlohmann::json::array();
    for (const nlohmann::json& turn : c["conversations"]) {
      if (!turn.is_object() || !turn.contains("from") || !turn["from"].is_string() || !turn.contains("value") ||
          !turn["value"].is_string()) {
        return bad("each turn needs a string 'from' and 'value'");
      }
      const std::string from = turn["from"].get<std::string>();
      const std::string role = from == "human" || from == "user"      ? "user"
                               : from == "gpt" || from == "assistant" ? "assistant"
                               : from == "system"                     ? "system"
                                                                      : "";
      if (role.empty()) return bad("unknown 'from': " + from);
      messages.push_back({{"role", role}, {"content", turn["value"]}});
      if (role != "user") continue;
      PromptEntry e;
      e.messages_json = messages.dump();
      e.turns.push_back(turn["value"].get<std::string>());
      prompts_.push_back(std::move(e));
    }
  }
  if (prompts_.empty()) return InvalidArgumentError(path + ": no human turns in the file");
  return Status::Ok();
}

int64_t Workload::num_requests() const {
  int64_t n = 0;
  for (const SessionPlan& s : sessions_) n += s.num_turns;
  return n;
}

void Workload::Words(std::mt19937_64& rng, int64_t n, BenchTurn* out) const {
  if (options_.tokenizer == nullptr) {
    std::string text;
    AppendWords(rng, n, &text);
    if (!out->text.empty() && !text.empty()) out->text.push_back(' ');
    out->text += text;
    out->input_tokens += n;
    return;
  }
  // Enough words for n tokens, then cut at exactly n.
  std::string text;
  std::vector<TokenId> ids;
  while (static_cast<int64_t>(ids.size()) < n) {
    AppendWords(rng, n - static_cast<int64_t>(ids.size()) + 8, &text);
    ids = options_.tokenizer->Encode(" " + text, {.add_special = false});
  }
  ids.resize(n);
  out->ids.insert(out->ids.end(), ids.begin(), ids.end());
  out->text += options_.tokenizer->Decode(ids);
  out->input_tokens += n;
}

void Workload::TraceBlocks(const TraceRequest& r, BenchTurn* out) const {
  int64_t left = r.input_tokens;
  for (int64_t id : r.hash_ids) {
    if (left <= 0) break;
    // Full blocks are the same wherever the id appears; a request's last block may be cut.
    std::mt19937_64 rng = Rng(options_.seed, kBlock, static_cast<uint64_t>(id));
    BenchTurn block;
    Words(rng, kMooncakeBlockTokens, &block);
    const int64_t take = std::min(left, kMooncakeBlockTokens);
    if (options_.tokenizer != nullptr) {
      block.ids.resize(take);
      out->ids.insert(out->ids.end(), block.ids.begin(), block.ids.end());
      out->text += options_.tokenizer->Decode(block.ids);
    } else {
      std::string& t = block.text;
      size_t cut = 0;
      for (int64_t w = 0; w < take && cut != std::string::npos; ++w) cut = t.find(' ', cut + 1);
      if (cut != std::string::npos) t.resize(cut);
      if (!out->text.empty()) out->text.push_back(' ');
      out->text += t;
    }
    out->input_tokens += take;
    left -= take;
  }
  if (left > 0) {
    std::mt19937_64 rng = Rng(options_.seed, kTail, static_cast<uint64_t>(&r - trace_.data()));
    Words(rng, left, out);
  }
}

BenchTurn Workload::Turn(size_t session, int turn) const {
  const SessionPlan& plan = sessions_.at(session);
  // The turn goes into the seed, the session into the index: no two (session, turn) pairs share a stream.
  std::mt19937_64 rng = Rng(options_.seed ^ (static_cast<uint64_t>(turn) * 0xD1B54A32D192ED03ull), kRequest, session);
  BenchTurn out;
  const std::string& kind = options_.kind;
  if (kind == "shared-prefix") {
    const size_t p = static_cast<size_t>(plan.source_idx % options_.num_prefixes);
    if (prefixes_.size() <= p) prefixes_.resize(options_.num_prefixes);
    if (!prefixes_[p]) {
      BenchTurn prefix;
      std::mt19937_64 prefix_rng = Rng(options_.seed, kPrefix, p);
      Words(prefix_rng, options_.prefix_len, &prefix);
      prefixes_[p] = std::move(prefix);
    }
    out = *prefixes_[p];
    Words(rng, options_.input_len.Sample(rng), &out);
    out.max_tokens = options_.output_len.Sample(rng);
  } else if (kind == "replay") {
    const ReplayEntry& e = replay_.at(plan.source_idx);
    out.endpoint = e.endpoint;
    out.stream = e.stream ? 1 : 0;
    out.model = e.model;
    out.input_tokens = std::max<int64_t>(0, e.prompt_tokens);
    if (!e.body_json.empty()) {
      out.body_json = e.body_json;
    } else {  // the captured lengths, in synthetic words
      Words(rng, e.prompt_tokens > 0 ? e.prompt_tokens : options_.input_len.Sample(rng), &out);
      out.max_tokens = e.completion_tokens > 0 ? e.completion_tokens : options_.output_len.Sample(rng);
    }
  } else if (kind == "trace") {
    const TraceRequest& r = trace_.at(plan.source_idx);
    TraceBlocks(r, &out);
    out.max_tokens = std::max<int64_t>(1, r.output_tokens);
  } else if (!prompts_.empty()) {
    const PromptEntry& e = prompts_.at(plan.source_idx);
    out.text = e.turns.at(std::min<size_t>(turn, e.turns.size() - 1));
    out.messages_json = e.messages_json;
    out.request_fields = e.request_fields;
    out.max_tokens = e.max_tokens > 0 ? e.max_tokens : options_.output_len.Sample(rng);
    if (options_.tokenizer != nullptr) {
      out.ids = options_.tokenizer->Encode(out.text, {.add_special = false});
      out.input_tokens = static_cast<int64_t>(out.ids.size());
    }
  } else {  // random, or conversation without a prompts file
    Words(rng, options_.input_len.Sample(rng), &out);
    out.max_tokens = options_.output_len.Sample(rng);
  }
  out.conversation = kind == "conversation";
  if (options_.prompt_ids) {
    // The specials the tokenizer puts around a prompt (BOS) come first, as the server would add them to text.
    std::vector<TokenId> with_bos = bos_;
    with_bos.insert(with_bos.end(), out.ids.begin(), out.ids.end());
    out.ids = std::move(with_bos);
  } else {
    out.ids.clear();
  }
  return out;
}

std::string Workload::Describe() const {
  const WorkloadOptions& o = options_;
  const std::string unit = o.tokenizer != nullptr ? " tokens" : " words";
  std::string d = o.kind + ": " + std::to_string(num_requests()) + " requests";
  if (o.kind == "random") {
    d += ", input " + o.input_len.ToString() + unit + ", output " + o.output_len.ToString();
  } else if (o.kind == "shared-prefix") {
    d += ", " + std::to_string(o.num_prefixes) + " prefixes of " + std::to_string(o.prefix_len) + unit +
         " + unique " + o.input_len.ToString() + ", output " + o.output_len.ToString();
  } else if (o.kind == "trace") {
    d += " of " + o.trace_path;
    if (o.max_input_len > 0) d += ", input <= " + std::to_string(o.max_input_len);
    if (o.max_output_len > 0) d += ", output <= " + std::to_string(o.max_output_len);
    if (o.time_scale != 1) {
      std::ostringstream os;
      os << o.time_scale;
      d += " at " + os.str() + "x speed";
    }
  } else if (o.kind == "prompts") {
    d += " from " + o.prompts_path;
  } else if (o.kind == "replay") {
    d += " from " + o.traffic_path;
    if (replay_without_body_ > 0) {
      d += " (" + std::to_string(replay_without_body_) + " without a body: synthetic prompts of the captured lengths)";
    }
    if (replay_skipped_ > 0) d += ", " + std::to_string(replay_skipped_) + " refused ones left out";
    if (o.time_scale != 1) {
      std::ostringstream os;
      os << o.time_scale;
      d += " at " + os.str() + "x speed";
    }
  } else {
    d += " in " + std::to_string(sessions_.size()) + " sessions" +
         (o.prompts_path.empty() ? ", input " + o.input_len.ToString() + unit + " a turn" : " from " + o.prompts_path);
  }
  return d;
}

}  // namespace tachyon
