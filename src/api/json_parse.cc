#include "api/json_parse.h"

#include <simdjson.h>

#include <string>

namespace tachyon {
namespace {

nlohmann::json Convert(simdjson::dom::element e, bool* repeated_keys) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      nlohmann::json out = nlohmann::json::object();
      size_t num_fields = 0;
      for (simdjson::dom::key_value_pair field : simdjson::dom::object(e)) {
        out[std::string(field.key)] = Convert(field.value, repeated_keys);  // a repeated key: the last one, as nlohmann keeps it
        ++num_fields;
      }
      if (out.size() != num_fields) *repeated_keys = true;
      return out;
    }
    case simdjson::dom::element_type::ARRAY: {
      nlohmann::json out = nlohmann::json::array();
      for (simdjson::dom::element item : simdjson::dom::array(e)) out.push_back(Convert(item, repeated_keys));
      return out;
    }
    case simdjson::dom::element_type::STRING:
      return std::string(std::string_view(e));
    case simdjson::dom::element_type::INT64:
      return int64_t(e);
    case simdjson::dom::element_type::UINT64:
      return uint64_t(e);
    case simdjson::dom::element_type::DOUBLE:
      return double(e);
    case simdjson::dom::element_type::BOOL:
      return bool(e);
    case simdjson::dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

nlohmann::json ParseJson(std::string_view text, bool* repeated_keys) {
  bool repeated = false;
  if (repeated_keys == nullptr) repeated_keys = &repeated;
  *repeated_keys = false;
  if (JsonNestsDeeperThan(text)) return nlohmann::json(nlohmann::json::value_t::discarded);
  if (text.size() <= kSimdJsonMaxBytes) {
    thread_local simdjson::dom::parser parser;
    thread_local std::string padded;
    padded.assign(text.begin(), text.end());
    padded.resize(text.size() + simdjson::SIMDJSON_PADDING, '\0');
    simdjson::dom::element root;
    if (parser.parse(padded.data(), text.size(), false).get(root) == simdjson::SUCCESS) {
      return Convert(root, repeated_keys);
    }
  }
  *repeated_keys = true;  // not checked
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string StringField(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t IntField(const nlohmann::json& object, std::string_view key, int64_t otherwise) {
  if (!object.is_object()) return otherwise;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : otherwise;
}

}  // namespace tachyon
