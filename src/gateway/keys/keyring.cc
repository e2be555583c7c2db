#include "gateway/keys/keyring.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/check.h"
#include "base/constant_time.h"
#include "gateway/route/task_router.h"

namespace tachyon {
namespace {

constexpr double kDay = 86400;
constexpr double kSlack = 1e-9;  // floating-point room in the GCRA comparisons

std::string Num(int64_t n) { return std::to_string(n); }

}  // namespace

std::string Sha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  CHECK(EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) == 1) << "SHA-256 failed";
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string HexOf(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool FromHex(std::string_view hex, std::string* bytes) {
  auto value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string RateLimitDuration(double seconds) {
  if (seconds <= 0) return "0s";
  char text[48];
  if (seconds < 1) {
    std::snprintf(text, sizeof(text), "%dms", static_cast<int>(std::ceil(seconds * 1000)));
  } else if (seconds < 60) {
    std::snprintf(text, sizeof(text), "%gs", std::ceil(seconds * 10) / 10);
  } else {
    const int64_t whole = static_cast<int64_t>(std::ceil(seconds));
    if (whole < 3600) {
      std::snprintf(text, sizeof(text), "%lldm%llds", static_cast<long long>(whole / 60),
                    static_cast<long long>(whole % 60));
    } else {
      std::snprintf(text, sizeof(text), "%lldh%lldm%llds", static_cast<long long>(whole / 3600),
                    static_cast<long long>(whole / 60 % 60), static_cast<long long>(whole % 60));
    }
  }
  return text;
}

bool RateLimit::Fits(double cost, double now, double* retry_after) const {
  if (limit <= 0) return true;
  const double interval = period / static_cast<double>(limit);
  const double next = std::max(tat, now) + cost * interval;
  if (next - now <= period + kSlack) return true;
  *retry_after = next - period - now;
  return false;
}

void RateLimit::Charge(double cost, double now) {
  if (limit <= 0) return;
  const double interval = period / static_cast<double>(limit);
  tat = cost >= 0 ? std::max(tat, now) + cost * interval : std::max(now, tat + cost * interval);
}

int64_t RateLimit::Remaining(double now) const {
  if (limit <= 0) return 0;
  const double interval = period / static_cast<double>(limit);
  const double used = std::max(0.0, tat - now);
  return std::max<int64_t>(0, static_cast<int64_t>(std::floor((period - used) / interval + kSlack)));
}

double RateLimit::Reset(double now) const { return std::max(0.0, tat - now); }

Keyring::Keyring(std::vector<KeyConfig> keys, MetricsRegistry* metrics) {
  CounterFamily& requests = metrics->AddCounter("tachyon:key_requests_total",
                                                "Requests of each key by the HTTP status of their answer",
                                                {"key", "status"});
  CounterFamily& tokens = metrics->AddCounter("tachyon:key_tokens_total",
                                              "Tokens of each key's answered requests (prompt, completion)",
                                              {"key", "kind"});
  CounterFamily& limited = metrics->AddCounter("tachyon:key_limited_total",
                                               "Requests refused with 429, by key and the limit they met "
                                               "(requests, tokens, daily_tokens)",
                                               {"key", "limit"});
  for (KeyConfig& config : keys) {
    auto key = std::make_shared<Key>();
    key->requests.limit = config.requests_per_minute;
    key->tokens.limit = config.tokens_per_minute;
    key->requests_total = &requests;
    key->prompt_tokens = &tokens.With({config.name, "prompt"});
    key->completion_tokens = &tokens.With({config.name, "completion"});
    key->limited_requests = &limited.With({config.name, "requests"});
    key->limited_tokens = &limited.With({config.name, "tokens"});
    key->limited_daily = &limited.With({config.name, "daily_tokens"});
    key->config = std::move(config);
    keys_.push_back(std::move(key));
  }
}

std::shared_ptr<const Keyring::Key> Keyring::Find(std::string_view secret) const {
  const std::string hash = Sha256(secret);
  std::shared_ptr<const Key> found;
  for (const auto& key : keys_) {  // every key, so the time does not say which matched
    if (ConstantTimeEquals(hash, key->config.sha256) && found == nullptr) found = key;
  }
  return found;
}

bool Keyring::MayUse(const Key& key, const std::string& route) {
  if (key.config.routes.empty()) return true;
  return std::any_of(key.config.routes.begin(), key.config.routes.end(),
                     [&](const std::string& glob) { return GlobMatch(glob, route); });
}

Keyring::Admission Keyring::Admit(const Key& key, int64_t prompt_tokens_estimate, double now) {
  Admission out;
  const KeyConfig& c = key.config;
  std::lock_guard<std::mutex> lock(key.mutex);
  const int64_t today = static_cast<int64_t>(std::floor(now / kDay));
  if (key.day != today) {
    key.day = today;
    key.day_tokens = 0;
  }
  const double estimate = static_cast<double>(prompt_tokens_estimate);
  double retry = 0;
  if (!key.requests.Fits(1, now, &retry)) {
    out.limit = "requests";
    out.message = "Rate limit reached for key '" + c.name + "': " + Num(c.requests_per_minute) +
                  " requests per minute. Try again in " + RateLimitDuration(retry) + ".";
    key.limited_requests->Add();
  } else if (c.tokens_per_minute > 0 && prompt_tokens_estimate > c.tokens_per_minute) {
    out.limit = "tokens";
    out.message = "Request too large for key '" + c.name + "': its prompt is about " +
                  Num(prompt_tokens_estimate) + " tokens, more than the key's " + Num(c.tokens_per_minute) +
                  " tokens per minute.";
    retry = 60;
    key.limited_tokens->Add();
  } else if (!key.tokens.Fits(estimate, now, &retry)) {
    out.limit = "tokens";
    out.message = "Rate limit reached for key '" + c.name + "': " + Num(c.tokens_per_minute) +
                  " tokens per minute. Try again in " + RateLimitDuration(retry) + ".";
    key.limited_tokens->Add();
  } else if (c.max_tokens_per_day > 0 && key.day_tokens + prompt_tokens_estimate > c.max_tokens_per_day) {
    out.limit = "daily_tokens";
    retry = static_cast<double>(today + 1) * kDay - now;
    out.message = "Daily token budget reached for key '" + c.name + "': " + Num(key.day_tokens) + " of " +
                  Num(c.max_tokens_per_day) + " tokens used today (UTC). Try again in " +
                  RateLimitDuration(retry) + ".";
    key.limited_daily->Add();
  } else {
    key.requests.Charge(1, now);
    key.tokens.Charge(estimate, now);
    key.day_tokens += prompt_tokens_estimate;
    out.admitted = true;
    out.charged_tokens = prompt_tokens_estimate;
  }
  if (c.requests_per_minute > 0) {
    out.headers.emplace_back("x-ratelimit-limit-requests", Num(c.requests_per_minute));
    out.headers.emplace_back("x-ratelimit-remaining-requests", Num(key.requests.Remaining(now)));
    out.headers.emplace_back("x-ratelimit-reset-requests", RateLimitDuration(key.requests.Reset(now)));
  }
  if (c.tokens_per_minute > 0) {
    out.headers.emplace_back("x-ratelimit-limit-tokens", Num(c.tokens_per_minute));
    out.headers.emplace_back("x-ratelimit-remaining-tokens", Num(key.tokens.Remaining(now)));
    out.headers.emplace_back("x-ratelimit-reset-tokens", RateLimitDuration(key.tokens.Reset(now)));
  }
  if (!out.admitted) {
    out.retry_after = retry;
    out.headers.emplace_back("retry-after", Num(static_cast<int64_t>(std::ceil(std::max(retry, 0.001)))));
    key.requests_total->With({c.name, "429"}).Add();
  }
  return out;
}

void Keyring::Finish(const Key& key, int64_t charged_estimate, int64_t prompt_tokens, int64_t completion_tokens,
                     int status, double now) {
  key.requests_total->With({key.config.name, std::to_string(status)}).Add();
  if (prompt_tokens > 0) key.prompt_tokens->Add(static_cast<double>(prompt_tokens));
  if (completion_tokens > 0) key.completion_tokens->Add(static_cast<double>(completion_tokens));
  // Without usage (an upstream that sent none, an error), the estimate stands.
  const int64_t used = prompt_tokens + completion_tokens > 0 ? prompt_tokens + completion_tokens : charged_estimate;
  const int64_t correction = used - charged_estimate;
  if (correction == 0) return;
  std::lock_guard<std::mutex> lock(key.mutex);
  key.tokens.Charge(static_cast<double>(correction), now);
  if (key.day == static_cast<int64_t>(std::floor(now / kDay))) {
    key.day_tokens = std::max<int64_t>(0, key.day_tokens + correction);
  }
}

void Keyring::Count(const Key& key, int status) {
  key.requests_total->With({key.config.name, std::to_string(status)}).Add();
}

void Keyring::Inherit(const Keyring& previous) {
  for (auto& key : keys_) {
    for (const auto& old : previous.keys_) {
      if (old->config.name != key->config.name) continue;
      std::scoped_lock lock(key->mutex, old->mutex);
      if (old->config.requests_per_minute == key->config.requests_per_minute) key->requests.tat = old->requests.tat;
      if (old->config.tokens_per_minute == key->config.tokens_per_minute) key->tokens.tat = old->tokens.tat;
      key->day = old->day;
      key->day_tokens = old->day_tokens;
    }
  }
}

nlohmann::json Keyring::Describe(double now) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& key : keys_) {
    const KeyConfig& c = key->config;
    std::lock_guard<std::mutex> lock(key->mutex);
    nlohmann::json limits = {{"requests_per_minute", c.requests_per_minute},
                             {"tokens_per_minute", c.tokens_per_minute},
                             {"max_tokens_per_day", c.max_tokens_per_day}};
    nlohmann::json usage = nlohmann::json::object();
    if (c.requests_per_minute > 0) usage["remaining_requests"] = key->requests.Remaining(now);
    if (c.tokens_per_minute > 0) usage["remaining_tokens"] = key->tokens.Remaining(now);
    usage["tokens_today"] = key->day == static_cast<int64_t>(std::floor(now / kDay)) ? key->day_tokens : 0;
    usage["prompt_tokens_total"] = key->prompt_tokens->value();
    usage["completion_tokens_total"] = key->completion_tokens->value();
    out.push_back({{"name", c.name},
                   {"tenant", c.tenant},
                   {"routes", c.routes.empty() ? nlohmann::json::array({"*"}) : nlohmann::json(c.routes)},
                   {"limits", limits},
                   {"usage", usage}});
  }
  return out;
}

}  // namespace tachyon
