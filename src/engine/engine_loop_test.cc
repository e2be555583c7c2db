#include "engine/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "model/model_gen.h"

namespace tachyon {
namespace {

std::unique_ptr<Model> LoadTiny() {
  std::string path = ::testing::TempDir() + "/engine_loop_tiny_" + std::to_string(::getpid()) + ".gguf";
  const ModelShape& tiny = *FindModelShape("tiny");
  EXPECT_TRUE(GenerateRandomModel({.shape = &tiny, .scheme = PureScheme(GgmlType::kQ4_0), .seed = 5,
                                   .out_path = path})
                  .ok());
  auto model = std::move(Model::Load(path)).value();
  std::filesystem::remove(path);
  return model;
}

struct Collector {
  std::mutex mutex;
  std::condition_variable done;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, Status> errors;
  int finished = 0;

  EngineLoop::Callback For(int64_t id) {
    return [this, id](const RequestOutput* out, const Status& status) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!status.ok()) {
        errors[id] = status;
        ++finished;
      } else {
        for (TokenId t : out->new_tokens) tokens[id].push_back(t.value());
        if (out->finish_reason != FinishReason::kNone) ++finished;
      }
      done.notify_all();
    };
  }
  void WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(30), [&] { return finished >= n; }));
  }
};

TEST(EngineLoopTest, RequestsFromManyThreadsAllFinishAndErrorsAreReported) {
  auto model = LoadTiny();
  EngineOptions options{.kv = {.num_blocks = 64, .block_size = 16},
                        .scheduler = {.max_num_batched_tokens = 256, .max_num_seqs = 8, .max_model_len = 512},
                        .num_threads = 1};
  Collector c;  // before the loop: the loop (and its callbacks into c) ends first
  EngineLoop loop(std::make_unique<Engine>(*model, nullptr, options));
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&, i] {
      std::vector<TokenId> prompt;
      for (int k = 0; k < 10 + i; ++k) prompt.push_back(TokenId((k * 7 + i) % 250));
      loop.Submit({.id = SeqId(i), .prompt = prompt, .sampling = {.temperature = 0.0f}, .max_tokens = 6,
                   .ignore_eos = true},
                  c.For(i));
    });
  }
  for (auto& t : clients) t.join();
  loop.Submit({.id = SeqId(99), .prompt = {TokenId(1)}, .max_tokens = 0}, c.For(99));  // refused
  c.WaitFor(7);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.tokens[i].size(), 6u) << i;
  EXPECT_FALSE(c.errors[99].ok());
  EXPECT_EQ(loop.num_in_flight(), 0);
}

TEST(EngineLoopTest, CancelStopsOutputsAndFreesBlocks) {
  auto model = LoadTiny();
  EngineOptions options{.kv = {.num_blocks = 64, .block_size = 16},
                        .scheduler = {.max_num_batched_tokens = 256, .max_num_seqs = 8, .max_model_len = 2048},
                        .num_threads = 1};
  Collector c;  // before the loop: the loop (and its callbacks into c) ends first
  EngineLoop loop(std::make_unique<Engine>(*model, nullptr, options));
  std::vector<TokenId> prompt(40, TokenId(3));
  loop.Submit({.id = SeqId(1), .prompt = prompt, .max_tokens = 1000, .ignore_eos = true}, c.For(1));
  // Wait for a few tokens, then cancel.
  {
    std::unique_lock<std::mutex> lock(c.mutex);
    ASSERT_TRUE(c.done.wait_for(lock, std::chrono::seconds(30), [&] { return c.tokens[1].size() >= 3; }));
  }
  loop.Cancel(SeqId(1));
  EXPECT_TRUE(loop.WaitUntilIdle(30));
  EXPECT_EQ(loop.num_in_flight(), 0);
  EngineStats stats = loop.Stats();
  EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
  EXPECT_DOUBLE_EQ(stats.kv_usage, 0.0) << "cancelled blocks returned";
  std::lock_guard<std::mutex> lock(c.mutex);
  EXPECT_LT(c.tokens[1].size(), 1000u);
}

// A request whose client is behind is held: no tokens while blocked, the other
// request runs on; released, it finishes with the same greedy tokens as an unheld one.
TEST(EngineLoopTest, ABlockedRequestIsHeldAndResumesWhenReleased) {
  auto model = LoadTiny();
  EngineOptions options{.kv = {.num_blocks = 64, .block_size = 16},
                        .scheduler = {.max_num_batched_tokens = 256, .max_num_seqs = 8, .max_model_len = 512},
                        .num_threads = 1};
  Collector c;  // before the loop: the loop (and its callbacks into c) ends first
  EngineLoop loop(std::make_unique<Engine>(*model, nullptr, options));
  std::vector<TokenId> prompt(20, TokenId(5));
  std::atomic<bool> released{false};
  std::atomic<int> asked{0};
  std::mutex asked_mutex;
  std::condition_variable asked_cv;
  auto request = [&](int64_t id) {
    return Request{.id = SeqId(id), .prompt = prompt, .sampling = {.temperature = 0.0f}, .max_tokens = 40,
                   .ignore_eos = true};
  };
  // Its client falls behind after two tokens (asked on the loop thread before each
  // step, as the server asks for its unsent bytes), until released.
  loop.Submit(request(1), c.For(1), [&] {
    {
      std::lock_guard<std::mutex> lock(asked_mutex);
      ++asked;
    }
    asked_cv.notify_all();
    std::lock_guard<std::mutex> lock(c.mutex);
    return !released.load() && c.tokens[1].size() >= 2;
  });
  loop.Submit(request(2), c.For(2));
  c.WaitFor(1);  // request 2 runs to its end meanwhile
  const int asked_while_held = asked.load();
  {
    // Three more passes of the loop while request 1 is held.
    std::unique_lock<std::mutex> lock(asked_mutex);
    ASSERT_TRUE(asked_cv.wait_for(lock, std::chrono::seconds(30), [&] { return asked.load() >= asked_while_held + 3; }));
  }
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    EXPECT_EQ(c.tokens[2].size(), 40u);
    EXPECT_EQ(c.tokens[1].size(), 2u) << "no tokens while held";
  }
  EXPECT_GT(asked.load(), asked_while_held) << "asked again while everything was held";
  EXPECT_EQ(loop.num_in_flight(), 1);
  released = true;
  c.WaitFor(2);
  std::lock_guard<std::mutex> lock(c.mutex);
  EXPECT_EQ(c.tokens[1], c.tokens[2]) << "holding changes nothing in what is generated";
}

}  // namespace
}  // namespace tachyon
