#include "grammar/matcher.h"

#include <algorithm>

namespace tachyon {
namespace {

constexpr uint8_t kRoot = 1;
constexpr uint8_t kSentinel = 2;
constexpr uint8_t kNegative = 0x08;    // integers
constexpr uint8_t kSurrogate = 0x80;   // strings: \uD seen, the next digit must be 0-7
constexpr uint8_t kRangeMask = 0x70;   // strings: the range of the next UTF-8 continuation byte
constexpr int kMaxIntDigits = 15, kMaxFracDigits = 15, kMaxExpDigits = 2;  // 1e99 at most: a double
constexpr int kMaxIntegerDigits = 18;  // kInteger: magnitudes fit an int64
constexpr int kMaxAnyOfNesting = 16;

enum class Fed {
  kReject,
  kTake,       // taken; the frame goes on
  kClose,      // taken; the frame is finished (popped)
  kEndBefore,  // the frame ended before this byte: popped, and the byte goes to its container
  kPush,       // the frame moved past a value that starts with this byte: a child is pushed
};

bool IsWs(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }
bool IsHex(uint8_t b) { return IsDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }
bool In(uint8_t b, char lo, char hi) { return b >= static_cast<uint8_t>(lo) && b <= static_cast<uint8_t>(hi); }

// Whitespace between tokens, bounded.
Fed Whitespace(Frame& f) {
  if (f.ws >= kMaxWhitespace) return Fed::kReject;
  ++f.ws;
  return Fed::kTake;
}

Fed Take(Frame& f) {
  f.ws = 0;
  return Fed::kTake;
}

Fed Push(Frame& f, uint8_t next_phase, int32_t node, int32_t* child) {
  f.phase = next_phase;
  f.ws = 0;
  *child = node;
  return Fed::kPush;
}

// Counts one character toward a string's length; counts past what the
// constraints can tell apart are capped.
bool CountChar(Frame& f, int64_t min_length, int64_t max_length) {
  if (max_length >= 0) {
    if (f.count >= max_length) return false;
    ++f.count;
  } else if (f.count < min_length) {
    ++f.count;
  }
  return true;
}

// One byte of a string's content after its opening quote. Returns kTake, kClose
// (the closing quote) or kReject. UTF-8 must be well-formed (no overlong forms,
// no surrogates), as JSON parsers demand; \u escapes of surrogates are refused.
Fed StringByte(Frame& f, uint8_t b, int64_t min_length, int64_t max_length) {
  switch (f.aux) {
    case 0:
      if (b == '"') return f.count >= min_length ? Fed::kClose : Fed::kReject;
      if (b == '\\') {
        if (!CountChar(f, min_length, max_length)) return Fed::kReject;
        f.aux = 1;
        return Fed::kTake;
      }
      if (b < 0x20) return Fed::kReject;
      if (b < 0x80) return CountChar(f, min_length, max_length) ? Fed::kTake : Fed::kReject;
      {
        // Lead byte: continuation bytes due, and the range of the first one.
        int due = 0, range = 0;
        if (b >= 0xC2 && b <= 0xDF) {
          due = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
          due = 2;
          range = b == 0xE0 ? 1 : b == 0xED ? 2 : 0;
        } else if (b >= 0xF0 && b <= 0xF4) {
          due = 3;
          range = b == 0xF0 ? 3 : b == 0xF4 ? 4 : 0;
        } else {
          return Fed::kReject;
        }
        if (!CountChar(f, min_length, max_length)) return Fed::kReject;
        f.aux = static_cast<uint8_t>(5 + due);
        f.flags = static_cast<uint8_t>((f.flags & ~kRangeMask) | (range << 4));
        return Fed::kTake;
      }
    case 1:  // after a backslash
      if (b == 'u') {
        f.aux = 2;
        return Fed::kTake;
      }
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') {
        f.aux = 0;
        return Fed::kTake;
      }
      return Fed::kReject;
    case 2:
    case 3:
    case 4:
    case 5:  // the (aux - 1)th hex digit of \uXXXX
      if (!IsHex(b)) return Fed::kReject;
      if (f.aux == 2 && (b == 'd' || b == 'D')) f.flags |= kSurrogate;
      if (f.aux == 3 && (f.flags & kSurrogate) && !In(b, '0', '7')) return Fed::kReject;
      if (f.aux == 5) {
        f.aux = 0;
        f.flags &= static_cast<uint8_t>(~kSurrogate);
      } else {
        ++f.aux;
      }
      return Fed::kTake;
    default: {  // 6..8: UTF-8 continuation bytes due (aux - 5)
      const int range = (f.flags & kRangeMask) >> 4;
      static constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
      static constexpr uint8_t kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
      if (b < kLo[range] || b > kHi[range]) return Fed::kReject;
      f.flags &= static_cast<uint8_t>(~kRangeMask);
      f.aux = f.aux == 6 ? 0 : static_cast<uint8_t>(f.aux - 1);
      return Fed::kTake;
    }
  }
}

// Formats: count is the position in the pattern, value the previous byte.
// date YYYY-MM-DD; date-time adds THH:MM:SS, optional .fraction (1-9 digits),
// then Z or +HH:MM / -HH:MM (positions 19.., 30.. fraction, 40.. offset, 50 done);
// uuid 8-4-4-4-12 hex digits.
int FormatEnd(StringFormat format) {
  return format == StringFormat::kDate ? 10 : format == StringFormat::kDateTime ? 50 : 36;
}

bool DateByte(int p, uint8_t b, uint8_t prev) {
  switch (p) {
    case 4:
    case 7: return b == '-';
    case 5: return In(b, '0', '1');
    case 6: return prev == '0' ? In(b, '1', '9') : In(b, '0', '2');
    case 8: return In(b, '0', '3');
    case 9: return prev == '0' ? In(b, '1', '9') : prev == '3' ? In(b, '0', '1') : IsDigit(b);
    default: return IsDigit(b);
  }
}

Fed FormatByte(Frame& f, StringFormat format, uint8_t b) {
  const int p = f.count;
  const uint8_t prev = static_cast<uint8_t>(f.value);
  if (b == '"') return p == FormatEnd(format) ? Fed::kClose : Fed::kReject;
  int next = -1;
  if (format == StringFormat::kUuid) {
    if (p < 36) next = (p == 8 || p == 13 || p == 18 || p == 23) ? (b == '-' ? p + 1 : -1) : (IsHex(b) ? p + 1 : -1);
  } else if (p < 10) {
    next = DateByte(p, b, prev) ? p + 1 : -1;
  } else if (format == StringFormat::kDateTime) {
    auto zone = [&]() { return b == 'Z' ? 50 : (b == '+' || b == '-') ? 40 : -1; };
    switch (p) {
      case 10: next = b == 'T' ? 11 : -1; break;
      case 11: next = In(b, '0', '2') ? 12 : -1; break;
      case 12: next = (prev == '2' ? In(b, '0', '3') : IsDigit(b)) ? 13 : -1; break;
      case 13:
      case 16: next = b == ':' ? p + 1 : -1; break;
      case 14:
      case 17: next = In(b, '0', '5') ? p + 1 : -1; break;
      case 15: next = IsDigit(b) ? 16 : -1; break;
      case 18: next = IsDigit(b) ? 19 : -1; break;
      case 19: next = b == '.' ? 30 : zone(); break;
      case 30: next = IsDigit(b) ? 31 : -1; break;
      case 40: next = In(b, '0', '2') ? 41 : -1; break;
      case 41: next = (prev == '2' ? In(b, '0', '3') : IsDigit(b)) ? 42 : -1; break;
      case 42: next = b == ':' ? 43 : -1; break;
      case 43: next = In(b, '0', '5') ? 44 : -1; break;
      case 44: next = IsDigit(b) ? 50 : -1; break;
      default:
        if (p >= 31 && p <= 39) next = (IsDigit(b) && p < 39) ? p + 1 : zone();
        break;
    }
  }
  if (next < 0) return Fed::kReject;
  f.count = next;
  f.value = b;
  return Fed::kTake;
}

bool IntegerInRange(const JsonNode& n, bool negative, int64_t magnitude) {
  const int64_t v = negative ? -magnitude : magnitude;
  return v >= n.minimum && v <= n.maximum;
}

// Whether digits may follow `magnitude` (written with `digits` digits) to give
// an integer in range: m, then m*10^k + [0, 10^k) for each k that fits.
bool IntegerFeasible(const JsonNode& n, bool negative, int64_t magnitude, int digits) {
  __int128 lo = magnitude, hi = magnitude;
  for (int k = 0; digits + k <= kMaxIntegerDigits; ++k) {
    const __int128 a = negative ? -hi : lo, b = negative ? -lo : hi;
    if (b >= n.minimum && a <= n.maximum) return true;
    if (magnitude == 0) break;  // no digits after a leading zero
    lo *= 10;
    hi = hi * 10 + 9;
  }
  return false;
}

bool CanEnd(const JsonGrammar& g, const Frame& f) {
  if (f.flags & kSentinel) return false;
  if (f.flags & kRoot) return f.phase == 1;
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case NodeKind::kNumber: return f.phase == 2 || f.phase == 3 || f.phase == 5 || f.phase == 8;
    case NodeKind::kInteger:
      return (f.phase == 2 || f.phase == 3) && IntegerInRange(n, f.flags & kNegative, f.value);
    case NodeKind::kLiterals:
      return f.offset > 0 && static_cast<int64_t>(n.literals[f.value & 0xffffffff].size()) == f.offset;
    default: return false;
  }
}

