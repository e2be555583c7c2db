// Clock: the time the serving path reads, injected so that a test can move it
// instead of sleeping. Everything that decides by time takes one (the engine's
// deadlines and queue times, the gateway's breakers, TTFT EWMAs and latencies,
// the caches' TTLs); the default is Clock::Real(), the process's steady clock
// and the wall clock. A ManualClock moves only when told to, both readings together.
//
//   ManualClock clock;
//   ExactCache cache(..., &clock);
//   cache.Put(key, answer, clock.Now(), /*ttl_seconds=*/60, ...);
//   clock.AdvanceSeconds(61);          // the entry has expired, no sleep
//
// Not covered: I/O deadlines that the event loop itself times (Asio timers in
// http/: connect, first byte, read, write), which run on the real clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tachyon {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  // Monotonic time: what deadlines, TTLs and latencies are measured on.
  virtual time_point Now() const = 0;
  // Wall time, Unix seconds: what persisted entries (a cache file, Redis) carry.
  virtual double UnixSeconds() const = 0;

  // The real clocks (std::chrono::steady_clock and system_clock); never destroyed.
  static const Clock& Real();
  // `clock`, or the real one when it is null (the default of every option that takes one).
  static const Clock& Or(const Clock* clock) { return clock != nullptr ? *clock : Real(); }
};

// A clock that stands still until advanced; thread-safe (readers on other
// threads see each advance whole). It starts at the real clocks' readings.
class ManualClock : public Clock {
 public:
  ManualClock();
  time_point Now() const override;
  double UnixSeconds() const override;
  void Advance(duration d) { offset_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }
  void AdvanceSeconds(double seconds) { offset_ns_ += static_cast<int64_t>(seconds * 1e9); }

 private:
  time_point start_;
  double start_unix_;
  std::atomic<int64_t> offset_ns_{0};
};

// Seconds from a to b, as a double.
inline double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace tachyon
