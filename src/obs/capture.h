// CaptureWriter: the server's traffic capture, one JSON line per finished
// request (`tachyon serve --capture FILE`, `[server] capture = {...}`), the
// input of `tachyon audit` and of `tachyon bench --workload replay`.
//
// A line holds the request's numbers (ts, route, endpoint, stream, status,
// ttft_ms, e2e_ms, tokens, cache, backend, tenant, error, ...) and, with
// `bodies`, the request as received under "body" (a JSON value when the body
// parsed, else the raw text), with every match of the `redact` patterns in its
// strings replaced by [REDACTED] (a string a pattern cannot finish on within
// its match limit is replaced whole: never written unredacted).
//
// Off the request path: Add() only queues (a bounded queue; what does not fit
// is dropped and counted in tachyon:capture_dropped_total{reason}); one thread
// serializes, redacts and writes. The file is created 0600 and appended to;
// past max_bytes it is renamed to FILE.1 (FILE.2, ... : the first free number;
// nothing is deleted) and a new FILE started.
//
// The answer's text is never written: the writer only derives from it
// output_ngram_share, the share of the answer's word trigrams that occurred
// earlier in the prompt or the answer (what an n-gram speculative proposer
// could have guessed), and forgets it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bounded_regex.h"
#include "base/status.h"
#include "obs/metrics.h"

namespace tachyon {

struct CaptureOptions {
  std::string path;
  double sample = 1.0;  // share of requests captured, (0, 1]
  bool bodies = true;   // false: the numbers only
  int64_t max_bytes = int64_t{1} << 30;
  std::vector<std::string> redact;  // PCRE2 patterns, replaced by [REDACTED] in bodies
  bool operator==(const CaptureOptions&) const = default;
};

// One finished request.
struct CaptureRecord {
  nlohmann::json line;  // every field but "body" (an object)
  std::string body;     // the request as received (with bodies off: read for output_ngram_share, never written)
  std::string output;   // the answer's text (for output_ngram_share only; never written)
};

// One line of a capture as a reader sees it (`tachyon audit`, the replay
// workload). Request logs of other gateways with the same field names read too:
// ts may be Unix seconds or an ISO-8601 UTC time, body an object or its JSON text.
struct CapturedRequest {
  double ts = -1;  // Unix seconds; -1: absent
  std::string route, endpoint, model, backend, backend_kind, tenant, cache, error, route_class;
  bool stream = false;
  int status = 0;
  double ttft_ms = -1, e2e_ms = -1, queue_ms = -1;
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_tokens = -1;
  double output_ngram_share = -1;
  nlohmann::json body;  // null: the line has none
};

// Reads one line; false (with the reason in *error) when it is not a JSON
// object or a known field has the wrong type or a number out of range (not finite,
// beyond 1e15, a status outside 0..999).
bool ParseCaptureLine(std::string_view line, CapturedRequest* out, std::string* error);

// The share of `output`'s word trigrams that occurred earlier in `prompt` or in
// `output` itself; -1 when the output has fewer than three words.
double OutputNgramShare(const std::string& prompt, const std::string& output);

class CaptureWriter {
 public:
  // Records queued at most, and bytes of bodies queued at most.
  static constexpr size_t kMaxQueued = 8192;
  static constexpr size_t kMaxQueuedBytes = 64 << 20;
  // The answer text kept per request for output_ngram_share.
  static constexpr size_t kMaxOutputBytes = 64 << 10;

  // Opens (creates, 0600) the file and starts the writer thread.
  static StatusOr<std::shared_ptr<CaptureWriter>> Open(CaptureOptions options, MetricsRegistry* metrics);
  ~CaptureWriter();  // writes what is queued, then closes
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  const CaptureOptions& options() const { return options_; }
  // Whether the request now arriving is captured (the sample share, spread evenly).
  bool Sample();
  // Queues a record; never blocks (a full queue drops it, counted).
  void Add(CaptureRecord record);
  // Waits until every record queued before the call is written.
  void Flush();

 private:
  CaptureWriter(CaptureOptions options, MetricsRegistry* metrics);
  void Run();
  std::string Line(CaptureRecord& record) const;
  void Write(const std::string& line);
  Status OpenFile();
  Status Rotate();
  static std::string Dump(const nlohmann::json& line);
  void Redact(nlohmann::json& value) const;

  const CaptureOptions options_;
  std::vector<std::shared_ptr<BoundedRegex>> redact_;
  Counter* written_;
  Counter* dropped_full_;
  Counter* dropped_error_;
  std::atomic<uint64_t> next_{0};

  std::mutex mutex_;
  std::condition_variable ready_, drained_;
  std::deque<CaptureRecord> queue_;  // guarded by mutex_
  size_t queued_bytes_ = 0;          // guarded by mutex_
  uint64_t added_ = 0, done_ = 0;    // guarded by mutex_: records taken in, and written or dropped
  bool stop_ = false;                // guarded by mutex_

  // The writer thread's own.
  int fd_ = -1;
  int64_t size_ = 0;
  bool reported_error_ = false;
  std::thread thread_;
};

}  // namespace tachyon