Frame NewFrame(const JsonGrammar& g, int32_t node) {
  Frame f;
  f.node = node;
  const JsonNode& n = g.nodes[node];
  if (n.kind == NodeKind::kLiterals) f.value = static_cast<int64_t>(n.literals.size()) << 32;
  return f;
}

// The first required property at or after `from` (properties.size() when none).
size_t FirstRequired(const JsonNode& n, int32_t from) {
  size_t j = from;
  while (j < n.properties.size() && !n.properties[j].required) ++j;
  return j;
}

Fed ObjectByte(const JsonNode& n, Frame& f, uint8_t b, int32_t* child) {
  const int32_t np = static_cast<int32_t>(n.properties.size());
  switch (f.phase) {
    case 0: return b == '{' ? (f.phase = 1, Take(f)) : Fed::kReject;
    case 1:  // after '{'
    case 6:  // after ','
      if (IsWs(b)) return Whitespace(f);
      if (b == '}' && f.phase == 1 && FirstRequired(n, 0) == n.properties.size()) return Fed::kClose;
      if (b == '"' && f.count < np) {
        uint64_t live = 0;
        for (size_t j = f.count, last = std::min(FirstRequired(n, f.count), n.properties.size() - 1); j <= last; ++j) {
          live |= uint64_t{1} << j;
        }
        f.value = static_cast<int64_t>(live);
        f.offset = 1;
        f.phase = 2;
        return Take(f);
      }
      return Fed::kReject;
    case 2: {  // in a key: the live properties whose key goes on with b
      uint64_t live = static_cast<uint64_t>(f.value), kept = 0;
      int32_t done = -1;
      for (uint64_t m = live; m != 0; m &= m - 1) {
        const int j = __builtin_ctzll(m);
        const std::string& key = n.properties[j].key;
        if (static_cast<int32_t>(key.size()) > f.offset && static_cast<uint8_t>(key[f.offset]) == b) {
          kept |= uint64_t{1} << j;
          if (static_cast<int32_t>(key.size()) == f.offset + 1) done = j;
        }
      }
      if (kept == 0) return Fed::kReject;
      if (done >= 0) {  // a key is a JSON string: no other key goes on past its closing quote
        f.count = done;
        f.value = 0;
        f.offset = 0;
        f.phase = 3;
      } else {
        f.value = static_cast<int64_t>(kept);
        ++f.offset;
      }
      return Take(f);
    }
    case 3:
      if (IsWs(b)) return Whitespace(f);
      return b == ':' ? (f.phase = 4, Take(f)) : Fed::kReject;
    case 4:
      if (IsWs(b)) return Whitespace(f);
      ++f.count;
      return Push(f, 5, n.properties[f.count - 1].node, child);
    case 5:  // after a value
      if (IsWs(b)) return Whitespace(f);
      if (b == ',' && f.count < np) return f.phase = 6, Take(f);
      if (b == '}' && FirstRequired(n, f.count) == n.properties.size()) return Fed::kClose;
      return Fed::kReject;
  }
  return Fed::kReject;
}

