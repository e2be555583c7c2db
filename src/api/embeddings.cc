#include "api/embeddings.h"

#include "api/json_parse.h"

#include <cmath>
#include <bit>
#include <cstring>

namespace tachyon {
namespace {

ApiError Invalid(std::string message, std::string param) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

// A token id of an input: an integer in the int32 range (the model checks its vocabulary).
bool TokenIdOf(const nlohmann::json& v, int64_t* out) {
  if (!v.is_number_integer()) return false;
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id > INT32_MAX) return false;
  *out = id;
  return true;
}

std::variant<EmbeddingRequest, ApiError> Parse(std::string_view body) {
  nlohmann::json j = ParseJson(body);
  if (j.is_discarded() && JsonNestsDeeperThan(body)) return TooDeepError();
  if (j.is_discarded()) return Invalid("the request body is not valid JSON", "");
  if (!j.is_object()) return Invalid("the request body must be a JSON object", "");
  EmbeddingRequest r;
  if (j.contains("model") && !j["model"].is_null()) {  // may be left out when the server has one embedding model
    if (!j["model"].is_string()) return Invalid("'model' must be a string", "model");
    r.model = j["model"].get<std::string>();
  }
  if (!j.contains("input")) return Invalid("'input' is required", "input");
  const nlohmann::json& input = j["input"];
  if (input.is_string()) {
    r.texts.push_back(input.get<std::string>());
  } else if (input.is_array()) {
    if (input.empty()) return Invalid("'input' must not be an empty array", "input");
    if (input[0].is_string()) {
      for (size_t i = 0; i < input.size(); ++i) {
        if (!input[i].is_string()) return Invalid("input[" + std::to_string(i) + "] must be a string", "input");
        r.texts.push_back(input[i].get<std::string>());
      }
    } else if (input[0].is_number()) {
      r.inputs_are_tokens = true;
      r.token_inputs.emplace_back();
      for (size_t i = 0; i < input.size(); ++i) {
        int64_t id = 0;
        if (!TokenIdOf(input[i], &id)) {
          return Invalid("input[" + std::to_string(i) + "] must be a token id (a non-negative integer)", "input");
        }
        r.token_inputs.back().push_back(id);
      }
    } else if (input[0].is_array()) {
      r.inputs_are_tokens = true;
      for (size_t i = 0; i < input.size(); ++i) {
        const std::string where = "input[" + std::to_string(i) + "]";
        if (!input[i].is_array()) return Invalid(where + " must be an array of token ids", "input");
        if (input[i].empty()) return Invalid(where + " must not be empty", "input");
        r.token_inputs.emplace_back();
        for (size_t k = 0; k < input[i].size(); ++k) {
          int64_t id = 0;
          if (!TokenIdOf(input[i][k], &id)) {
            return Invalid(where + "[" + std::to_string(k) + "] must be a token id (a non-negative integer)", "input");
          }
          r.token_inputs.back().push_back(id);
        }
      }
    } else {
      return Invalid("'input' must be a string, an array of strings, or token ids", "input");
    }
  } else {
    return Invalid("'input' must be a string, an array of strings, or token ids", "input");
  }
  for (size_t i = 0; i < r.texts.size(); ++i) {
    if (r.texts[i].empty()) {
      return Invalid(r.texts.size() == 1 ? std::string("'input' must not be an empty string")
                                         : "input[" + std::to_string(i) + "] must not be an empty string",
                     "input");
    }
  }
  if (j.contains("encoding_format") && !j["encoding_format"].is_null()) {
    const nlohmann::json& f = j["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64")) {
      return Invalid("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    }
    r.base64 = f == "base64";
  }
  if (j.contains("dimensions") && !j["dimensions"].is_null()) {
    const nlohmann::json& d = j["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > 65536) {
      return Invalid("'dimensions' must be a positive integer", "dimensions");
    }
    r.dimensions = static_cast<int>(d.get<int64_t>());
  }
  if (j.contains("truncate") && !j["truncate"].is_null()) {
    if (!j["truncate"].is_boolean()) return Invalid("'truncate' must be a boolean", "truncate");
    r.truncate = j["truncate"].get<bool>();
  }
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) {
    return Invalid("'user' must be a string", "user");
  }
  return r;
}

}  // namespace

std::optional<ApiError> CheckEmbeddingInputLimit(const EmbeddingRequest& request, size_t max_inputs) {
  if (request.num_inputs() <= max_inputs) return std::nullopt;
  return Invalid("'input' has " + std::to_string(request.num_inputs()) + " items, more than the limit of " +
                     std::to_string(max_inputs),
                 "input");
}

std::variant<EmbeddingRequest, ApiError> ParseEmbeddingRequest(std::string_view body) {
  try {
    return Parse(body);
  } catch (const nlohmann::json::exception& e) {  // a net: no JSON exception escapes
    return Invalid(std::string("malformed request: ") + e.what(), "");
  }
}

std::vector<float> ShortenEmbeddings(const std::vector<float>& vectors, size_t n, int dim, int dimensions) {
  std::vector<float> out(n * dimensions);
  for (size_t r = 0; r < n; ++r) {
    const float* v = &vectors[r * dim];
    double norm = 0.0;
    for (int i = 0; i < dimensions; ++i) norm += static_cast<double>(v[i]) * v[i];
    const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (int i = 0; i < dimensions; ++i) out[r * dimensions + i] = v[i] * inv;
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string* bytes) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const size_t v = kAlphabet.find(c);
    if (v == std::string_view::npos) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

std::string EmbeddingResponseBody(const std::vector<float>& vectors, size_t n, int dim, bool base64,
                                  const std::string& model, int64_t prompt_tokens) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (size_t r = 0; r < n; ++r) {
    nlohmann::ordered_json item = {{"object", "embedding"}, {"index", r}};
    const float* v = &vectors[r * dim];
    if (base64) {
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
      item["embedding"] = Base64Encode(std::string_view(reinterpret_cast<const char*>(v), dim * sizeof(float)));
    } else {
      item["embedding"] = std::vector<float>(v, v + dim);
    }
    data.push_back(std::move(item));
  }
  nlohmann::ordered_json body = {{"object", "list"},
                                 {"data", std::move(data)},
                                 {"model", model},
                                 {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tachyon
