// JsonNestsDeeperThan: how deep a JSON text nests, read before anything parses it.
//
// nlohmann's parser is iterative, but dump(), copies, CanonicalJson, the schema
// compiler and the template engine's values recurse once per level: a request of
// 100,000 nested brackets (200 KB) overflowed a worker's stack. Every JSON text from
// outside (request bodies, upstream answers, a model's tool-call arguments, a
// client's arguments strings) is checked against kMaxJsonDepth before it becomes a
// value, so every recursive walk over a value is bounded by it.
#pragma once

#include <string_view>

namespace tachyon {

// The deepest nesting of arrays and objects a JSON text from outside may have
// (OpenAI-compatible servers refuse deep bodies too; real schemas nest a few levels).
inline constexpr int kMaxJsonDepth = 128;

// True when `text` nests arrays and objects more than `max_depth` deep (brackets
// inside strings do not count). One pass, no allocation; stops at the first level
// past the bound, so a hostile text costs no more than its bytes up to there.
bool JsonNestsDeeperThan(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace tachyon