Fed MapByte(const JsonNode& n, Frame& f, uint8_t b, int32_t* child) {
  switch (f.phase) {
    case 0: return b == '{' ? (f.phase = 1, Take(f)) : Fed::kReject;
    case 1:  // after '{'
    case 6:  // after ','
      if (IsWs(b)) return Whitespace(f);
      if (b == '}' && f.phase == 1) return Fed::kClose;
      return b == '"' ? (f.phase = 2, Take(f)) : Fed::kReject;
    case 2: {  // in a key
      Fed r = StringByte(f, b, 0, -1);
      if (r == Fed::kClose) {
        f.phase = 3;
        return Take(f);
      }
      return r;
    }
    case 3:
      if (IsWs(b)) return Whitespace(f);
      return b == ':' ? (f.phase = 4, Take(f)) : Fed::kReject;
    case 4:
      if (IsWs(b)) return Whitespace(f);
      return Push(f, 5, n.value, child);
    case 5:
      if (IsWs(b)) return Whitespace(f);
      if (b == ',') return f.phase = 6, Take(f);
      return b == '}' ? Fed::kClose : Fed::kReject;
  }
  return Fed::kReject;
}

Fed ArrayByte(const JsonNode& n, Frame& f, uint8_t b, int32_t* child) {
  // count: items so far, capped at what min_items / max_items can tell apart.
  auto push_item = [&]() {
    if (n.max_items >= 0 || f.count < n.min_items) ++f.count;
    return Push(f, 2, n.value, child);
  };
  switch (f.phase) {
    case 0: return b == '[' ? (f.phase = 1, Take(f)) : Fed::kReject;
    case 1:  // after '['
      if (IsWs(b)) return Whitespace(f);
      if (b == ']') return n.min_items == 0 ? Fed::kClose : Fed::kReject;
      return n.max_items == 0 ? Fed::kReject : push_item();
    case 2:  // after an item
      if (IsWs(b)) return Whitespace(f);
      if (b == ',' && (n.max_items < 0 || f.count < n.max_items)) return f.phase = 3, Take(f);
      if (b == ']' && f.count >= n.min_items) return Fed::kClose;
      return Fed::kReject;
    case 3:  // after ','
      if (IsWs(b)) return Whitespace(f);
      return push_item();
  }
  return Fed::kReject;
}

