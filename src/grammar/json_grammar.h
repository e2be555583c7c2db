// JsonGrammar: the JSON texts a response may be, compiled from a JSON Schema
// (response_format json_schema, a forced tool call's arguments) or "any JSON
// object" (json_object). GrammarMatcher (matcher.h) walks it byte by byte.
//
// A grammar is a graph of nodes, one per distinct sub-schema (identical
// sub-schemas share a node, so the mask cache sees them as one); $ref may make
// it cyclic. What it accepts is always valid under the schema, and kept finite
// where the schema leaves room (bounded whitespace, number lengths, nesting),
// so a sampled answer ends:
//   - object properties come in the schema's order; a property not in
//     `required` may be left out; properties the schema does not declare are
//     never produced (an object without `properties` takes any keys, with
//     values under `additionalProperties` or any JSON);
//   - at most kMaxWhitespace whitespace bytes between tokens, none after the
//     root value;
//   - numbers: at most 15 integer and 15 fraction digits, 2 exponent digits
//     (every such number is a finite double);
//     integers with minimum / maximum: exactly the integers in range;
//   - an answer about to run out of tokens (max_tokens) is closed along its
//     shortest completion, so it stays valid (the engine reports "length");
//     so is one nested kMaxDepth values deep, until it is shallower again
//     (the grammar itself never refuses depth: a schema may need it).
// A keyword that would constrain the value and is not implemented is refused
// with its name; annotations (title, description, default, ...) are ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tachyon {

inline constexpr int kMaxWhitespace = 12;
inline constexpr int kMaxDepth = 24;
inline constexpr int kMaxProperties = 64;

enum class NodeKind : uint8_t {
  kObject,    // declared properties, in order
  kMap,       // any string keys; values of `value`
  kArray,     // items of `value`, min_items..max_items
  kString,    // min_length..max_length characters, optional format
  kNumber,    // any JSON number (bounded digits)
  kInteger,   // an integer in [minimum, maximum]
  kLiterals,  // one of `literals` (serialized JSON: enum, const, true/false/null)
  kAnyOf,     // one of `alternatives`
};

enum class StringFormat : uint8_t { kNone, kDate, kDateTime, kUuid };

struct JsonProperty {
  std::string key;  // the key as it is written, quotes included ("\"name\"")
  int32_t node = -1;
  bool required = false;
};

struct JsonNode {
  NodeKind kind = NodeKind::kAnyOf;
  std::vector<JsonProperty> properties;  // kObject
  int32_t value = -1;                    // kMap values, kArray items
  int64_t min_items = 0, max_items = -1;  // kArray; -1: no limit
  int64_t min_length = 0, max_length = -1;  // kString, in characters (an escape is one)
  StringFormat format = StringFormat::kNone;
  int64_t minimum = INT64_MIN, maximum = INT64_MAX;  // kInteger
  std::vector<std::string> literals;     // kLiterals, sorted
  std::vector<int32_t> alternatives;     // kAnyOf
};

struct JsonGrammar {
  std::vector<JsonNode> nodes;
  int32_t root = -1;
  // Per node, its shortest value ("" where none is finite: a required cycle),
  // for closing an answer that is about to run out of tokens.
  std::vector<std::string> shortest;
  std::vector<bool> has_shortest;
  // Bytes of room kept for closing: an answer whose shortest completion plus
  // this reaches the tokens left follows that completion (each token adds a
  // byte or more, and one token lengthens the completion by less than this).
  int64_t close_margin = 16;
};

// Any JSON object (response_format json_object).
std::shared_ptr<const JsonGrammar> AnyJsonObjectGrammar();
// The values a JSON Schema accepts. Errors name the keyword and where it is
// ("#/properties/age: 'multipleOf' is not supported"). An ordered_json, so that
// properties come in the order the schema gives them.
StatusOr<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(const nlohmann::ordered_json& schema);

}  // namespace tachyon
