// LocalEmbedder: a GGUF encoder model (model/bert.h) with its own WordPiece
// (or other) tokenizer, run in this process.
//
//   ASSIGN_OR_RETURN(auto embedder, LocalEmbedder::Create({.model_path = "bge.gguf", .threads = 2}));
//   ASSIGN_OR_RETURN(std::vector<float> vecs, embedder->Embed(texts));  // [texts, dimension]
//
// Inputs become token sequences with the vocabulary's CLS/SEP (a text longer
// than the context is cut, its SEP kept); all of a call's sequences run in as
// few forward passes as max_batch_tokens allows, longest first. One forward
// pass runs at a time (concurrent calls wait their turn: the pass already uses
// every thread of the pool).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"
#include "embed/embedder.h"
#include "model/bert.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

struct LocalEmbedderOptions {
  std::string model_path;
  std::string name;                // served model name; default: the file's stem
  std::optional<Pooling> pooling;  // default: the file's <arch>.pooling_type
  bool normalize = true;           // L2-normalize (cosine = dot product)
  int threads = 1;
  int64_t max_batch_tokens = 4096;  // tokens in one forward pass
};

class LocalEmbedder : public Embedder {
 public:
  static StatusOr<std::unique_ptr<LocalEmbedder>> Create(const LocalEmbedderOptions& options);

  const std::string& id() const override { return id_; }
  int dimension() const override { return static_cast<int>(model_->config().n_embd); }
  StatusOr<std::vector<float>> Embed(std::span<const std::string> texts) override;

  // The token-level API of /v1/embeddings.
  const std::string& name() const { return name_; }
  const EncoderModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Pooling pooling() const { return pooling_; }
  int64_t context_length() const { return model_->config().context_length; }
  // The text's ids with CLS/SEP; cut to the context (keeping SEP) when `truncate`.
  std::vector<TokenId> Tokenize(std::string_view text, bool truncate) const;
  // Vectors of sequences of 1..context_length ids below the vocabulary size
  // (an error names the input that is not).
  StatusOr<std::vector<float>> EmbedTokens(std::span<const std::vector<TokenId>> inputs);
  // One line for the server's start-up message.
  std::string Describe() const;

 private:
  LocalEmbedder() = default;

  LocalEmbedderOptions options_;
  std::unique_ptr<EncoderModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  Pooling pooling_ = Pooling::kMean;
  std::string name_, id_;
  std::mutex forward_mutex_;  // one forward pass at a time
};

// A stable fingerprint of a GGUF file: its metadata, tensor table and a sample
// of every tensor's bytes (hex, 16 digits).
std::string GgufFingerprint(const GgufFile& file);

}  // namespace tachyon