Fed NumberByte(Frame& f, uint8_t b) {
  auto to = [&](uint8_t phase, int32_t count) {
    f.phase = phase;
    f.count = count;
    return Fed::kTake;
  };
  const bool digit = IsDigit(b);
  switch (f.phase) {
    case 0:
      if (b == '-') return to(1, 0);
      [[fallthrough]];
    case 1:
      if (b == '0') return to(3, 1);
      return digit ? to(2, 1) : Fed::kReject;
    case 2:  // integer digits
      if (digit) return f.count < kMaxIntDigits ? to(2, f.count + 1) : Fed::kEndBefore;
      [[fallthrough]];
    case 3:  // after the integer part
      if (b == '.') return to(4, 0);
      if (b == 'e' || b == 'E') return to(6, 0);
      return Fed::kEndBefore;
    case 4: return digit ? to(5, 1) : Fed::kReject;
    case 5:  // fraction digits
      if (digit) return f.count < kMaxFracDigits ? to(5, f.count + 1) : Fed::kEndBefore;
      if (b == 'e' || b == 'E') return to(6, 0);
      return Fed::kEndBefore;
    case 6:
      if (b == '+' || b == '-') return to(7, 0);
      [[fallthrough]];
    case 7: return digit ? to(8, 1) : Fed::kReject;
    case 8: return digit && f.count < kMaxExpDigits ? to(8, f.count + 1) : Fed::kEndBefore;
  }
  return Fed::kReject;
}

