#include "gateway/keys/shared_limits.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "gateway/cache/redis_store.h"
#include "gateway/keys/keyring.h"

namespace tachyon {
namespace {

constexpr double kConnectSeconds = 0.25;
constexpr double kHeartbeatSeconds = 2;
constexpr int kReplicaTtlSeconds = 10;
constexpr size_t kMaxIdle = 16;
constexpr size_t kMaxQueued = 100000;
const char kReplicas[] = "tachyon:limit:replicas";

// The admission: KEYS requests TAT, tokens TAT, the day's count (":N" appended);
// ARGV requests_per_minute, tokens_per_minute, max_tokens_per_day, estimate, peek.
// The same decision as CheckLimits (keyring.cc) with a cost scale of 1; the
// codes are LimitHit's. Numbers go back as strings (Lua's would be truncated).
const char kAdmitScript[] = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rl, tl, dl, est = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local period, slack = 60, 1e-9
local day = math.floor(now / 86400)
local dkey = KEYS[3] .. ':' .. day
local rtat = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttat = tonumber(redis.call('GET', KEYS[2]) or '0')
local used = tonumber(redis.call('GET', dkey) or '0')
local function wait(tat, limit, cost)
  if limit <= 0 then return -1 end
  local nxt = math.max(tat, now) + cost * period / limit
  if nxt - now <= period + slack then return -1 end
  return nxt - period - now
end
local function keep(key, tat)
  redis.call('SET', key, string.format('%.17g', tat), 'PX', math.ceil((tat - now) * 1000) + 1000)
end
local code, retry = 0, 0
if ARGV[5] ~= '1' then
  local w = wait(rtat, rl, 1)
  if w >= 0 then
    code, retry = 1, w
  elseif tl > 0 and est > tl then
    code, retry = 2, 60
  else
    w = wait(ttat, tl, est)
    if w >= 0 then
      code, retry = 3, w
    elseif dl > 0 and used + est > dl then
      code, retry = 4, (day + 1) * 86400 - now
    else
      if rl > 0 then
        rtat = math.max(rtat, now) + period / rl
        keep(KEYS[1], rtat)
      end
      if tl > 0 then
        ttat = math.max(ttat, now) + est * period / tl
        keep(KEYS[2], ttat)
      end
      if est > 0 then
        used = redis.call('INCRBY', dkey, est)
        redis.call('EXPIRE', dkey, 172800)
      end
    end
  end
end
return {code, string.format('%.17g', retry), string.format('%.17g', math.max(0, rtat - now)),
        string.format('%.17g', math.max(0, ttat - now)), day, used}
)lua";

// A correction: KEYS tokens TAT, the day's count (":N" appended); ARGV
// tokens_per_minute, tokens (negative: a refund), day. As RateLimit::Charge: a
// refund never brings the TAT before now, nor the day's count below 0.
const char kCorrectScript[] = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tl, n, day = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if tl > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
  if n >= 0 then tat = math.max(tat, now) + n * 60 / tl else tat = math.max(now, tat + n * 60 / tl) end
  if tat > now then
    redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', math.ceil((tat - now) * 1000) + 1000)
  else
    redis.call('DEL', KEYS[1])
  end
end
local dkey = KEYS[2] .. ':' .. ARGV[3]
if day == math.floor(now / 86400) and redis.call('EXISTS', dkey) == 1 then
  if redis.call('INCRBY', dkey, n) < 0 then redis.call('SET', dkey, 0, 'KEEPTTL') end
end
return 1
)lua";

// The heartbeat: KEYS the replicas' set; ARGV this replica, seconds a replica stays counted.
const char kHeartbeatScript[] = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[1], 3600)
return redis.call('ZCARD', KEYS[1])
)lua";

std::string Sha1Hex(const char* text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text, std::char_traits<char>::length(text), digest, &size, EVP_sha1(), nullptr);
  return HexOf(std::string_view(reinterpret_cast<const char*>(digest), size));
}

const std::string& AdmitSha() {
  static const std::string sha = Sha1Hex(kAdmitScript);
  return sha;
}
const std::string& CorrectSha() {
  static const std::string sha = Sha1Hex(kCorrectScript);
  return sha;
}
const std::string& HeartbeatSha() {
  static const std::string sha = Sha1Hex(kHeartbeatScript);
  return sha;
}

