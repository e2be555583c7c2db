#include "grammar/json_grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace tachyon {
namespace {

using json = nlohmann::ordered_json;  // properties keep the schema's order

// A schema the compiler refuses; caught at the top and returned as a Status.
struct Refusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Keywords that constrain a value and are not implemented.
const std::set<std::string>& Unsupported() {
  static const std::set<std::string> k = {
      "not",           "allOf",          "oneOf",          "if",
      "then",          "else",           "dependentSchemas", "dependentRequired",
      "dependencies",  "patternProperties", "propertyNames", "minProperties",
      "maxProperties", "unevaluatedProperties", "unevaluatedItems", "prefixItems",
      "contains",      "minContains",    "maxContains",    "uniqueItems",
      "multipleOf",    "pattern",        "additionalItems", "contentSchema"};
  return k;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::strict); }

class Compiler {
 public:
  explicit Compiler(const json& root) : root_(root) {}

  std::shared_ptr<JsonGrammar> Run() {
    grammar_ = std::make_shared<JsonGrammar>();
    grammar_->root = Compile(root_, "#");
    return grammar_;
  }

  int32_t Any() {
    if (any_ >= 0) return any_;
    // A placeholder first: the containers' values refer back to it.
    any_ = NewNode(JsonNode{.kind = NodeKind::kAnyOf});
    JsonNode map{.kind = NodeKind::kMap, .value = any_};
    JsonNode array{.kind = NodeKind::kArray, .value = any_};
    std::vector<int32_t> alts = {Intern(std::move(map)), Intern(std::move(array)),
                                 Intern(JsonNode{.kind = NodeKind::kString}),
                                 Intern(JsonNode{.kind = NodeKind::kNumber}),
                                 Literals({"true", "false", "null"})};
    grammar_->nodes[any_].alternatives = std::move(alts);
    return any_;
  }

  int32_t AnyObject() { return Intern(JsonNode{.kind = NodeKind::kMap, .value = Any()}); }

 private:
  [[noreturn]] static void Refuse(const std::string& path, const std::string& what) {
    throw Refusal(path + ": " + what);
  }

  int32_t NewNode(JsonNode node) {
    grammar_->nodes.push_back(std::move(node));
    return static_cast<int32_t>(grammar_->nodes.size() - 1);
  }

  // One node per distinct content, so identical sub-schemas share mask-cache entries.
  int32_t Intern(JsonNode node) {
    std::string key = std::to_string(static_cast<int>(node.kind)) + "|" + std::to_string(node.value) + "|" +
                      std::to_string(node.min_items) + "|" + std::to_string(node.max_items) + "|" +
                      std::to_string(node.min_length) + "|" + std::to_string(node.max_length) + "|" +
                      std::to_string(static_cast<int>(node.format)) + "|" + std::to_string(node.minimum) + "|" +
                      std::to_string(node.maximum) + "|";
    for (const JsonProperty& p : node.properties) key += p.key + ":" + std::to_string(p.node) + (p.required ? "!" : "?");
    key += "|";
    for (const std::string& l : node.literals) key += std::to_string(l.size()) + ":" + l;
    key += "|";
    for (int32_t a : node.alternatives) key += std::to_string(a) + ",";
    auto [it, inserted] = interned_.emplace(std::move(key), 0);
    if (inserted) it->second = NewNode(std::move(node));
    return it->second;
  }

  int32_t Literals(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return Intern(JsonNode{.kind = NodeKind::kLiterals, .literals = std::move(values)});
  }

  static bool IsAnnotation(const std::string& k) {
    static const std::set<std::string> a = {"title",   "description", "default",  "examples", "$schema",
                                            "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",   "definitions"};
    return a.count(k) > 0;
  }