Fed IntegerByte(const JsonNode& n, Frame& f, uint8_t b) {
  const bool negative = f.flags & kNegative;
  const bool in_range = (f.phase == 2 || f.phase == 3) && IntegerInRange(n, negative, f.value);
  const Fed end = in_range ? Fed::kEndBefore : Fed::kReject;
  if (f.phase == 0 && b == '-') {
    if (n.minimum >= 0) return Fed::kReject;
    f.flags |= kNegative;
    f.phase = 1;
    return Fed::kTake;
  }
  if (!IsDigit(b)) return f.phase <= 1 ? Fed::kReject : end;
  const int64_t d = b - '0';
  if (f.phase <= 1) {
    if (!IntegerFeasible(n, negative, d, 1)) return Fed::kReject;
    f.phase = d == 0 ? 3 : 2;
    f.count = 1;
    f.value = d;
    return Fed::kTake;
  }
  if (f.phase == 3 || f.count >= kMaxIntegerDigits || !IntegerFeasible(n, negative, f.value * 10 + d, f.count + 1)) {
    return end;
  }
  f.value = f.value * 10 + d;
  ++f.count;
  return Fed::kTake;
}

// value: the live range [lo, hi) of the sorted literals, as lo | hi << 32; all
// share the `offset` bytes taken so far, and one that ends there comes first.
Fed LiteralByte(const JsonNode& n, Frame& f, uint8_t b) {
  const int64_t lo = f.value & 0xffffffff, hi = f.value >> 32;
  const bool complete = f.offset > 0 && static_cast<int64_t>(n.literals[lo].size()) == f.offset;
  const auto first = n.literals.begin() + lo + (complete ? 1 : 0), last = n.literals.begin() + hi;
  const size_t at = f.offset;
  auto from = std::lower_bound(first, last, b, [at](const std::string& s, uint8_t c) {
    return static_cast<uint8_t>(s[at]) < c;
  });
  auto to = std::upper_bound(from, last, b, [at](uint8_t c, const std::string& s) {
    return c < static_cast<uint8_t>(s[at]);
  });
  if (from == to) return complete ? Fed::kEndBefore : Fed::kReject;
  const int64_t nlo = from - n.literals.begin(), nhi = to - n.literals.begin();
  ++f.offset;
  f.value = nlo | (nhi << 32);
  if (nhi - nlo == 1 && static_cast<int64_t>(n.literals[nlo].size()) == f.offset) return Fed::kClose;
  return Fed::kTake;
}

Fed FeedFrame(const JsonGrammar& g, Frame& f, uint8_t b, int32_t* child) {
  if (f.flags & kSentinel) return Fed::kReject;
  if (f.flags & kRoot) {
    if (f.phase != 0) return Fed::kReject;  // nothing after the value
    if (IsWs(b)) return Whitespace(f);
    return Push(f, 1, g.root, child);
  }
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case NodeKind::kObject: return ObjectByte(n, f, b, child);
    case NodeKind::kMap: return MapByte(n, f, b, child);
    case NodeKind::kArray: return ArrayByte(n, f, b, child);
    case NodeKind::kString:
      if (f.phase == 0) return b == '"' ? (f.phase = 1, Fed::kTake) : Fed::kReject;
      return n.format == StringFormat::kNone ? StringByte(f, b, n.min_length, n.max_length)
                                             : FormatByte(f, n.format, b);
    case NodeKind::kNumber: return NumberByte(f, b);
    case NodeKind::kInteger: return IntegerByte(n, f, b);
    case NodeKind::kLiterals: return LiteralByte(n, f, b);
    case NodeKind::kAnyOf: return Fed::kReject;  // never a frame: its alternatives are
  }
  return Fed::kReject;
}

// A crafted schema (anyOf in anyOf, alternatives alike for a while) could
// multiply the stacks without bound; past this many the rest are dropped (what
// remains is still valid, just fewer ways to go on).
constexpr size_t kMaxStacks = 256;

