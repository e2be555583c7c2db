// Traces in OpenTelemetry's model: one per request, made of spans (an id, a
// parent, a name, start and end, attributes, events, a status), and the W3C
// Trace Context header (`traceparent`) that carries a trace from process to
// process. The spans of a request are collected in its RequestTrace as they
// end and exported together (obs/otlp_exporter.h) when the request ends.
//
// Times are steady_clock time points, as everywhere else in the server; the
// encoder turns them into Unix nanoseconds when the spans are written.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tachyon {

struct TraceId {
  std::array<uint8_t, 16> bytes{};
  bool valid() const;  // not all zero
  std::string Hex() const;
  bool operator==(const TraceId&) const = default;
};

struct SpanId {
  std::array<uint8_t, 8> bytes{};
  bool valid() const;
  std::string Hex() const;
  bool operator==(const SpanId&) const = default;
};

// "00-<trace id>-<parent span id>-<flags>" (W3C Trace Context, version 00; a
// later version is read by its first four fields, as the spec asks).
struct TraceParent {
  TraceId trace_id;
  SpanId span_id;
  bool sampled = false;
};
std::optional<TraceParent> ParseTraceparent(std::string_view header);
std::string FormatTraceparent(const TraceId& trace, const SpanId& span, bool sampled);

// Fresh random ids (never all zero).
TraceId NewTraceId();
SpanId NewSpanId();

using AttributeValue = std::variant<std::string, int64_t, double, bool>;
struct Attribute {
  std::string key;
  AttributeValue value;
};

struct SpanEvent {
  std::string name;
  std::chrono::steady_clock::time_point time;
  std::vector<Attribute> attributes;
};

// OpenTelemetry's SpanKind values (as OTLP numbers them).
enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };

struct Span {
  std::string name;
  SpanId id;
  SpanId parent;  // all zero: a root with no parent
  SpanKind kind = SpanKind::kInternal;
  std::chrono::steady_clock::time_point start, end;
  std::vector<Attribute> attributes;
  std::vector<SpanEvent> events;
  bool error = false;          // status ERROR (else UNSET)
  std::string status_message;  // with error
};

// One request's trace. Spans are added from any thread as they end. The
// trace is finished when every holder has let go: the server span holds it
// from the start, and work that ends after the answer (the cache write)
// holds it too; the last Release() calls the finish callback once.
class RequestTrace {
 public:
  // parent: the caller's span when a sampled traceparent came in (invalid: none);
  // tracestate: the incoming header, kept on the server span.
  RequestTrace(TraceId trace_id, SpanId parent, std::string tracestate, bool capture_content);
  ~RequestTrace();

  const TraceId& trace_id() const { return trace_id_; }
  const SpanId& remote_parent() const { return remote_parent_; }
  // The server span's id: the parent of the request's stage and attempt spans.
  const SpanId& root() const { return root_; }
  const std::string& tracestate() const { return tracestate_; }
  // Prompt and answer text may go into spans (`capture_content`).
  bool capture_content() const { return capture_content_; }
  // The traceparent a request sent from `span` carries.
  std::string Traceparent(const SpanId& span) const { return FormatTraceparent(trace_id_, span, true); }

  void Add(Span span);
  // The spans added so far (taken: a second call returns the later ones).
  std::vector<Span> Take();

  // Called once, by the last Release (or the destructor, if a holder never released).
  void OnFinish(std::function<void(RequestTrace&)> fn);
  void Hold();
  void Release();

 private:
  void Finish();

  const TraceId trace_id_;
  const SpanId remote_parent_;
  const SpanId root_;
  const std::string tracestate_;
  const bool capture_content_;
  std::mutex mutex_;
  std::vector<Span> spans_;  // guarded by mutex_
  int holders_ = 1;          // guarded by mutex_; the server span's hold
  bool finished_ = false;    // guarded by mutex_
  std::function<void(RequestTrace&)> on_finish_;  // guarded by mutex_
};

struct TracerOptions {
  double sample_ratio = 1.0;  // of the traces this process starts; a caller's sampled flag decides the others
  bool capture_content = false;
};

class Tracer {
 public:
  explicit Tracer(TracerOptions options) : options_(options) {}
  // The trace of a request with these headers ("" when absent), or null when it
  // is not sampled. Parent-based: a valid incoming traceparent is followed (kept
  // when its sampled flag is set, dropped when not); otherwise the trace is kept
  // with probability sample_ratio (decided on the trace id, as TraceIdRatioBased does).
  std::shared_ptr<RequestTrace> Start(std::string_view traceparent, std::string_view tracestate) const;
  const TracerOptions& options() const { return options_; }

 private:
  TracerOptions options_;
};

// A finished span with the trace it belongs to, as the exporter queues it.
struct ExportedSpan {
  TraceId trace_id;
  std::string tracestate;
  Span span;
};

// The spans of a finished request, ready for the exporter.
std::vector<ExportedSpan> FinishedSpans(RequestTrace& trace);

// The OTLP/JSON body (ExportTraceServiceRequest) of these spans: ids in hex,
// times in Unix nanoseconds as strings, 64-bit integers as strings, as the
// OTLP specification's JSON encoding has them. service: the resource's
// service.name; version: the instrumentation scope's version.
std::string EncodeOtlpJson(const std::vector<ExportedSpan>& spans, const std::string& service,
                           const std::string& version);

}  // namespace tachyon
