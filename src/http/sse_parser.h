// SseParser: splits a text/event-stream body into events, fed in pieces of any
// size (an event may straddle reads; one read may hold many events). Lines end
// in "\n", "\r\n" or "\r"; "data:" lines of one event are joined with "\n";
// comment lines (":") and other fields are skipped; a blank line ends an event.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tachyon {

class SseParser {
 public:
  // Called with the data of each complete event that has at least one data line.
  using EventCallback = std::function<void(std::string_view data)>;
  explicit SseParser(EventCallback on_event) : on_event_(std::move(on_event)) {}

  void Feed(std::string_view bytes);
  // Bytes held back waiting for the end of a line or event.
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void Line(std::string_view line);

  EventCallback on_event_;
  std::string line_;   // the current line, not yet ended
  std::string data_;   // data of the current event so far
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was '\r': a following '\n' belongs to it
};

}  // namespace tachyon