std::string Num(int64_t n) { return std::to_string(n); }

double Real(const redisReply* r) {
  if (r->type == REDIS_REPLY_INTEGER) return static_cast<double>(r->integer);
  return std::strtod(RedisText(r).c_str(), nullptr);
}

// The admission script's reply, or false when it is not one.
bool ReadAnswer(const redisReply* r, SharedLimits::Answer* out) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 6) return false;
  for (size_t i = 0; i < 6; ++i) {
    const int type = r->element[i]->type;
    if (type != REDIS_REPLY_INTEGER && type != REDIS_REPLY_STRING) return false;
  }
  out->code = static_cast<int>(Real(r->element[0]));
  out->retry_after = Real(r->element[1]);
  out->requests_used = Real(r->element[2]);
  out->tokens_used = Real(r->element[3]);
  out->day = static_cast<int64_t>(Real(r->element[4]));
  out->day_tokens = static_cast<int64_t>(Real(r->element[5]));
  return out->code >= 0 && out->code <= 4;
}

// Why a reply is not the one expected, for the log and the metrics.
std::string Reason(const redisReply* r) {
  if (r == nullptr) return "read";
  if (r->type == REDIS_REPLY_ERROR) return RedisErrorReason(r);
  return "protocol";
}

std::vector<std::string> AdmitArgs(const KeyConfig& k, int64_t estimate, bool peek) {
  return {Num(k.requests_per_minute), Num(k.tokens_per_minute), Num(k.max_tokens_per_day), Num(estimate),
          peek ? "1" : "0"};
}

std::vector<std::string> AdmitKeys(const KeyConfig& k) {
  return {LimitRedisKey(k.name, "requests"), LimitRedisKey(k.name, "tokens"), LimitRedisKey(k.name, "day")};
}

}  // namespace

std::string LimitRedisKey(const std::string& name, const char* what) {
  return "tachyon:limit:{" + name + "}:" + what;
}

StatusOr<std::unique_ptr<SharedLimits>> SharedLimits::Open(SharedLimitsOptions options, MetricsRegistry* metrics) {
  ASSIGN_OR_RETURN(RedisAddress address, ParseRedisUrl(options.url));
  if (address.password.empty()) address.password = options.password;
  address.verify_tls = options.verify_tls;
  address.ca_file = options.ca_file;
  std::unique_ptr<SharedLimits> s(new SharedLimits());
  s->options_ = std::move(options);
  s->address_ = std::move(address);
  s->replicas_ = std::max(1, s->options_.replicas);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  s->id_ = std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(rd());
  if (metrics != nullptr) {
    s->up_gauge_ = &metrics->AddGauge("tachyon:key_limits_shared",
                                      "1 while the keys' limits are held in Redis, 0 while each replica enforces "
                                      "its share (limit / replicas) because Redis cannot be reached",
                                      {})
                        .With({});
    s->errors_ = &metrics->AddCounter("tachyon:key_limits_store_errors_total",
                                      "Failed round trips to the Redis that holds the keys' limits, by why",
                                      {"reason"});
  }
  // The first heartbeat before any request: up at once when Redis is.
  std::string reason, message;
  StatusOr<std::unique_ptr<RedisConnection>> c =
      RedisConnection::Open(s->address_, 1.0, s->options_.io_timeout_seconds, &reason);
  if (!c.ok()) {
    s->Down(reason, c.status().message());
  } else if (s->Heartbeat(**c, &reason, &message)) {
    s->Up();
    s->Give(std::move(*c));
  } else {
    s->Down(reason, message);
  }
  s->thread_ = std::thread([raw = s.get()] { raw->Loop(); });
  return s;
}

SharedLimits::~SharedLimits() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Leaves the replicas' set, so the others' share grows at once.
  if (up_) {
    if (std::unique_ptr<RedisConnection> c = Take()) c->Command({"ZREM", kReplicas, id_});
  }
}

std::string SharedLimits::describe() const { return RedactRedisUrl(options_.url); }