  int32_t Compile(const json& s, const std::string& path) {
    if (++depth_ > 64) Refuse(path, "the schema nests more than 64 levels");
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    if (s.is_boolean()) {
      if (!s.get<bool>()) Refuse(path, "the schema 'false' accepts nothing");
      return Any();
    }
    if (!s.is_object()) Refuse(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (Unsupported().count(k)) Refuse(path, "'" + k + "' is not supported");
    }
    if (s.contains("$ref")) return Ref(s, path);
    if (s.contains("anyOf")) {
      const json& alts = s["anyOf"];
      if (!alts.is_array() || alts.empty()) Refuse(path, "'anyOf' must be a non-empty array");
      JsonNode node{.kind = NodeKind::kAnyOf};
      for (size_t i = 0; i < alts.size(); ++i) {
        node.alternatives.push_back(Compile(alts[i], path + "/anyOf/" + std::to_string(i)));
      }
      for (const auto& [k, v] : s.items()) {
        if (k != "anyOf" && !IsAnnotation(k)) Refuse(path, "'" + k + "' next to 'anyOf' is not supported");
      }
      return Intern(std::move(node));
    }
    if (s.contains("const")) return Literals({Dump(s["const"])});
    if (s.contains("enum")) {
      const json& values = s["enum"];
      if (!values.is_array() || values.empty()) Refuse(path, "'enum' must be a non-empty array");
      std::vector<std::string> literals;
      for (const json& v : values) literals.push_back(Dump(v));
      return Literals(std::move(literals));
    }
    if (s.contains("type")) {
      const json& type = s["type"];
      if (type.is_string()) return Typed(s, type.get<std::string>(), path);
      if (!type.is_array() || type.empty()) Refuse(path, "'type' must be a string or a non-empty array of strings");
      JsonNode node{.kind = NodeKind::kAnyOf};
      for (const json& t : type) {
        if (!t.is_string()) Refuse(path, "'type' must be a string or a non-empty array of strings");
        node.alternatives.push_back(Typed(s, t.get<std::string>(), path));
      }
      return node.alternatives.size() == 1 ? node.alternatives[0] : Intern(std::move(node));
    }
    // No type: the keywords say which (a subset of what the schema accepts, so still valid).
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (s.contains(k)) return Typed(s, "object", path);
    }
    for (const char* k : {"items", "minItems", "maxItems"}) {
      if (s.contains(k)) return Typed(s, "array", path);
    }
    for (const char* k : {"minLength", "maxLength", "format"}) {
      if (s.contains(k)) return Typed(s, "string", path);
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return Typed(s, "integer", path);
    }
    return Any();
  }

  int32_t Ref(const json& s, const std::string& path) {
    const json& ref = s["$ref"];
    if (!ref.is_string()) Refuse(path, "'$ref' must be a string");
    for (const auto& [k, v] : s.items()) {
      if (k != "$ref" && !IsAnnotation(k)) Refuse(path, "'" + k + "' next to '$ref' is not supported");
    }
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') Refuse(path, "'$ref' " + target + " is not in this schema (only '#...')");
    const json* resolved = nullptr;
    try {
      const std::string pointer = target.substr(1);
      resolved = pointer.empty() ? &root_ : &root_.at(json::json_pointer(pointer));
    } catch (const json::exception&) {
      Refuse(path, "'$ref' " + target + " does not resolve");
    }
    // A placeholder first, so a recursive definition refers to itself.
    const int32_t id = NewNode(JsonNode{.kind = NodeKind::kAnyOf});
    refs_[target] = id;
    const int32_t body = Compile(*resolved, target);
    grammar_->nodes[id].alternatives = {body};
    return id;
  }

  static int64_t Integer(const json& s, const char* key, const std::string& path, bool up) {
    const json& v = s[key];
    if (!v.is_number()) Refuse(path, std::string("'") + key + "' must be a number");
    const double d = v.get<double>();
    const double r = up ? std::ceil(d) : std::floor(d);
    if (!(r > -9.0e18 && r < 9.0e18)) Refuse(path, std::string("'") + key + "' is out of range");
    return static_cast<int64_t>(r);
  }

  static int64_t Count(const json& s, const char* key, const std::string& path) {
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000) {
      Refuse(path, std::string("'") + key + "' must be an integer from 0 to 100000");
    }
    return v.get<int64_t>();
  }

  int32_t Typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "null") return Literals({"null"});
    if (type == "boolean") return Literals({"true", "false"});
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(k)) Refuse(path, std::string("'") + k + "' on a number is not supported (only on integers)");
      }
      return Intern(JsonNode{.kind = NodeKind::kNumber});
    }
    if (type == "integer") {
      JsonNode node{.kind = NodeKind::kInteger};
      node.minimum = -999999999999999999;  // 18 digits: the integers a matcher frame holds
      node.maximum = 999999999999999999;
      if (s.contains("minimum")) node.minimum = std::max(node.minimum, Integer(s, "minimum", path, true));
      if (s.contains("exclusiveMinimum")) {
        node.minimum = std::max(node.minimum, Integer(s, "exclusiveMinimum", path, false) + 1);
      }
      if (s.contains("maximum")) node.maximum = std::min(node.maximum, Integer(s, "maximum", path, false));
      if (s.contains("exclusiveMaximum")) {
        node.maximum = std::min(node.maximum, Integer(s, "exclusiveMaximum", path, true) - 1);
      }
      if (node.minimum > node.maximum) Refuse(path, "no integer is within 'minimum' and 'maximum'");
      return Intern(std::move(node));
    }
    if (type == "string") {
      JsonNode node{.kind = NodeKind::kString};
      if (s.contains("minLength")) node.min_length = Count(s, "minLength", path);
      if (s.contains("maxLength")) node.max_length = Count(s, "maxLength", path);
      if (node.max_length >= 0 && node.min_length > node.max_length) {
        Refuse(path, "'minLength' is above 'maxLength'");
      }
      if (s.contains("format")) {
        if (!s["format"].is_string()) Refuse(path, "'format' must be a string");
        const std::string f = s["format"].get<std::string>();
        if (f == "date") {
          node.format = StringFormat::kDate;
        } else if (f == "date-time") {
          node.format = StringFormat::kDateTime;
        } else if (f == "uuid") {
          node.format = StringFormat::kUuid;
        } else {
          Refuse(path, "'format' " + f + " is not supported (date, date-time and uuid are)");
        }
        if (s.contains("minLength") || s.contains("maxLength")) {
          Refuse(path, "'minLength' / 'maxLength' next to 'format' is not supported");
        }
      }
      return Intern(std::move(node));
    }
    if (type == "array") {
      JsonNode node{.kind = NodeKind::kArray};
      if (s.contains("minItems")) node.min_items = Count(s, "minItems", path);
      if (s.contains("maxItems")) node.max_items = Count(s, "maxItems", path);
      if (node.max_items >= 0 && node.min_items > node.max_items) Refuse(path, "'minItems' is above 'maxItems'");
      node.value = s.contains("items") ? Compile(s["items"], path + "/items") : Any();
      return Intern(std::move(node));
    }
    if (type == "object") return Object(s, path);
    Refuse(path, "'type' " + type + " is not a JSON Schema type");
  }

  int32_t Object(const json& s, const std::string& path) {
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) Refuse(path, "'required' must be an array of strings");
      for (const json& r : s["required"]) {
        if (!r.is_string()) Refuse(path, "'required' must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    const bool declared = s.contains("properties");
    if (declared && !s["properties"].is_object()) Refuse(path, "'properties' must be an object");
    if (!declared || s["properties"].empty()) {
      if (!required.empty()) Refuse(path, "a required property is not in 'properties'");
      bool closed = s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
                    !s["additionalProperties"].get<bool>();
      if (closed) return Literals({"{}"});
      int32_t value = s.contains("additionalProperties")
                          ? Compile(s["additionalProperties"], path + "/additionalProperties")
                          : Any();
      return Intern(JsonNode{.kind = NodeKind::kMap, .value = value});
    }
    const json& props = s["properties"];
    if (props.size() > static_cast<size_t>(kMaxProperties)) {
      Refuse(path, "more than " + std::to_string(kMaxProperties) + " properties are not supported");
    }
    JsonNode node{.kind = NodeKind::kObject};
    for (const auto& [name, sub] : props.items()) {
      node.properties.push_back({Dump(json(name)), Compile(sub, path + "/properties/" + name), required.count(name) > 0});
    }
    for (const std::string& r : required) {
      if (!props.contains(r)) Refuse(path, "required property '" + r + "' is not in 'properties'");
    }
    return Intern(std::move(node));
  }

  const json& root_;
  std::shared_ptr<JsonGrammar> grammar_;
  std::map<std::string, int32_t> interned_;
  std::map<std::string, int32_t> refs_;
  int32_t any_ = -1;
  int depth_ = 0;
};

