#include "base/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

namespace tachyon {
namespace {

TEST(WorkerPoolTest, RunsEveryTaskOffTheCallerAndDrainsOnDestruction) {
  std::atomic<int> done{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  {
    WorkerPool pool(3);
    EXPECT_EQ(pool.num_threads(), 3);
    for (int i = 0; i < 1000; ++i) {
      pool.Post([&] {
        {
          std::lock_guard<std::mutex> lock(mutex);
          threads.insert(std::this_thread::get_id());
        }
        ++done;
      });
    }
  }
  EXPECT_EQ(done.load(), 1000);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(threads.size(), 3u);
}

TEST(WorkerPoolTest, TasksMayPostTasks) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(1);
    pool.Post([&] {
      pool.Post([&] { ++done; });
      ++done;
    });
  }
  EXPECT_EQ(done.load(), 2);
}

TEST(WorkerPoolTest, CloseRunsWhatWasPostedAndRefusesTheRest) {
  std::atomic<int> done{0};
  WorkerPool pool(2);
  for (int i = 0; i < 100; ++i) pool.Post([&] { ++done; });
  pool.Close();
  EXPECT_EQ(done.load(), 100);
  pool.Post([&] { ++done; });
  pool.Close();
  EXPECT_EQ(done.load(), 100) << "dropped after Close";
}

}  // namespace
}  // namespace tachyon
