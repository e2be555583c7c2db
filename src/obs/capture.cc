#include "obs/capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_set>

namespace tachyon {
namespace {

constexpr std::string_view kRedacted = "[REDACTED]";

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Words: runs of letters, digits and bytes of multi-byte characters, lower-cased.
std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    auto word_byte = [](unsigned char c) { return std::isalnum(c) || c >= 0x80 || c == '_'; };
    while (i < text.size() && !word_byte(static_cast<unsigned char>(text[i]))) ++i;
    const size_t start = i;
    while (i < text.size() && word_byte(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

uint64_t TrigramHash(std::string_view a, std::string_view b, std::string_view c) {
  const std::hash<std::string_view> h;
  return SplitMix64(h(a) ^ SplitMix64(h(b) ^ SplitMix64(h(c))));
}

// Every string in a JSON value, appended with a separator.
void AppendStrings(const nlohmann::json& v, std::string* out) {
  if (v.is_string()) {
    out->append(v.get_ref<const std::string&>()).push_back('\n');
  } else if (v.is_structured()) {
    for (const auto& item : v) AppendStrings(item, out);
  }
}

// "2026-12-05T05:15:15.123Z" (or +00:00, or no zone: UTC) as Unix seconds; -1 when not one.
double IsoSeconds(const std::string& s) {
  int y, mo, d, h, mi;
  double sec;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%lf", &y, &mo, &d, &h, &mi, &sec) != 6 &&
      std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%lf", &y, &mo, &d, &h, &mi, &sec) != 6) {
    return -1;
  }
  if (y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      !(sec >= 0 && sec < 61)) {
    return -1;
  }
  // Days from the civil date (proleptic Gregorian), without the C library's time zones.
  y -= mo <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = static_cast<double>(era) * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + sec;
}

}  // namespace

bool ParseCaptureLine(std::string_view text, CapturedRequest* out, std::string* error) {
  nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  *out = CapturedRequest{};
  for (auto item = line.begin(); item != line.end(); ++item) {
    const std::string& key = item.key();
    nlohmann::json& v = item.value();
    // Numbers are finite and within what a request can measure (1e15: 31,000 years in
    // ms, or that many tokens); anything else is a broken line, not a value to chart.
    auto number = [&](double* to) {
      if (v.is_null()) return true;
      if (!v.is_number()) return false;
      const double x = v.get<double>();
      if (!std::isfinite(x) || std::fabs(x) > 1e15) return false;
      *to = x;
      return true;
    };
    auto integer = [&](int64_t* to) {
      double x = 0;
      if (!number(&x)) return false;
      if (!v.is_null()) *to = static_cast<int64_t>(x);
      return true;
    };
    auto string = [&](std::string* to) {
      if (v.is_null()) return true;
      if (!v.is_string()) return false;
      *to = v.get<std::string>();
      return true;
    };
    bool ok = true;
    if (key == "ts") {
      if (v.is_string()) {
        out->ts = IsoSeconds(v.get<std::string>());
        ok = out->ts >= 0;
      } else {
        ok = number(&out->ts);
      }
    } else if (key == "route") ok = string(&out->route);
    else if (key == "endpoint") ok = string(&out->endpoint);
    else if (key == "model") ok = string(&out->model);
    else if (key == "backend") ok = string(&out->backend);
    else if (key == "backend_kind") ok = string(&out->backend_kind);
    else if (key == "tenant") ok = string(&out->tenant);
    else if (key == "cache") ok = string(&out->cache);
    else if (key == "route_class") ok = string(&out->route_class);
    else if (key == "error") ok = v.is_string() ? string(&out->error) : (out->error = v.is_null() ? "" : "error", true);
    else if (key == "stream") ok = v.is_boolean() ? (out->stream = v.get<bool>(), true) : v.is_null();
    else if (key == "status") {
      double s = 0;
      ok = number(&s) && s >= 0 && s < 1000;
      out->status = ok ? static_cast<int>(s) : 0;
    } else if (key == "ttft_ms") ok = number(&out->ttft_ms);
    else if (key == "e2e_ms") ok = number(&out->e2e_ms);
    else if (key == "queue_ms") ok = number(&out->queue_ms);
    else if (key == "output_ngram_share") ok = number(&out->output_ngram_share);
    else if (key == "prompt_tokens") ok = integer(&out->prompt_tokens);
    else if (key == "completion_tokens") ok = integer(&out->completion_tokens);
    else if (key == "cached_tokens") ok = integer(&out->cached_tokens);
    else if (key == "body") {
      if (v.is_string()) {  // a log that keeps the body as its JSON text
        nlohmann::json parsed = nlohmann::json::parse(v.get_ref<const std::string&>(), nullptr, false);
        out->body = parsed.is_discarded() ? std::move(v) : std::move(parsed);
      } else {
        out->body = std::move(v);
      }
    }
    if (!ok) {
      *error = "field '" + key + "' has the wrong type or is out of range";
      return false;
    }
  }
  if (out->model.empty() && out->body.is_object()) {
    auto m = out->body.find("model");
    if (m != out->body.end() && m->is_string()) out->model = m->get<std::string>();
  }
  if (out->body.is_object() && out->endpoint.empty()) {
    out->endpoint = out->body.contains("prompt") ? "/v1/completions" : "/v1/chat/completions";
  }
  if (out->body.is_object() && !line.contains("stream")) {
    auto s = out->body.find("stream");
    out->stream = s != out->body.end() && s->is_boolean() && s->get<bool>();
  }
  return true;
}

double OutputNgramShare(const std::string& prompt, const std::string& output) {
  const std::vector<std::string_view> out = Words(output);
  if (out.size() < 3) return -1;
  std::unordered_set<uint64_t> seen;
  const std::vector<std::string_view> in = Words(prompt);
  for (size_t i = 2; i < in.size(); ++i) seen.insert(TrigramHash(in[i - 2], in[i - 1], in[i]));
  size_t repeated = 0;
  for (size_t i = 2; i < out.size(); ++i) {
    repeated += !seen.insert(TrigramHash(out[i - 2], out[i - 1], out[i])).second;
  }
  return static_cast<double>(repeated) / static_cast<double>(out.size() - 2);
}

CaptureWriter::CaptureWriter(CaptureOptions options, MetricsRegistry* metrics) : options_(std::move(options)) {
  CounterFamily& dropped = metrics->AddCounter(
      "tachyon:capture_dropped_total", "Finished requests not written to the capture file (queue_full, write_error)",
      {"reason"});
  dropped_full_ = &dropped.With({"queue_full"});
  dropped_error_ = &dropped.With({"write_error"});
  written_ = &metrics->AddCounter("tachyon:capture_written_total", "Finished requests written to the capture file", {})
                  .With({});
}

StatusOr<std::shared_ptr<CaptureWriter>> CaptureWriter::Open(CaptureOptions options, MetricsRegistry* metrics) {
  if (options.path.empty()) return InvalidArgumentError("capture: no path");
  if (!(options.sample > 0 && options.sample <= 1)) {
    return InvalidArgumentError("capture: sample must be in (0, 1], not " + std::to_string(options.sample));
  }
  if (options.max_bytes < 4096) return InvalidArgumentError("capture: max_bytes must be at least 4096");
  std::shared_ptr<CaptureWriter> w(new CaptureWriter(std::move(options), metrics));
  for (const std::string& pattern : w->options_.redact) {
    StatusOr<std::shared_ptr<BoundedRegex>> regex = BoundedRegex::Compile(pattern);
    if (!regex.ok()) return InvalidArgumentError("capture: redact '" + pattern + "': " + regex.status().message());
    w->redact_.push_back(*regex);
  }
  RETURN_IF_ERROR(w->OpenFile());
  w->thread_ = std::thread([raw = w.get()] { raw->Run(); });
  return w;
}

CaptureWriter::~CaptureWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

Status CaptureWriter::OpenFile() {
  fd_ = ::open(options_.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) return InvalidArgumentError("capture: cannot open " + options_.path + ": " + std::strerror(errno));
  struct stat st {};
  size_ = ::fstat(fd_, &st) == 0 ? st.st_size : 0;
  return Status::Ok();
}

Status CaptureWriter::Rotate() {
  ::close(fd_);
  fd_ = -1;
  for (int n = 1; n < 1000000; ++n) {
    const std::string target = options_.path + "." + std::to_string(n);
    if (::access(target.c_str(), F_OK) == 0) continue;
    if (::rename(options_.path.c_str(), target.c_str()) != 0) {
      return InvalidArgumentError("capture: cannot rename " + options_.path + ": " + std::strerror(errno));
    }
    break;
  }
  return OpenFile();
}

bool CaptureWriter::Sample() {
  if (options_.sample >= 1) return true;
  const uint64_t draw = SplitMix64(next_.fetch_add(1, std::memory_order_relaxed));
  return static_cast<double>(draw >> 11) * 0x1.0p-53 < options_.sample;
}

void CaptureWriter::Add(CaptureRecord record) {
  if (!options_.bodies && record.output.empty()) record.body.clear();  // nothing reads it
  const size_t bytes = record.body.size() + record.output.size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kMaxQueued || queued_bytes_ + bytes > kMaxQueuedBytes) {
      dropped_full_->Add();
      return;
    }
    queued_bytes_ += bytes;
    ++added_;
    queue_.push_back(std::move(record));
  }
  ready_.notify_one();
}

