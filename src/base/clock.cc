#include "base/clock.h"

namespace tachyon {
namespace {

class RealClock : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
  double UnixSeconds() const override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock* real = new RealClock();
  return *real;
}

ManualClock::ManualClock() : start_(Real().Now()), start_unix_(Real().UnixSeconds()) {}

Clock::time_point ManualClock::Now() const {
  return start_ + std::chrono::duration_cast<duration>(std::chrono::nanoseconds(offset_ns_.load()));
}

double ManualClock::UnixSeconds() const { return start_unix_ + static_cast<double>(offset_ns_.load()) * 1e-9; }

}  // namespace tachyon
