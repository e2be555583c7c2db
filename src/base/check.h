// CHECK(cond) << "message": stops the process when an internal invariant is broken.
// Never use it on external input; return a Status instead (status.h).
#pragma once

#include <sstream>

namespace tachyon::internal {

// Collects the streamed message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << ...` be one expression whose stream part runs only on failure.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace tachyon::internal

#define CHECK(condition)                     \
  (condition) ? (void)0                      \
              : ::tachyon::internal::Voidify() & \
                    ::tachyon::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))
