#include "gateway/cache/single_flight.h"

#include <gtest/gtest.h>


namespace tachyon {
namespace {

// Records what a follower is told, in order.
class Recorder : public Flight::Follower {
 public:
  void OnText(const std::string& text) override { log += "text:" + text + ";"; }
  void OnEnd(const CapturedAnswer& answer) override { log += "end:" + answer.text + "/" + answer.finish_reason + ";"; }
  void OnFail(Flight::FailKind kind) override { log += "fail:" + std::to_string(static_cast<int>(kind)) + ";"; }
  std::string log;
};

TEST(SingleFlightTest, TheFirstLeadsLaterOnesFollowFromTheStartThenLive) {
  SingleFlight flights;
  auto a = std::make_shared<Recorder>(), b = std::make_shared<Recorder>(), c = std::make_shared<Recorder>();
  SingleFlight::Joined lead = flights.Join("k", a);
  ASSERT_TRUE(lead.leader);
  EXPECT_EQ(a->log, "") << "a leader is not its own follower";
  lead.flight->Text("Hel");
  SingleFlight::Joined follow = flights.Join("k", b);
  EXPECT_FALSE(follow.leader);
  EXPECT_EQ(follow.flight, lead.flight);
  EXPECT_EQ(b->log, "text:Hel;") << "what came so far, replayed";
  lead.flight->Text("lo");
  EXPECT_TRUE(flights.Join("other", c).leader) << "another key, another flight";
  lead.flight->End(CapturedAnswer{.text = "Hello", .finish_reason = "stop"});
  flights.Land("k", lead.flight);
  EXPECT_EQ(b->log, "text:Hel;text:lo;end:Hello/stop;");
  EXPECT_EQ(lead.flight->num_followers(), 0u);
  EXPECT_EQ(flights.size(), 1u) << "landed: only the other key's is in flight";
  auto d = std::make_shared<Recorder>();
  EXPECT_TRUE(flights.Join("k", d).leader) << "an ended flight is never followed: the cache has its answer";
  EXPECT_EQ(d->log, "");
}

TEST(SingleFlightTest, AWholeAnswerGivesItsTextAtTheEnd) {
  SingleFlight flights;
  auto f = std::make_shared<Recorder>();
  SingleFlight::Joined lead = flights.Join("k", nullptr);
  flights.Join("k", f);
  lead.flight->End(CapturedAnswer{.text = "all at once", .finish_reason = "length"});
  EXPECT_EQ(f->log, "text:all at once;end:all at once/length;");
}

TEST(SingleFlightTest, FailuresSayWhetherToJoinAgainGoAloneOrEndBroken) {
  SingleFlight flights;
  auto retry = std::make_shared<Recorder>();
  SingleFlight::Joined lead = flights.Join("k", nullptr);
  flights.Join("k", retry);
  lead.flight->Fail(Flight::FailKind::kRetry);
  flights.Land("k", lead.flight);
  EXPECT_EQ(retry->log, "fail:0;");
  EXPECT_TRUE(flights.Join("k", retry).leader) << "a failed flight leaves at once: the next one leads";
  EXPECT_EQ(flights.size(), 1u);

  auto broken = std::make_shared<Recorder>();
  SingleFlight::Joined second = flights.Join("j", nullptr);
  second.flight->Text("par");
  flights.Join("j", broken);
  second.flight->Fail(Flight::FailKind::kRetry);
  EXPECT_EQ(broken->log, "text:par;fail:2;") << "text went out: it cannot start over";

  auto alone = std::make_shared<Recorder>();
  SingleFlight::Joined third = flights.Join("t", nullptr);
  flights.Join("t", alone);
  third.flight->Fail(Flight::FailKind::kAlone);
  EXPECT_EQ(alone->log, "fail:1;");
}

TEST(SingleFlightTest, AFollowerThatLeavesHearsNoMore) {
  SingleFlight flights;
  auto f = std::make_shared<Recorder>();
  SingleFlight::Joined lead = flights.Join("k", nullptr);
  flights.Join("k", f);
  EXPECT_EQ(lead.flight->num_followers(), 1u);
  lead.flight->Leave(f.get());
  lead.flight->Text("x");
  lead.flight->End(CapturedAnswer{.text = "x"});
  EXPECT_EQ(f->log, "");
}

TEST(SingleFlightTest, ALandingOfAReplacedFlightLeavesTheNewOne) {
  SingleFlight flights;
  SingleFlight::Joined old = flights.Join("k", nullptr);
  old.flight->Fail(Flight::FailKind::kRetry);
  flights.Land("k", old.flight);
  SingleFlight::Joined fresh = flights.Join("k", nullptr);
  ASSERT_TRUE(fresh.leader);
  flights.Land("k", old.flight);  // late, twice
  EXPECT_EQ(flights.size(), 1u);
  auto f = std::make_shared<Recorder>();
  EXPECT_FALSE(flights.Join("k", f).leader);
}

}  // namespace
}  // namespace tachyon
