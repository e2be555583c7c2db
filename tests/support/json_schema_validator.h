// A JSON Schema validator for tests, written apart from the grammar compiler
// (src/grammar) so that constrained-decoding tests check the compiler against
// the keywords' meaning, not against itself. Covers the keywords the compiler
// accepts: type (string or array), properties, required,
// additionalProperties, enum, const, items, minItems / maxItems, minLength /
// maxLength (code points), minimum / maximum / exclusive*, anyOf, $ref into
// the root, format date / date-time / uuid.
#pragma once

#include <cstdint>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace tachyon::testing {

class SchemaValidator {
 public:
  explicit SchemaValidator(nlohmann::json root) : root_(std::move(root)) {}

  // "" when `value` is valid, else why not (with its JSON pointer).
  std::string Check(const nlohmann::json& value) const { return Check(root_, value, "", 0); }

 private:
  static int64_t CodePoints(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  static bool HasType(const nlohmann::json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    return false;
  }

  static bool Format(const std::string& format, const std::string& s) {
    static const std::regex date(R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))");
    static const std::regex date_time(
        R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))");
    static const std::regex uuid(R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})");
    if (format == "date") return std::regex_match(s, date);
    if (format == "date-time") return std::regex_match(s, date_time);
    if (format == "uuid") return std::regex_match(s, uuid);
    return true;
  }

  std::string Check(const nlohmann::json& schema, const nlohmann::json& v, const std::string& at, int depth) const {
    using json = nlohmann::json;
    if (depth > 200) return at + ": schema recursion too deep";
    if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": false schema";
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      const json& target = ref == "#" ? root_ : root_.at(json::json_pointer(ref.substr(1)));
      return Check(target, v, at, depth + 1);
    }
    if (schema.contains("anyOf")) {
      for (const json& alt : schema["anyOf"]) {
        if (Check(alt, v, at, depth + 1).empty()) return "";
      }
      return at + ": matches no anyOf alternative";
    }
    if (schema.contains("const") && v != schema["const"]) return at + ": not the const";
    if (schema.contains("enum")) {
      bool found = false;
      for (const json& e : schema["enum"]) found = found || e == v;
      if (!found) return at + ": not in enum";
    }
    if (schema.contains("type")) {
      bool ok = false;
      if (schema["type"].is_string()) {
        ok = HasType(v, schema["type"].get<std::string>());
      } else {
        for (const json& t : schema["type"]) ok = ok || HasType(v, t.get<std::string>());
      }
      if (!ok) return at + ": wrong type (" + std::string(v.type_name()) + ")";
    }
    if (v.is_object()) {
      const json props = schema.value("properties", json::object());
      for (const json& r : schema.value("required", json::array())) {
        if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.get<std::string>();
      }
      for (const auto& [k, item] : v.items()) {
        if (props.contains(k)) {
          if (std::string e = Check(props[k], item, at + "/" + k, depth + 1); !e.empty()) return e;
        } else if (schema.contains("additionalProperties")) {
          if (std::string e = Check(schema["additionalProperties"], item, at + "/" + k, depth + 1); !e.empty()) {
            return e;
          }
        }
      }
    }
    if (v.is_array()) {
      if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return at + ": too few items";
      if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return at + ": too many items";
      if (schema.contains("items")) {
        for (size_t i = 0; i < v.size(); ++i) {
          if (std::string e = Check(schema["items"], v[i], at + "/" + std::to_string(i), depth + 1); !e.empty()) {
            return e;
          }
        }
      }
    }
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (schema.contains("minLength") && CodePoints(s) < schema["minLength"].get<int64_t>()) return at + ": too short";
      if (schema.contains("maxLength") && CodePoints(s) > schema["maxLength"].get<int64_t>()) return at + ": too long";
      if (schema.contains("format") && !Format(schema["format"].get<std::string>(), s)) return at + ": bad format";
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if (schema.contains("minimum") && d < schema["minimum"].get<double>()) return at + ": below minimum";
      if (schema.contains("maximum") && d > schema["maximum"].get<double>()) return at + ": above maximum";
      if (schema.contains("exclusiveMinimum") && d <= schema["exclusiveMinimum"].get<double>()) {
        return at + ": not above exclusiveMinimum";
      }
      if (schema.contains("exclusiveMaximum") && d >= schema["exclusiveMaximum"].get<double>()) {
        return at + ": not below exclusiveMaximum";
      }
    }
    return "";
  }

  nlohmann::json root_;
};

}  // namespace tachyon::testing
