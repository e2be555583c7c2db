// CircuitBreaker: stops sending to a backend that keeps failing, and lets one
// probe through after a cool-down to see whether it is back.
//
//   closed     every request goes through; `failure_threshold` consecutive
//              failures open it
//   open       nothing goes through until `cooldown_seconds` have passed; then
//              the next request is the probe (half-open)
//   half-open  one probe in flight; its success closes the breaker, its failure
//              opens it again for another cool-down
//
// An upstream that says when to come back (429 with Retry-After) opens it until
// then (OpenFor), whatever the count.
//
// Pure: the time is passed in; not thread-safe (the caller holds a lock).
#pragma once

#include <chrono>

namespace tachyon {

struct CircuitBreakerOptions {
  int failure_threshold = 5;
  double cooldown_seconds = 10;
};

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

  explicit CircuitBreaker(CircuitBreakerOptions options = {}) : options_(options) {}

  // May a request go now? True for the half-open probe (once until it reports).
  bool Allow(Clock::time_point now);
  // Would Allow say yes (without taking the probe)?
  bool WouldAllow(Clock::time_point now) const;
  void OnSuccess();
  void OnFailure(Clock::time_point now);
  // A failure that names its own cool-down: open until at least now + seconds.
  void OpenFor(Clock::time_point now, double seconds);
  // A request that Allow let through ended without a verdict (cancelled): a probe may go again.
  void OnAbandoned();

  State state(Clock::time_point now) const;
  int consecutive_failures() const { return failures_; }

 private:
  CircuitBreakerOptions options_;
  State state_ = State::kClosed;
  int failures_ = 0;
  bool probe_in_flight_ = false;
  Clock::time_point reopen_at_;  // open: when the next probe may go
};

const char* CircuitStateName(CircuitBreaker::State state);  // "closed", "open", "half_open"

}  // namespace tachyon