// The longest "shortest value" a schema may have: a request's schema cannot
// make the server build gigabytes (minItems nested in minItems).
constexpr size_t kMaxShortestBytes = size_t{1} << 20;

// A value of `n` from its children's shortest values (false while one is
// unknown, or when it would pass kMaxShortestBytes).
bool ShortestOf(const JsonGrammar& g, const JsonNode& n, std::string* out) {
  auto known = [&](int32_t node) { return g.has_shortest[node]; };
  switch (n.kind) {
    case NodeKind::kObject: {
      std::string s = "{";
      for (const JsonProperty& p : n.properties) {
        if (!p.required) continue;
        if (!known(p.node) || s.size() + p.key.size() + g.shortest[p.node].size() > kMaxShortestBytes) return false;
        s += (s.size() > 1 ? "," : "") + p.key + ":" + g.shortest[p.node];
      }
      *out = s + "}";
      return true;
    }
    case NodeKind::kMap: *out = "{}"; return true;
    case NodeKind::kArray: {
      if (n.min_items > 0 && !known(n.value)) return false;
      if (n.min_items > 0 && static_cast<size_t>(n.min_items) * (g.shortest[n.value].size() + 1) > kMaxShortestBytes) {
        return false;
      }
      std::string s = "[";
      for (int64_t i = 0; i < n.min_items; ++i) s += (i > 0 ? "," : "") + g.shortest[n.value];
      *out = s + "]";
      return true;
    }
    case NodeKind::kString:
      switch (n.format) {
        case StringFormat::kNone: *out = "\"" + std::string(n.min_length, 'a') + "\""; break;
        case StringFormat::kDate: *out = "\"2000-01-01\""; break;
        case StringFormat::kDateTime: *out = "\"2000-01-01T00:00:00Z\""; break;
        case StringFormat::kUuid: *out = "\"00000000-0000-0000-0000-000000000000\""; break;
      }
      return true;
    case NodeKind::kNumber: *out = "0"; return true;
    case NodeKind::kInteger:
      *out = std::to_string(n.minimum > 0 ? n.minimum : n.maximum < 0 ? n.maximum : 0);
      return true;
    case NodeKind::kLiterals:
      *out = *std::min_element(n.literals.begin(), n.literals.end(),
                               [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
      return true;
    case NodeKind::kAnyOf: {
      bool any = false;
      for (int32_t a : n.alternatives) {
        if (known(a) && (!any || g.shortest[a].size() < out->size())) {
          *out = g.shortest[a];
          any = true;
        }
      }
      return any;
    }
  }
  return false;
}

// Shortest values by fixed point: a node's is known once its children's are;
// a shorter one found later replaces it (anyOf over a cycle).
void ComputeShortest(JsonGrammar& g) {
  g.shortest.assign(g.nodes.size(), "");
  g.has_shortest.assign(g.nodes.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      std::string s;
      if (ShortestOf(g, g.nodes[i], &s) && (!g.has_shortest[i] || s.size() < g.shortest[i].size())) {
        g.shortest[i] = std::move(s);
        g.has_shortest[i] = true;
        changed = true;
      }
    }
  }
  size_t longest = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) longest = std::max(longest, g.shortest[i].size());
  g.close_margin = 16 + static_cast<int64_t>(std::min<size_t>(longest, 512));
}

}  // namespace

std::shared_ptr<const JsonGrammar> AnyJsonObjectGrammar() {
  static const std::shared_ptr<const JsonGrammar> grammar = [] {
    const json empty = json::object();
    Compiler c(empty);
    std::shared_ptr<JsonGrammar> g = c.Run();  // root: Any (unused)
    g->root = c.AnyObject();
    ComputeShortest(*g);
    return std::shared_ptr<const JsonGrammar>(g);
  }();
  return grammar;
}

StatusOr<std::shared_ptr<const JsonGrammar>> CompileJsonSchema(const nlohmann::ordered_json& schema) {
  try {
    Compiler c(schema);
    std::shared_ptr<JsonGrammar> g = c.Run();
    ComputeShortest(*g);
    if (!g->has_shortest[g->root]) {
      return InvalidArgumentError("json schema: no value of it is finite and under 1 MiB (a required property or "
                                  "minItems that recurses without end, or minItems / minLength too large)");
    }
    return std::shared_ptr<const JsonGrammar>(g);
  } catch (const Refusal& e) {
    return InvalidArgumentError(std::string("json schema ") + e.what());
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("json schema: ") + e.what());
  }
}

}  // namespace tachyon
