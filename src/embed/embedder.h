// Embedder: text in, unit vectors out. The semantic cache and the router embed
// prompts through this interface whatever produces the vectors: a local GGUF
// encoder (LocalEmbedder), a remote /v1/embeddings upstream, word vectors or
// character n-gram hashing (HashEmbedder).
//
// id() names the embedder and every setting that changes its vectors
// ("local:bge-small-f32@3f2a...:cls", "hash:d512:n3-5"): vectors stored under
// one id are never compared with vectors of another.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace tachyon {

class Embedder {
 public:
  virtual ~Embedder() = default;

  virtual const std::string& id() const = 0;
  virtual int dimension() const = 0;

  // One unit vector per text, [texts.size(), dimension()] row-major. A text
  // longer than the embedder's context is cut to its start. Safe to call from
  // several threads.
  virtual StatusOr<std::vector<float>> Embed(std::span<const std::string> texts) = 0;
};

// Scales each row of vectors [n, dim] to unit L2 norm (a zero row stays zero).
void NormalizeRows(float* vectors, size_t n, int dim);

// Cosine of two unit vectors: their dot product.
float Dot(const float* a, const float* b, int dim);

}  // namespace tachyon
