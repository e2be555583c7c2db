#include "gateway/embedder_spec.h"

#include "backend/remote_embedder.h"
#include "embed/hash_embedder.h"
#include "embed/local_embedder.h"
#include "embed/words_embedder.h"

namespace tachyon {

StatusOr<std::unique_ptr<Embedder>> MakeEmbedder(const std::string& spec, const EmbedderSpecOptions& options,
                                                 std::string* describe) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::string line;
  std::unique_ptr<Embedder> embedder;
  if (kind == "hash") {
    HashEmbedderOptions h;
    if (!arg.empty()) {
      char* end = nullptr;
      const long dim = std::strtol(arg.c_str(), &end, 10);
      if (*end != '\0') return InvalidArgumentError("embedder '" + spec + "': 'hash:" + arg + "' is not hash:DIM");
      h.dimension = static_cast<int>(dim);
    }
    ASSIGN_OR_RETURN(std::unique_ptr<HashEmbedder> e, HashEmbedder::Create(h));
    line = e->id();
    embedder = std::move(e);
  } else if (kind == "words" && !arg.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<WordsEmbedder> e,
                     WordsEmbedder::Create({.vectors_path = arg,
                                            .words_path = options.words_path,
                                            .corpus = options.corpus,
                                            .sif_a = options.sif_a,
                                            .remove_components = options.remove_components}));
    line = e->id() + " (" + std::to_string(e->num_words()) + " words)";
    embedder = std::move(e);
  } else if (kind == "local" && !arg.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<LocalEmbedder> e, LocalEmbedder::Create({.model_path = arg,
                                                                              .pooling = options.pooling,
                                                                              .normalize = options.normalize,
                                                                              .threads = options.threads,
                                                                              .max_batch_tokens = options.max_batch_tokens}));
    line = e->Describe();
    embedder = std::move(e);
  } else if (kind == "remote" && arg.find('#') != std::string::npos) {
    const size_t hash = arg.rfind('#');
    ASSIGN_OR_RETURN(std::unique_ptr<RemoteEmbedder> e, RemoteEmbedder::Create({.base_url = arg.substr(0, hash),
                                                                                .model = arg.substr(hash + 1),
                                                                                .api_key = options.api_key,
                                                                                .dimensions = options.dimensions}));
    line = e->id();
    embedder = std::move(e);
  } else {
    return InvalidArgumentError("unknown embedder '" + spec +
                                "' (hash, hash:DIM, words:VECTORS, local:MODEL.gguf, remote:BASE_URL#MODEL)");
  }
  if (describe != nullptr) *describe = line;
  return embedder;
}

}  // namespace tachyon
