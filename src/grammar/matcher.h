// GrammarMatcher: where a response stands in a JsonGrammar, fed byte by byte.
//
// The state is a set of stacks of frames (a pushdown automaton per stack):
// each frame is one JSON value being written (an object, a string, ...) and
// knows what may come next inside it; the frame below it is its container,
// already moved past the value. A value of an anyOf node starts one stack per
// alternative; stacks that cannot take a byte are dropped. A frame that may
// end or go on (a number, an enum value that is a prefix of another) ends
// only when the next byte does not continue it, and that byte goes to its
// container (JSON never needs both). A frame that cannot take another byte
// (a closed string, object or array) is popped at once.
//
// The state is plain data: copied to try a proposal, compared and hashed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_grammar.h"

namespace tachyon {

// One value being written. Every field takes part in equality (no padding), so
// two frames that behave the same compare equal: counters that no longer
// matter are capped.
struct Frame {
  int32_t node = -1;
  uint8_t phase = 0;
  uint8_t ws = 0;     // whitespace bytes since the last other byte
  uint8_t aux = 0;    // strings: escape, \u digit or UTF-8 continuation due
  uint8_t flags = 0;  // root / sentinel marks; strings: UTF-8 range; integers: sign
  int32_t count = 0;  // items, characters, digits, property index, format position
  int32_t offset = 0; // bytes into a key or a literal
  int64_t value = 0;  // an integer's magnitude, live keys, a literal range, a format's last byte

  bool operator==(const Frame& o) const {
    return node == o.node && phase == o.phase && ws == o.ws && aux == o.aux && flags == o.flags &&
           count == o.count && offset == o.offset && value == o.value;
  }
};

struct FrameHash {
  size_t operator()(const Frame& f) const;
};

// Stacks of frames, bottom first: stack i is frames[ends[i-1], ends[i]).
struct MatchState {
  std::vector<Frame> frames;
  std::vector<uint32_t> ends;

  size_t num_stacks() const { return ends.size(); }
  bool empty() const { return ends.empty(); }
  size_t begin_of(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
  void clear() {
    frames.clear();
    ends.clear();
  }
  bool operator==(const MatchState& o) const { return frames == o.frames && ends == o.ends; }
};

// How a stack in MatchStep left its bottom frame, when that frame is a
// sentinel (the mask cache computes what a frame accepts without its container).
struct MatchExits {
  bool ended_before = false;  // the frame above the sentinel ended before this byte (the container takes it)
  bool ended_after = false;   // the frame above the sentinel took this byte and closed
};

// Feeds `byte` to every stack of `in`, appending the stacks that take it to
// `out` (cleared first; duplicates dropped). A stack that would pop down to a
// sentinel frame is reported in `exits` and not kept.
void MatchStep(const JsonGrammar& grammar, const MatchState& in, uint8_t byte, MatchState* out, MatchExits* exits);

// Whether `state` may end here: some stack is a finished root, or becomes one
// when its top frames end.
bool MatchComplete(const JsonGrammar& grammar, const MatchState& state);

// The shortest bytes that make `state` a whole value ("" when it is one
// already); false when no stack can be completed.
bool ShortestCompletion(const JsonGrammar& grammar, const MatchState& state, std::string* out);

// A frame that stands for a container in the mask cache's computations: what
// a frame above it accepts, without its container.
Frame SentinelFrame();

// The most values open in one stack (containers and the value under way).
int32_t MaxNesting(const MatchState& state);

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Takes `bytes` whole, or not at all (false: the state is unchanged).
  bool Feed(std::string_view bytes);
  // Whether the text so far is a whole value.
  bool IsComplete() const { return MatchComplete(*grammar_, state_); }
  // Complete, and no byte may follow.
  bool IsFinished() const;
  // See ShortestCompletion.
  bool Shortest(std::string* out) const { return ShortestCompletion(*grammar_, state_, out); }

  const MatchState& state() const { return state_; }
  const JsonGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  MatchState state_, scratch_;
};

}  // namespace tachyon
