#include "base/timer_queue.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tachyon {
namespace {

using namespace std::chrono_literals;

// Waits (really: the queue runs on the steady clock) until pred holds, at most 5 s.
template <typename Pred>
bool WaitFor(Pred pred) {
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(TimerQueueTest, RunsInDeadlineOrderNotInOrderOfAdding) {
  TimerQueue timers;
  std::mutex mutex;
  std::vector<int> order;
  auto record = [&](int i) {
    return [&, i] {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(i);
    };
  };
  const auto now = std::chrono::steady_clock::now();
  timers.At(now + 60ms, record(3));
  timers.At(now + 20ms, record(1));
  timers.At(now + 40ms, record(2));
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mutex);
    return order.size() == 3;
  }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(timers.size(), 0u);
}

TEST(TimerQueueTest, NeverRunsEarly) {
  TimerQueue timers;
  std::atomic<int64_t> late_us{-1};
  const auto deadline = std::chrono::steady_clock::now() + 30ms;
  timers.At(deadline, [&] {
    late_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - deadline).count();
  });
  ASSERT_TRUE(WaitFor([&] { return late_us >= 0; }));
}

TEST(TimerQueueTest, ACancelledCallbackNeverRunsAndWhatItHeldIsFreed) {
  TimerQueue timers;
  std::atomic<bool> ran{false};
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> weak = held;
  const TimerQueue::Id id = timers.After(0.05, [&ran, held] { ran = true; });
  held.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_TRUE(timers.Cancel(id));
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(timers.Cancel(id));  // once only
  std::atomic<bool> later{false};
  timers.After(0.08, [&] { later = true; });
  ASSERT_TRUE(WaitFor([&] { return later.load(); }));
  EXPECT_FALSE(ran);
}

TEST(TimerQueueTest, APastDeadlineRunsAtOnceAndCancelAfterRunningSaysSo) {
  TimerQueue timers;
  std::atomic<bool> ran{false};
  const TimerQueue::Id id = timers.After(-1, [&] { ran = true; });
  ASSERT_TRUE(WaitFor([&] { return ran.load(); }));
  EXPECT_FALSE(timers.Cancel(id));
}

TEST(TimerQueueTest, ACallbackMayAddAndCancelTimers) {
  TimerQueue timers;
  std::atomic<int> runs{0};
  std::atomic<bool> second_ran{false};
  timers.After(0.01, [&] {
    ++runs;
    const TimerQueue::Id doomed = timers.After(0.01, [&] { second_ran = true; });
    timers.Cancel(doomed);
    timers.After(0.01, [&] { ++runs; });
  });
  ASSERT_TRUE(WaitFor([&] { return runs == 2; }));
  EXPECT_FALSE(second_ran);
}

TEST(TimerQueueTest, DestroyedWithPendingCallbacksDropsThem) {
  std::atomic<bool> ran{false};
  {
    TimerQueue timers;
    timers.After(10, [&] { ran = true; });
  }
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace tachyon
