#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace tachyon {
namespace {

TEST(ThreadPoolTest, EveryIndexVisitedExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](size_t begin, size_t end, int thread_idx) {
        EXPECT_GE(thread_idx, 0);
        EXPECT_LT(thread_idx, threads);
        for (size_t i = begin; i < end; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
    }
  }
}

TEST(ThreadPoolTest, ReusedForManyCalls) {
  ThreadPool pool(2);
  std::atomic<long> total{0};
  for (int call = 0; call < 500; ++call) {
    pool.ParallelFor(64, [&](size_t begin, size_t end, int) {
      long sum = 0;
      for (size_t i = begin; i < end; ++i) sum += static_cast<long>(i);
      total += sum;
    });
  }
  EXPECT_EQ(total.load(), 500L * (63 * 64 / 2));
}

// A thread held up in its chunk leaves the rest of the work to the others.
TEST(ThreadPoolTest, StalledThreadsChunksGoToTheOthers) {
  ThreadPool pool(2);
  constexpr size_t kN = 800;
  std::atomic<size_t> by_caller{0};
  std::atomic<bool> stalled{false};
  pool.ParallelFor(kN, [&](size_t begin, size_t end, int thread_idx) {
    if (thread_idx == 0) {
      by_caller += end - begin;
    } else if (!stalled.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  // The worker took one chunk (an eighth) at most before the caller took the rest;
  // with a fixed half each, the caller would have done 400.
  EXPECT_GE(by_caller.load(), kN - kN / 8);
}

TEST(ThreadPoolTest, PhysicalCoresIsPositive) { EXPECT_GE(ThreadPool::PhysicalCores(), 1); }

}  // namespace
}  // namespace tachyon
