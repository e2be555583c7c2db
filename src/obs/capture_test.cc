#include "obs/capture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace tachyon {
namespace {

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("capture_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "traffic.jsonl").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::vector<nlohmann::json> Lines(const std::string& path) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  static CaptureRecord Record(int i, std::string body) {
    return {.line = {{"route", "chat"}, {"status", 200}, {"n", i}}, .body = std::move(body), .output = ""};
  }

  std::filesystem::path dir_;
  std::string path_;
  MetricsRegistry metrics_;
};

TEST_F(CaptureTest, OneLinePerRecordWithTheBodyAsJsonAndTheFileIsPrivate) {
  auto w = CaptureWriter::Open({.path = path_}, &metrics_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  (*w)->Add(Record(0, R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})"));
  (*w)->Add(Record(1, "{not json"));
  (*w)->Flush();
  const auto lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["n"], 0);
  EXPECT_EQ(lines[0]["body"]["messages"][0]["content"], "hi") << "a parsed body is a JSON value";
  EXPECT_EQ(lines[1]["body"], "{not json") << "a body that is not JSON is kept as text";
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(metrics_.Render().find("tachyon:capture_written_total 2"), std::string::npos);
}

TEST_F(CaptureTest, BodiesOffKeepsOnlyTheNumbers) {
  auto w = CaptureWriter::Open({.path = path_, .bodies = false}, &metrics_);
  ASSERT_TRUE(w.ok());
  CaptureRecord r = Record(0, R"({"messages":[{"role":"user","content":"secret one two three"}]})");
  r.output = "one two three";  // its one trigram is the prompt's: the share still reads the prompt
  (*w)->Add(std::move(r));
  (*w)->Flush();
  const auto lines = Lines(path_);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].contains("body"));
  EXPECT_DOUBLE_EQ(lines[0]["output_ngram_share"].get<double>(), 1.0);
  std::ifstream in(path_);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("secret"), std::string::npos);
}

TEST_F(CaptureTest, RedactReplacesMatchesInEveryStringOfTheBody) {
  auto w = CaptureWriter::Open({.path = path_, .redact = {"[a-z]+@[a-z]+\\.com", "\\b\\d{3}-\\d{4}\\b"}}, &metrics_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  (*w)->Add(Record(0, R"({"messages":[{"role":"user","content":"mail bob@corp.com or call 555-1234"}],)"
                      R"("user":"ann@corp.com"})"));
  (*w)->Add(Record(1, "raw bob@corp.com"));
  (*w)->Flush();
  const auto lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["body"]["messages"][0]["content"], "mail [REDACTED] or call [REDACTED]");
  EXPECT_EQ(lines[0]["body"]["user"], "[REDACTED]");
  EXPECT_EQ(lines[1]["body"], "raw [REDACTED]");
}

TEST_F(CaptureTest, AStringThePatternCannotFinishOnIsRedactedWhole) {
  auto w = CaptureWriter::Open({.path = path_, .redact = {"(a+)+$"}}, &metrics_);
  ASSERT_TRUE(w.ok());
  (*w)->Add(Record(0, R"({"prompt":")" + std::string(40, 'a') + R"(!"})"));
  (*w)->Flush();
  EXPECT_EQ(Lines(path_)[0]["body"]["prompt"], "[REDACTED]");
}

TEST_F(CaptureTest, BadOptionsAreRefusedWithTheReason) {
  EXPECT_FALSE(CaptureWriter::Open({.path = path_, .sample = 0}, &metrics_).ok());
  EXPECT_FALSE(CaptureWriter::Open({.path = path_, .sample = 1.5}, &metrics_).ok());
  auto bad = CaptureWriter::Open({.path = path_, .redact = {"(open"}}, &metrics_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(open"), std::string::npos);
  EXPECT_FALSE(CaptureWriter::Open({.path = (dir_ / "no" / "such" / "dir.jsonl").string()}, &metrics_).ok());
}

TEST_F(CaptureTest, RotatesPastMaxBytesWithoutDeletingAnything) {
  {
    auto w = CaptureWriter::Open({.path = path_, .max_bytes = 4096}, &metrics_);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 30; ++i) (*w)->Add(Record(i, R"({"prompt":")" + std::string(400, 'x') + R"("})"));
  }  // the destructor writes what is queued
  size_t total = 0;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_LE(std::filesystem::file_size(entry.path()), 4096u);
    total += Lines(entry.path().string()).size();
    ++files;
  }
  EXPECT_EQ(total, 30u);
  EXPECT_GE(files, 4);
  EXPECT_TRUE(std::filesystem::exists(path_ + ".1"));
}

TEST_F(CaptureTest, SampleCapturesThatShare) {
  auto w = CaptureWriter::Open({.path = path_, .sample = 0.25}, &metrics_);
  ASSERT_TRUE(w.ok());
  int taken = 0;
  for (int i = 0; i < 10000; ++i) taken += (*w)->Sample();
  EXPECT_NEAR(taken, 2500, 200);
}

TEST_F(CaptureTest, ABodyOverTheQueueBoundIsDroppedAndCounted) {
  auto w = CaptureWriter::Open({.path = path_}, &metrics_);
  ASSERT_TRUE(w.ok());
  (*w)->Add(Record(0, std::string(CaptureWriter::kMaxQueuedBytes + 1, 'x')));
  (*w)->Add(Record(1, "{}"));
  (*w)->Flush();
  ASSERT_EQ(Lines(path_).size(), 1u);
  EXPECT_NE(metrics_.Render().find("tachyon:capture_dropped_total{reason=\"queue_full\"} 1"), std::string::npos);
}

TEST_F(CaptureTest, OutputNgramShareCountsTrigramsSeenBefore) {
  EXPECT_EQ(OutputNgramShare("anything", "too short"), -1);
  // Output trigrams: (the,quick,brown) (quick,brown,fox) (brown,fox,jumps): two of three in the prompt.
  EXPECT_DOUBLE_EQ(OutputNgramShare("The quick brown fox sleeps", "The quick brown fox jumps"), 2.0 / 3);
  // Repeats within the output count too: a b c a b c -> (a,b,c) (b,c,a) (c,a,b) (a,b,c): one repeat.
  EXPECT_DOUBLE_EQ(OutputNgramShare("", "a b c a b c"), 1.0 / 4);
  auto w = CaptureWriter::Open({.path = path_}, &metrics_);
  ASSERT_TRUE(w.ok());
  CaptureRecord r = Record(0, R"({"messages":[{"role":"user","content":"fix def add(a, b): return a - b"}]})");
  r.output = "def add(a, b): return a + b";
  (*w)->Add(std::move(r));
  (*w)->Flush();
  const auto lines = Lines(path_);
  // Output words: def add a b return a b -> 5 trigrams; (def,add,a) (add,a,b) (a,b,return) (b,return,a) (return,a,b).
  EXPECT_DOUBLE_EQ(lines[0]["output_ngram_share"].get<double>(), 1.0);
  EXPECT_EQ(lines[0].dump().find("a + b"), std::string::npos) << "the answer itself is never written";
}

}  // namespace
}  // namespace tachyon
