#include "gateway/route/circuit_breaker.h"

namespace tachyon {

namespace {
CircuitBreaker::Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<CircuitBreaker::Clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

CircuitBreaker::State CircuitBreaker::state(Clock::time_point now) const {
  if (state_ == State::kOpen && now >= reopen_at_) return State::kHalfOpen;
  return state_;
}

bool CircuitBreaker::WouldAllow(Clock::time_point now) const {
  switch (state(now)) {
    case State::kClosed: return true;
    case State::kOpen: return false;
    case State::kHalfOpen: return !probe_in_flight_;
  }
  return false;
}

bool CircuitBreaker::Allow(Clock::time_point now) {
  if (!WouldAllow(now)) return false;
  if (state(now) == State::kHalfOpen) {
    state_ = State::kHalfOpen;
    probe_in_flight_ = true;
  }
  return true;
}

void CircuitBreaker::OnSuccess() {
  state_ = State::kClosed;
  failures_ = 0;
  probe_in_flight_ = false;
}

void CircuitBreaker::OnFailure(Clock::time_point now) {
  ++failures_;
  if (state_ == State::kHalfOpen || failures_ >= options_.failure_threshold) {
    state_ = State::kOpen;
    reopen_at_ = now + Seconds(options_.cooldown_seconds);
  }
  probe_in_flight_ = false;
}

void CircuitBreaker::OpenFor(Clock::time_point now, double seconds) {
  const Clock::time_point until = now + Seconds(seconds);
  if (state_ != State::kOpen || until > reopen_at_) reopen_at_ = until;
  state_ = State::kOpen;
  ++failures_;
  probe_in_flight_ = false;
}

void CircuitBreaker::OnAbandoned() { probe_in_flight_ = false; }

const char* CircuitStateName(CircuitBreaker::State state) {
  switch (state) {
    case CircuitBreaker::State::kClosed: return "closed";
    case CircuitBreaker::State::kOpen: return "open";
    case CircuitBreaker::State::kHalfOpen: return "half_open";
  }
  return "closed";
}

}  // namespace tachyon
