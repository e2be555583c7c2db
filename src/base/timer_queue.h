// TimerQueue: callbacks run once at a steady-clock deadline, on the queue's own
// thread, in deadline order. For the serving path's short timed decisions that
// have no event loop of their own (the gateway's hedged requests): a callback
// must be brief (start something and return), since the next waits for it.
//
//   TimerQueue& timers = TimerQueue::Shared();
//   TimerQueue::Id id = timers.After(0.25, [weak] { if (auto c = weak.lock()) c->Hedge(); });
//   timers.Cancel(id);  // it had not run: it never will
//
// Deadlines are on the real steady clock, as Asio's I/O timers are (base/clock.h's
// ManualClock does not move them): a test that needs one to fire waits for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace tachyon {

class TimerQueue {
 public:
  using Id = uint64_t;  // 0 is never an id

  TimerQueue();
  // Joins the thread; callbacks not yet run are dropped.
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // The process's queue, started on first use and never destroyed (a callback
  // may hold the last reference to whatever would own a queue).
  static TimerQueue& Shared();

  // Runs fn at `deadline` (at once, on the queue's thread, when it has passed).
  Id At(std::chrono::steady_clock::time_point deadline, std::function<void()> fn);
  Id After(double seconds, std::function<void()> fn);
  // True when fn had not started and now never will; false when it has run,
  // is running, or the id is unknown.
  bool Cancel(Id id);
  // Callbacks waiting.
  size_t size() const;

 private:
  void Loop();

  using Key = std::pair<std::chrono::steady_clock::time_point, Id>;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<Key, std::function<void()>> pending_;  // guarded by mutex_
  std::map<Id, std::chrono::steady_clock::time_point> deadlines_;  // guarded by mutex_
  Id next_id_ = 1;        // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace tachyon
