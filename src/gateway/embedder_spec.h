// Embedders named by a SPEC string, as the semantic cache's config and the
// `tachyon cache` / `tachyon embed` commands name them:
//
//   hash | hash:DIM            character n-gram hashing (DIM slots, default 1024)
//   words:VECTORS              word vectors with SIF weights (options.corpus fits them)
//   local:MODEL.gguf           a GGUF encoder in this process
//   remote:BASE_URL#MODEL      an OpenAI-compatible /v1/embeddings
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "model/bert.h"

namespace tachyon {

struct EmbedderSpecOptions {
  int threads = 1;                   // local
  std::optional<Pooling> pooling;    // local
  bool normalize = true;             // local
  int64_t max_batch_tokens = 4096;   // local
  std::vector<std::string> corpus;   // words
  std::string words_path;            // words: the words file of .f32 vectors
  double sif_a = 1e-3;               // words
  int remove_components = 1;         // words
  int dimensions = 0;                // remote: asked of the upstream when > 0
  std::string api_key;               // remote
};

// The embedder, and a one-line description of it in *describe (if not null).
StatusOr<std::unique_ptr<Embedder>> MakeEmbedder(const std::string& spec, const EmbedderSpecOptions& options = {},
                                                 std::string* describe = nullptr);

}  // namespace tachyon