void CaptureWriter::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = added_;
  drained_.wait(lock, [&] { return done_ >= target; });
}

void CaptureWriter::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything is written
    CaptureRecord record = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= record.body.size() + record.output.size();
    lock.unlock();
    Write(Line(record));
    lock.lock();
    ++done_;
    drained_.notify_all();
  }
}

std::string CaptureWriter::Line(CaptureRecord& record) const {
  nlohmann::json& line = record.line;
  if (record.body.empty() && record.output.empty()) return Dump(line);
  // One parse serves both: the prompt's words for output_ngram_share, and the body written.
  nlohmann::json body = nlohmann::json::parse(record.body, nullptr, false);
  if (!record.output.empty()) {
    std::string prompt;
    if (!body.is_discarded()) AppendStrings(body, &prompt);
    const double share = OutputNgramShare(prompt, record.output);
    if (share >= 0) line["output_ngram_share"] = std::round(share * 1e4) / 1e4;
  }
  if (options_.bodies && !record.body.empty()) {
    if (body.is_discarded()) body = std::move(record.body);  // as received, a string
    Redact(body);
    line["body"] = std::move(body);
  }
  return Dump(line);
}

std::string CaptureWriter::Dump(const nlohmann::json& line) {
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.push_back('\n');
  return text;
}