std::unique_ptr<RedisConnection> SharedLimits::Take() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      std::unique_ptr<RedisConnection> c = std::move(pool_.back());
      pool_.pop_back();
      return c;
    }
  }
  std::string reason;
  StatusOr<std::unique_ptr<RedisConnection>> c =
      RedisConnection::Open(address_, kConnectSeconds, options_.io_timeout_seconds, &reason);
  if (!c.ok()) {
    Down(reason, c.status().message());
    return nullptr;
  }
  return std::move(c).value();
}

void SharedLimits::Give(std::unique_ptr<RedisConnection> c) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < kMaxIdle) pool_.push_back(std::move(c));
}

RedisReplyPtr SharedLimits::Script(RedisConnection& c, const std::string& sha, const std::string& text,
                                   const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  std::vector<std::string> command = {"EVALSHA", sha, Num(static_cast<int64_t>(keys.size()))};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  RedisReplyPtr r = c.Command(command);
  if (r && r->type == REDIS_REPLY_ERROR && RedisText(r.get()).rfind("NOSCRIPT", 0) == 0) {
    command[0] = "EVAL";
    command[1] = text;
    r = c.Command(command);
  }
  return r;
}

bool SharedLimits::Admit(const KeyConfig& key, int64_t estimate, Answer* out) {
  if (!up()) return false;
  std::unique_ptr<RedisConnection> c = Take();
  if (!c) return false;
  RedisReplyPtr r = Script(*c, AdmitSha(), kAdmitScript, AdmitKeys(key), AdmitArgs(key, estimate, false));
  if (!ReadAnswer(r.get(), out)) {
    Down(Reason(r.get()), "the admission script: " + (r ? RedisText(r.get()) : std::string("the connection closed")));
    return false;
  }
  Give(std::move(c));
  return true;
}

bool SharedLimits::Peek(const std::vector<const KeyConfig*>& keys, std::vector<Answer>* out) {
  out->assign(keys.size(), Answer{});
  if (!up()) return false;
  std::unique_ptr<RedisConnection> c = Take();
  if (!c) return false;
  for (const KeyConfig* k : keys) {  // pipelined: one round trip for every key
    std::vector<std::string> command = {"EVALSHA", AdmitSha(), "3"};
    for (std::string& s : AdmitKeys(*k)) command.push_back(std::move(s));
    for (std::string& s : AdmitArgs(*k, 0, true)) command.push_back(std::move(s));
    c->Append(command);
  }
  bool ok = true;
  std::vector<size_t> unknown;  // NOSCRIPT: asked again with the text
  for (size_t i = 0; i < keys.size(); ++i) {
    RedisReplyPtr r = c->GetReply();
    if (r && r->type == REDIS_REPLY_ERROR && RedisText(r.get()).rfind("NOSCRIPT", 0) == 0) {
      unknown.push_back(i);
    } else if (!ReadAnswer(r.get(), &(*out)[i])) {
      ok = false;
      if (!r) break;
    }
  }
  for (size_t i : unknown) {
    if (!ok) break;
    RedisReplyPtr r = Script(*c, AdmitSha(), kAdmitScript, AdmitKeys(*keys[i]), AdmitArgs(*keys[i], 0, true));
    ok = ReadAnswer(r.get(), &(*out)[i]);
  }
  if (!ok) {
    Down("protocol", "reading the limits' state");
    return false;
  }
  Give(std::move(c));
  return true;
}

void SharedLimits::Correct(const KeyConfig& key, int64_t tokens, int64_t day) {
  if (tokens == 0 || !up()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (corrections_.size() >= kMaxQueued) return;
    corrections_.push_back({key.name, key.tokens_per_minute, tokens, day});
  }
  wake_.notify_all();
}

void SharedLimits::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.notify_all();
  wake_.wait_for(lock, std::chrono::seconds(5), [&] { return (corrections_.empty() && !busy_) || stopping_; });
}