void AddStack(const std::vector<Frame>& st, MatchState* out) {
  if (out->num_stacks() >= kMaxStacks) return;
  for (size_t i = 0; i < out->num_stacks(); ++i) {
    const size_t b = out->begin_of(i), e = out->ends[i];
    if (e - b == st.size() && std::equal(st.begin(), st.end(), out->frames.begin() + b)) return;
  }
  out->frames.insert(out->frames.end(), st.begin(), st.end());
  out->ends.push_back(static_cast<uint32_t>(out->frames.size()));
}

void Run(const JsonGrammar& g, std::vector<Frame>& st, uint8_t b, MatchState* out, MatchExits* exits, int nesting);

// Starts a value of `node` with byte b on top of `st`: one stack per alternative of an anyOf.
void Start(const JsonGrammar& g, std::vector<Frame>& st, int32_t node, uint8_t b, MatchState* out,
           MatchExits* exits, int nesting) {
  if (!g.has_shortest[node]) return;  // no finite value: a start there could never end
  const JsonNode& n = g.nodes[node];
  if (n.kind == NodeKind::kAnyOf) {
    if (nesting >= kMaxAnyOfNesting) return;  // a $ref cycle through anyOf only
    const size_t size = st.size();
    for (int32_t alt : n.alternatives) {
      Start(g, st, alt, b, out, exits, nesting + 1);
      st.resize(size);
    }
    return;
  }
  st.push_back(NewFrame(g, node));
  Run(g, st, b, out, exits, nesting);
}

void Run(const JsonGrammar& g, std::vector<Frame>& st, uint8_t b, MatchState* out, MatchExits* exits, int nesting) {
  while (true) {
    int32_t child = -1;
    switch (FeedFrame(g, st.back(), b, &child)) {
      case Fed::kReject: return;
      case Fed::kTake: AddStack(st, out); return;
      case Fed::kClose:
        st.pop_back();
        if (st.back().flags & kSentinel) {
          exits->ended_after = true;
        } else {
          AddStack(st, out);
        }
        return;
      case Fed::kEndBefore:
        st.pop_back();
        if (st.back().flags & kSentinel) {
          exits->ended_before = true;
          return;
        }
        continue;  // the container takes the byte
      case Fed::kPush: Start(g, st, child, b, out, exits, nesting); return;
    }
  }
}

// Completion helpers: each appends the shortest bytes that finish a frame.
// The rest of an object from property `from` on: its required properties, then '}'.
bool RestOfObject(const JsonGrammar& g, const JsonNode& n, size_t from, bool first, std::string* out) {
  for (size_t j = from; j < n.properties.size(); ++j) {
    if (!n.properties[j].required) continue;
    if (!g.has_shortest[n.properties[j].node]) return false;
    *out += (first ? "" : ",") + n.properties[j].key + ":" + g.shortest[n.properties[j].node];
    first = false;
  }
  *out += "}";
  return true;
}

// The end of a string whose content is open: the escape or UTF-8 character
// under way, characters up to min_length, the closing quote.
void CloseString(const Frame& f, int64_t min_length, std::string* out) {
  if (f.aux == 1) {
    *out += 'n';
  } else if (f.aux >= 2 && f.aux <= 5) {
    out->append(6 - f.aux, '0');
  } else if (f.aux >= 6) {
    static constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
    *out += static_cast<char>(kLo[(f.flags & kRangeMask) >> 4]);
    out->append(f.aux - 6, static_cast<char>(0x80));
  }
  if (f.count < min_length) out->append(min_length - f.count, 'a');
  *out += '"';
}

void CloseFormat(const Frame& f, StringFormat format, std::string* out) {
  static const std::string kDateTime = "2000-01-01T00:00:00Z", kUuid = "00000000-0000-0000-0000-000000000000";
  const int p = f.count;
  if (format == StringFormat::kUuid) {
    *out += kUuid.substr(p);
  } else if (format == StringFormat::kDate) {
    *out += kDateTime.substr(p, 10 - p);
  } else if (p < 19) {
    *out += kDateTime.substr(p);
  } else {
    *out += p == 19 ? "Z" : p == 30 ? "0Z" : p < 40 ? "Z" : p < 50 ? std::string("00:00").substr(p - 40) : "";
  }
  *out += '"';
}

