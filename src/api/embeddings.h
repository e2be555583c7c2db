// POST /v1/embeddings as OpenAI defines it: the request with validation that
// names the offending field, and the response's JSON.
//
//   input             a string, an array of strings, an array of token ids, or
//                     an array of arrays of token ids (at most the model's max_inputs)
//   model             the embedding model's name (may be left out when the server has one)
//   encoding_format   "float" (default) or "base64" (little-endian float32 bytes)
//   dimensions        keep the first N dimensions, then renormalize (for models
//                     trained for it: Matryoshka embeddings such as nomic-embed v1.5)
//   truncate          Tachyon's extension: cut inputs longer than the model's
//                     context instead of refusing them (default false)
//   user              accepted and ignored
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai.h"

namespace tachyon {

struct EmbeddingRequest {
  std::string model;
  // Each input is text or token ids, as the client gave it.
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> token_inputs;
  bool inputs_are_tokens = false;
  bool base64 = false;
  std::optional<int> dimensions;
  bool truncate = false;

  size_t num_inputs() const { return inputs_are_tokens ? token_inputs.size() : texts.size(); }
};

std::variant<EmbeddingRequest, ApiError> ParseEmbeddingRequest(std::string_view body);
// The error for a request of more than max_inputs inputs (the model's limit), if it has.
std::optional<ApiError> CheckEmbeddingInputLimit(const EmbeddingRequest& request, size_t max_inputs);

// Keeps the first `dimensions` of each row of vectors [n, dim] and renormalizes
// them to unit length: [n, dimensions].
std::vector<float> ShortenEmbeddings(const std::vector<float>& vectors, size_t n, int dim, int dimensions);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//  "model", "usage": {"prompt_tokens", "total_tokens"}}; vectors [n, dim].
std::string EmbeddingResponseBody(const std::vector<float>& vectors, size_t n, int dim, bool base64,
                                  const std::string& model, int64_t prompt_tokens);

// Standard base64 (RFC 4648, with padding).
std::string Base64Encode(std::string_view bytes);
// Its inverse; false for a character outside the alphabet (padding may be left out).
bool Base64Decode(std::string_view text, std::string* bytes);

}  // namespace tachyon