void SharedLimits::Down(const std::string& reason, const std::string& message) {
  up_ = false;
  if (up_gauge_ != nullptr) up_gauge_->Set(0);
  if (errors_ != nullptr) errors_->With({reason}).Add();
  {  // the connections may be broken: none is reused
    std::lock_guard<std::mutex> lock(pool_mutex_);
    pool_.clear();
  }
  const bool unreachable = reason == "connect" || reason == "read" || reason == "write" || reason == "protocol";
  const std::string state = unreachable ? "unreachable" : reason;
  std::lock_guard<std::mutex> lock(mutex_);
  if (failing_ != state) {
    std::fprintf(stderr,
                 "tachyon: key limits store %s: %s (%s); each replica enforces its share of every limit "
                 "(limit / %lld replicas) until it works again\n",
                 describe().c_str(), message.c_str(), reason.c_str(), static_cast<long long>(replicas()));
    failing_ = state;
  }
}

void SharedLimits::Up() {
  up_ = true;
  if (up_gauge_ != nullptr) up_gauge_->Set(1);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failing_.empty()) {
    std::fprintf(stderr, "tachyon: key limits store %s works again; the limits are held there\n", describe().c_str());
    failing_.clear();
  }
}

bool SharedLimits::Heartbeat(RedisConnection& c, std::string* reason, std::string* message) {
  RedisReplyPtr r = Script(c, HeartbeatSha(), kHeartbeatScript, {kReplicas}, {id_, Num(kReplicaTtlSeconds)});
  if (!r || r->type != REDIS_REPLY_INTEGER) {
    *reason = Reason(r.get());
    *message = "the heartbeat: " + (r ? RedisText(r.get()) : std::string("the connection closed"));
    return false;
  }
  replicas_ = std::max<int64_t>(1, r->integer);
  return true;
}

void SharedLimits::Loop() {
  auto next_beat = std::chrono::steady_clock::now() + std::chrono::duration<double>(kHeartbeatSeconds);
  int failures = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_until(lock, next_beat, [&] { return stopping_ || (up() && !corrections_.empty()); });
    if (stopping_) break;
    std::deque<Correction> batch;
    batch.swap(corrections_);
    if (!up()) batch.clear();  // dropped: Redis went down since they were queued
    const bool beat = std::chrono::steady_clock::now() >= next_beat;
    if (batch.empty() && !beat) continue;
    busy_ = true;
    lock.unlock();
    std::string reason, message;
    bool ok = true;
    std::unique_ptr<RedisConnection> c;
    if (!up()) {  // down: a fresh connection, its own timeout
      StatusOr<std::unique_ptr<RedisConnection>> opened =
          RedisConnection::Open(address_, 1.0, options_.io_timeout_seconds, &reason);
      if (opened.ok()) {
        c = std::move(opened).value();
      } else {
        ok = false;
        message = opened.status().message();
      }
    } else {
      c = Take();
      ok = c != nullptr;
      if (!ok) reason.clear();  // Take logged it
    }
    for (const Correction& k : batch) {  // pipelined
      if (!ok) break;
      c->Append({"EVALSHA", CorrectSha(), "2", LimitRedisKey(k.name, "tokens"), LimitRedisKey(k.name, "day"),
                 Num(k.tokens_per_minute), Num(k.tokens), Num(k.day)});
    }
    for (const Correction& k : batch) {
      if (!ok) break;
      RedisReplyPtr r = c->GetReply();
      if (r && r->type == REDIS_REPLY_ERROR && RedisText(r.get()).rfind("NOSCRIPT", 0) == 0) {
        r = Script(*c, CorrectSha(), kCorrectScript, {LimitRedisKey(k.name, "tokens"), LimitRedisKey(k.name, "day")},
                   {Num(k.tokens_per_minute), Num(k.tokens), Num(k.day)});
      }
      if (!r || r->type == REDIS_REPLY_ERROR) {
        ok = false;
        reason = Reason(r.get());
        message = "a token correction: " + (r ? RedisText(r.get()) : std::string("the connection closed"));
      }
    }
    if (ok && beat) ok = Heartbeat(*c, &reason, &message);
    if (ok) {
      failures = 0;
      if (!up()) Up();
      Give(std::move(c));
      if (beat) next_beat = std::chrono::steady_clock::now() + std::chrono::duration<double>(kHeartbeatSeconds);
    } else {
      if (!reason.empty()) Down(reason, message);
      next_beat = std::chrono::steady_clock::now() + std::chrono::duration<double>(RedisRetryDelaySeconds(++failures));
    }
    lock.lock();
    busy_ = false;
    wake_.notify_all();
  }
}

}  // namespace tachyon