// Digits that take an integer's magnitude so far into range (none when it is).
bool CloseInteger(const JsonNode& n, const Frame& f, std::string* out) {
  const bool negative = f.flags & kNegative;
  // The magnitudes allowed with this sign.
  const __int128 lo = negative ? std::max<__int128>(0, -static_cast<__int128>(n.maximum)) : std::max<int64_t>(0, n.minimum);
  const __int128 hi = negative ? -static_cast<__int128>(n.minimum) : n.maximum;
  if (f.phase == 1) {  // after '-'
    if (lo > hi) return false;
    *out += std::to_string(static_cast<int64_t>(lo));
    return true;
  }
  if (IntegerInRange(n, negative, f.value)) return true;
  if (f.phase == 3) return false;
  __int128 base = f.value, width = 1;
  for (int k = 1; f.count + k <= kMaxIntegerDigits; ++k) {
    base *= 10;
    width *= 10;
    const __int128 t = std::max(base, lo);
    if (t <= std::min(base + width - 1, hi)) {
      std::string digits = std::to_string(static_cast<int64_t>(t - base));
      *out += std::string(k - digits.size(), '0') + digits;
      return true;
    }
  }
  return false;
}

// The shortest bytes that finish frame `f` (a container below the top is past its child).
bool CloseFrame(const JsonGrammar& g, const Frame& f, std::string* out) {
  if (f.flags & kRoot) {
    if (f.phase == 1) return true;
    if (!g.has_shortest[g.root]) return false;
    *out += g.shortest[g.root];
    return true;
  }
  const JsonNode& n = g.nodes[f.node];
  auto value = [&](int32_t node) {
    if (!g.has_shortest[node]) return false;
    *out += g.shortest[node];
    return true;
  };
  if (f.phase == 0 && n.kind != NodeKind::kLiterals) return value(f.node);
  switch (n.kind) {
    case NodeKind::kObject: {
      const size_t np = n.properties.size();
      switch (f.phase) {
        case 1: return RestOfObject(g, n, 0, true, out);
        case 2: {
          const int j = __builtin_ctzll(static_cast<uint64_t>(f.value));
          *out += n.properties[j].key.substr(f.offset) + ":";
          return value(n.properties[j].node) && RestOfObject(g, n, j + 1, false, out);
        }
        case 3: *out += ":"; [[fallthrough]];
        case 4: return value(n.properties[f.count].node) && RestOfObject(g, n, f.count + 1, false, out);
        case 5: return RestOfObject(g, n, f.count, false, out);
        case 6: {
          size_t j = FirstRequired(n, f.count);
          if (j == np) j = f.count;
          *out += n.properties[j].key + ":";
          return value(n.properties[j].node) && RestOfObject(g, n, j + 1, false, out);
        }
      }
      return false;
    }
    case NodeKind::kMap:
      switch (f.phase) {
        case 1:
        case 5: *out += "}"; return true;
        case 2: CloseString(f, 0, out); [[fallthrough]];
        case 3: *out += ":"; [[fallthrough]];
        case 4: return value(n.value) && (*out += "}", true);
        case 6: *out += "\"\":"; return value(n.value) && (*out += "}", true);
      }
      return false;
    case NodeKind::kArray: {
      int64_t due = std::max<int64_t>(0, n.min_items - f.count);
      bool first = f.phase == 1;
      if (f.phase == 3) {  // an item is due after ','
        if (!value(n.value)) return false;
        due = std::max<int64_t>(0, due - 1);
      }
      for (int64_t i = 0; i < due; ++i) {
        if (!first) *out += ",";
        first = false;
        if (!value(n.value)) return false;
      }
      *out += "]";
      return true;
    }
    case NodeKind::kString:
      if (n.format != StringFormat::kNone) {
        CloseFormat(f, n.format, out);
      } else {
        CloseString(f, n.min_length, out);
      }
      return true;
    case NodeKind::kNumber:
      if (f.phase == 1 || f.phase == 4 || f.phase == 6 || f.phase == 7) *out += "0";
      return true;
    case NodeKind::kInteger: return CloseInteger(n, f, out);
    case NodeKind::kLiterals: {
      const int64_t lo = f.value & 0xffffffff, hi = f.value >> 32;
      const std::string* best = nullptr;
      for (int64_t i = lo; i < hi; ++i) {
        if (best == nullptr || n.literals[i].size() < best->size()) best = &n.literals[i];
      }
      *out += best->substr(f.offset);
      return true;
    }
    case NodeKind::kAnyOf: return false;
  }
  return false;
}

}  // namespace

