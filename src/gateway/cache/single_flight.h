// Single flight: identical cache misses in flight at once share one upstream
// call. The first request to miss a key (the leader) goes upstream; a request
// with the same exact-cache key that misses while the leader's answer is still
// coming (a follower) joins its Flight instead: it is given every piece of the
// answer's text from the start (replayed), then each piece as the leader gets
// it, then the end. A flight leaves the table when its leader's answer ends,
// after the answer was stored (the exact cache's OnAnswer runs first), so a
// request that misses from then on finds the answer in the cache. (One whose
// lookup ran just before the store and whose join just after starts a flight
// of its own: a window of the few microseconds between a lookup and a join.
// An ended flight is not kept to close it: it would answer after a purge, and
// go on answering where the store failed.)
//
// When the leader fails before any text reached its followers, each follower
// is told kRetry: they join again, and the first of them leads (one goes
// upstream, the others follow it). An answer a flight cannot carry (tool calls)
// is kAlone: each follower goes upstream on its own. A failure after text went
// out is kBroken: the followers' answers end with the leader's error, as its own.
//
//   SingleFlight flights;
//   SingleFlight::Joined j = flights.Join(key, follower);   // follower: told everything from now on
//   if (j.leader) { ...; j.flight->Text(piece); ...; j.flight->End(answer); }
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gateway/pipeline.h"

namespace tachyon {

class Flight {
 public:
  enum class FailKind {
    kRetry,   // no text was given: join again (one of the followers leads)
    kAlone,   // the answer cannot be shared (tool calls): go upstream alone
    kBroken,  // text was given, then the leader's answer broke
  };
  // A request waiting on the flight. Called under the flight's lock, in order:
  // OnText for each piece, then OnEnd or OnFail once; a callback must not call
  // the flight back (post anything that would).
  class Follower {
   public:
    virtual ~Follower() = default;
    virtual void OnText(const std::string& text) = 0;
    virtual void OnEnd(const CapturedAnswer& answer) = 0;
    virtual void OnFail(FailKind kind) = 0;
  };

  // The leader's side.
  void Text(const std::string& piece);
  void End(const CapturedAnswer& answer);
  void Fail(FailKind kind);
  // Whether text was given (a failure now is kBroken).
  bool texted() const;

  // A follower whose client went away hears no more.
  void Leave(const Follower* follower);
  size_t num_followers() const;

 private:
  friend class SingleFlight;
  // Replays what came so far to f and adds it; false when the flight is over
  // (f is not added).
  bool Follow(const std::shared_ptr<Follower>& f);

  mutable std::mutex mutex_;
  std::string text_;  // every piece so far
  std::vector<std::shared_ptr<Follower>> followers_;
  bool ended_ = false, failed_ = false;
  CapturedAnswer answer_;  // once ended_
};

class SingleFlight {
 public:
  struct Joined {
    std::shared_ptr<Flight> flight;
    bool leader = false;  // false: `follower` follows it
  };
  // The flight of `key`: a new one this caller leads, or the one in flight,
  // which `follower` now follows.
  Joined Join(const std::string& key, const std::shared_ptr<Flight::Follower>& follower);
  // The leader's answer ended (End) or failed (Fail): the flight leaves the
  // table. Call after End or Fail.
  void Land(const std::string& key, const std::shared_ptr<Flight>& flight);
  // Flights in progress.
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;
};

}  // namespace tachyon
