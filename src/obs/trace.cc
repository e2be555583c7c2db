#include "obs/trace.h"

#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

namespace tachyon {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 15];
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

// Lower-case hex of exactly 2N digits into bytes.
template <size_t N>
bool FromHex(std::string_view text, std::array<uint8_t, N>* out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexValue(text[2 * i]), lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  return rng;
}

template <size_t N>
void FillRandom(std::array<uint8_t, N>* bytes) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t v = Rng()();
      std::memcpy(bytes->data() + i, &v, std::min<size_t>(8, N - i));
    }
  } while (AllZero(*bytes));
}

nlohmann::json AttributeJson(const Attribute& a) {
  nlohmann::json value;
  if (const auto* s = std::get_if<std::string>(&a.value)) {
    value["stringValue"] = *s;
  } else if (const auto* i = std::get_if<int64_t>(&a.value)) {
    value["intValue"] = std::to_string(*i);  // int64 is a string in protobuf's JSON mapping
  } else if (const auto* d = std::get_if<double>(&a.value)) {
    value["doubleValue"] = std::isfinite(*d) ? *d : 0.0;
  } else {
    value["boolValue"] = std::get<bool>(a.value);
  }
  return {{"key", a.key}, {"value", value}};
}

nlohmann::json AttributesJson(const std::vector<Attribute>& attributes) {
  nlohmann::json out = nlohmann::json::array();
  for (const Attribute& a : attributes) out.push_back(AttributeJson(a));
  return out;
}

}  // namespace

bool TraceId::valid() const { return !AllZero(bytes); }
std::string TraceId::Hex() const { return ToHex(bytes); }
bool SpanId::valid() const { return !AllZero(bytes); }
std::string SpanId::Hex() const { return ToHex(bytes); }

std::optional<TraceParent> ParseTraceparent(std::string_view header) {
  // Surrounding blanks are tolerated (header values are trimmed by most stacks).
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) header.remove_suffix(1);
  // version(2) - trace-id(32) - parent-id(16) - flags(2)
  if (header.size() < 55 || header[2] != '-' || header[35] != '-' || header[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!FromHex(header.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append "-..." fields.
  if (version[0] == 0 && header.size() != 55) return std::nullopt;
  if (header.size() > 55 && header[55] != '-') return std::nullopt;
  TraceParent out;
  if (!FromHex(header.substr(3, 32), &out.trace_id.bytes) || !FromHex(header.substr(36, 16), &out.span_id.bytes) ||
      !FromHex(header.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if (!out.trace_id.valid() || !out.span_id.valid()) return std::nullopt;
  out.sampled = (flags[0] & 1) != 0;
  return out;
}

std::string FormatTraceparent(const TraceId& trace, const SpanId& span, bool sampled) {
  return "00-" + trace.Hex() + "-" + span.Hex() + (sampled ? "-01" : "-00");
}

TraceId NewTraceId() {
  TraceId id;
  FillRandom(&id.bytes);
  return id;
}

SpanId NewSpanId() {
  SpanId id;
  FillRandom(&id.bytes);
  return id;
}

RequestTrace::RequestTrace(TraceId trace_id, SpanId parent, std::string tracestate, bool capture_content)
    : trace_id_(trace_id),
      remote_parent_(parent),
      root_(NewSpanId()),
      tracestate_(std::move(tracestate)),
      capture_content_(capture_content) {}

RequestTrace::~RequestTrace() {
  bool pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending = !finished_;
  }
  if (pending) Finish();
}

void RequestTrace::OnFinish(std::function<void(RequestTrace&)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_finish_ = std::move(fn);
}

void RequestTrace::Hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++holders_;
}

void RequestTrace::Release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--holders_ > 0 || finished_) return;
  }
  Finish();
}

void RequestTrace::Finish() {
  std::function<void(RequestTrace&)> fn;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    finished_ = true;
    fn = std::move(on_finish_);
  }
  if (fn) fn(*this);
}

void RequestTrace::Add(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

std::vector<Span> RequestTrace::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Span> out;
  out.swap(spans_);
  return out;
}

std::shared_ptr<RequestTrace> Tracer::Start(std::string_view traceparent, std::string_view tracestate) const {
  if (!traceparent.empty()) {
    if (std::optional<TraceParent> parent = ParseTraceparent(traceparent)) {
      if (!parent->sampled) return nullptr;
      // tracestate is kept only with a valid traceparent, and only when it is sane in size.
      std::string state(tracestate.size() <= 512 ? tracestate : std::string_view());
      return std::make_shared<RequestTrace>(parent->trace_id, parent->span_id, std::move(state),
                                            options_.capture_content);
    }
  }
  if (options_.sample_ratio <= 0) return nullptr;
  const TraceId id = NewTraceId();
  if (options_.sample_ratio < 1) {
    // TraceIdRatioBased: the trace id's last 8 bytes as a number below ratio x 2^64.
    uint64_t v = 0;
    for (size_t i = 8; i < 16; ++i) v = v << 8 | id.bytes[i];
    if (static_cast<double>(v) >= options_.sample_ratio * 18446744073709551616.0) return nullptr;
  }
  return std::make_shared<RequestTrace>(id, SpanId{}, "", options_.capture_content);
}

std::vector<ExportedSpan> FinishedSpans(RequestTrace& trace) {
  std::vector<ExportedSpan> out;
  for (Span& span : trace.Take()) out.push_back({trace.trace_id(), trace.tracestate(), std::move(span)});
  return out;
}

std::string EncodeOtlpJson(const std::vector<ExportedSpan>& spans, const std::string& service,
                           const std::string& version) {
  // steady_clock to Unix time, once for the batch.
  const auto unix_now = std::chrono::system_clock::now().time_since_epoch();
  const auto steady_now = std::chrono::steady_clock::now();
  auto nanos = [&](std::chrono::steady_clock::time_point t) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(unix_now - (steady_now - t)).count();
    return std::to_string(ns < 0 ? 0 : ns);
  };
  nlohmann::json list = nlohmann::json::array();
  for (const ExportedSpan& e : spans) {
    const Span& s = e.span;
    nlohmann::json span = {{"traceId", e.trace_id.Hex()},
                           {"spanId", s.id.Hex()},
                           {"name", s.name},
                           {"kind", static_cast<int>(s.kind)},
                           {"startTimeUnixNano", nanos(s.start)},
                           {"endTimeUnixNano", nanos(s.end)},
                           {"attributes", AttributesJson(s.attributes)}};
    if (s.parent.valid()) span["parentSpanId"] = s.parent.Hex();
    if (!e.tracestate.empty()) span["traceState"] = e.tracestate;
    if (!s.events.empty()) {
      nlohmann::json events = nlohmann::json::array();
      for (const SpanEvent& ev : s.events) {
        events.push_back({{"timeUnixNano", nanos(ev.time)}, {"name", ev.name},
                          {"attributes", AttributesJson(ev.attributes)}});
      }
      span["events"] = std::move(events);
    }
    if (s.error) span["status"] = {{"code", 2}, {"message", s.status_message}};
    list.push_back(std::move(span));
  }
  nlohmann::json resource = {
      {"attributes", AttributesJson({{"service.name", service}, {"telemetry.sdk.name", std::string("tachyon")},
                                     {"telemetry.sdk.language", std::string("cpp")},
                                     {"telemetry.sdk.version", version}})}};
  nlohmann::json body = {
      {"resourceSpans",
       nlohmann::json::array({{{"resource", resource},
                               {"scopeSpans", nlohmann::json::array({{{"scope", {{"name", "tachyon"}, {"version", version}}},
                                                                       {"spans", std::move(list)}}})}}})}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tachyon