bool ShortestCompletion(const JsonGrammar& grammar, const MatchState& state, std::string* out) {
  bool found = false;
  for (size_t i = 0; i < state.num_stacks(); ++i) {
    std::string s;
    bool ok = true;
    for (size_t k = state.ends[i]; k > state.begin_of(i) && ok; --k) ok = CloseFrame(grammar, state.frames[k - 1], &s);
    if (ok && (!found || s.size() < out->size())) {
      *out = std::move(s);
      found = true;
    }
  }
  return found;
}

size_t FrameHash::operator()(const Frame& f) const {
  uint64_t h = static_cast<uint32_t>(f.node);
  h = h * 0x9E3779B97F4A7C15ull ^ (uint64_t{f.phase} | uint64_t{f.ws} << 8 | uint64_t{f.aux} << 16 |
                                   uint64_t{f.flags} << 24 | uint64_t{static_cast<uint32_t>(f.count)} << 32);
  h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint32_t>(f.offset);
  h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(f.value);
  return static_cast<size_t>(h ^ (h >> 29));
}

Frame SentinelFrame() {
  Frame f;
  f.flags = kSentinel;
  return f;
}

int32_t MaxNesting(const MatchState& state) {
  int32_t most = 0;
  for (size_t i = 0; i < state.num_stacks(); ++i) {
    most = std::max<int32_t>(most, static_cast<int32_t>(state.ends[i] - state.begin_of(i)) - 1);
  }
  return most;
}

void MatchStep(const JsonGrammar& grammar, const MatchState& in, uint8_t byte, MatchState* out, MatchExits* exits) {
  out->clear();
  MatchExits ignored;
  static thread_local std::vector<Frame> st;
  for (size_t i = 0; i < in.num_stacks(); ++i) {
    st.assign(in.frames.begin() + in.begin_of(i), in.frames.begin() + in.ends[i]);
    Run(grammar, st, byte, out, exits != nullptr ? exits : &ignored, 0);
  }
}

bool MatchComplete(const JsonGrammar& grammar, const MatchState& state) {
  for (size_t i = 0; i < state.num_stacks(); ++i) {
    for (size_t k = state.ends[i]; k > state.begin_of(i); --k) {
      const Frame& f = state.frames[k - 1];
      if (f.flags & kRoot) {
        if (f.phase == 1) return true;
        break;
      }
      if (!CanEnd(grammar, f)) break;
    }
  }
  return false;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const JsonGrammar> grammar) : grammar_(std::move(grammar)) {
  Frame root;
  root.node = grammar_->root;
  root.flags = kRoot;
  state_.frames.push_back(root);
  state_.ends.push_back(1);
}

bool GrammarMatcher::Feed(std::string_view bytes) {
  MatchState cur = state_;
  for (char c : bytes) {
    MatchStep(*grammar_, cur, static_cast<uint8_t>(c), &scratch_, nullptr);
    if (scratch_.empty()) return false;
    std::swap(cur, scratch_);
  }
  state_ = std::move(cur);
  return true;
}

bool GrammarMatcher::IsFinished() const {
  if (!IsComplete()) return false;
  MatchState next;
  for (int b = 0; b < 256; ++b) {
    MatchStep(*grammar_, state_, static_cast<uint8_t>(b), &next, nullptr);
    if (!next.empty()) return false;
  }
  return true;
}

}  // namespace tachyon