void CaptureWriter::Redact(nlohmann::json& value) const {
  if (redact_.empty()) return;
  if (value.is_structured()) {
    for (auto& item : value) Redact(item);
    return;
  }
  if (!value.is_string()) return;
  std::string text = value.get<std::string>();
  for (const auto& regex : redact_) {
    std::optional<std::string> replaced = regex->ReplaceAll(text, kRedacted);
    if (!replaced) {  // the pattern could not finish: nothing of this string is kept
      value = std::string(kRedacted);
      return;
    }
    text = std::move(*replaced);
  }
  value = std::move(text);
}

void CaptureWriter::Write(const std::string& line) {
  if (fd_ >= 0 && size_ > 0 && size_ + static_cast<int64_t>(line.size()) > options_.max_bytes) {
    if (Status s = Rotate(); !s.ok() && !reported_error_) {
      reported_error_ = true;
      std::fprintf(stderr, "capture: %s (lines are dropped and counted until it works)\n", s.message().c_str());
    }
  }
  if (fd_ < 0 && OpenFile().ok()) reported_error_ = false;
  size_t off = 0;
  while (fd_ >= 0 && off < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (off == line.size()) {
    size_ += static_cast<int64_t>(line.size());
    written_->Add();
    return;
  }
  dropped_error_->Add();
  if (!reported_error_) {
    reported_error_ = true;
    std::fprintf(stderr, "capture: cannot write %s: %s (lines are dropped and counted)\n", options_.path.c_str(),
                 std::strerror(errno));
  }
}

}  // namespace tachyon
