#include "embed/local_embedder.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "embed/fingerprint.h"

namespace tachyon {
std::string GgufFingerprint(const GgufFile& file) {
  Fingerprint f;
  for (const GgufKeyValue& kv : file.metadata()) {
    f.Add(kv.key);
    f.Add(kv.value.ToDisplayString());
  }
  constexpr uint64_t kSample = 256;
  for (const GgufTensorInfo& t : file.tensors()) {
    f.Add(t.name);
    f.Add(t.ShapeString());
    f.Add(GgmlTypeName(t.type));
    f.AddBytes(t.data, std::min(kSample, t.num_bytes));  // the first bytes and the middle ones
    if (t.num_bytes > 2 * kSample) f.AddBytes(t.data + t.num_bytes / 2, kSample);
  }
  return f.Hex();
}

StatusOr<std::unique_ptr<LocalEmbedder>> LocalEmbedder::Create(const LocalEmbedderOptions& options) {
  if (options.threads < 1) return InvalidArgumentError("embedding threads must be at least 1");
  if (options.max_batch_tokens < 1) return InvalidArgumentError("max_batch_tokens must be at least 1");
  std::unique_ptr<LocalEmbedder> e(new LocalEmbedder());
  e->options_ = options;
  ASSIGN_OR_RETURN(e->model_, EncoderModel::Load(options.model_path));
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(e->model_->file());
  if (!tokenizer.ok()) return tokenizer.status().WithContext(options.model_path);
  e->tokenizer_ = std::move(*tokenizer);
  if (e->tokenizer_->vocab().size() != e->model_->config().n_vocab) {
    return InvalidArgumentError(options.model_path + ": the tokenizer has " +
                                std::to_string(e->tokenizer_->vocab().size()) + " tokens, token_embd.weight " +
                                std::to_string(e->model_->config().n_vocab));
  }
  e->pooling_ = options.pooling.value_or(e->model_->config().pooling);
  e->name_ = !options.name.empty() ? options.name : std::filesystem::path(options.model_path).stem().string();
  e->id_ = "local:" + e->name_ + "@" + GgufFingerprint(e->model_->file()) + ":" + PoolingName(e->pooling_) +
           (options.normalize ? "" : ":raw");
  e->pool_ = std::make_unique<ThreadPool>(options.threads);
  return e;
}

std::vector<TokenId> LocalEmbedder::Tokenize(std::string_view text, bool truncate) const {
  std::vector<TokenId> ids = tokenizer_->Encode(text, {.add_special = true});
  const size_t limit = static_cast<size_t>(context_length());
  if (truncate && ids.size() > limit) {
    const std::optional<TokenId> sep = tokenizer_->vocab().sep();
    const bool ends_with_sep = sep && ids.back() == *sep;
    ids.resize(limit);
    if (ends_with_sep) ids.back() = *sep;
  }
  return ids;
}

StatusOr<std::vector<float>> LocalEmbedder::EmbedTokens(std::span<const std::vector<TokenId>> inputs) {
  const EncoderConfig& c = model_->config();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) return InvalidArgumentError("input " + std::to_string(i) + " has no tokens");
    if (static_cast<int64_t>(inputs[i].size()) > c.context_length) {
      return InvalidArgumentError("input " + std::to_string(i) + " has " + std::to_string(inputs[i].size()) +
                                  " tokens, more than the model's context of " + std::to_string(c.context_length));
    }
    for (TokenId id : inputs[i]) {
      if (id.value() < 0 || id.value() >= c.n_vocab) {
        return InvalidArgumentError("input " + std::to_string(i) + " has token id " + std::to_string(id.value()) +
                                    ", outside the vocabulary of " + std::to_string(c.n_vocab));
      }
    }
  }
  const int dim = dimension();
  std::vector<float> out(inputs.size() * dim);
  // Longest first, packed into passes of at most max_batch_tokens tokens.
  std::vector<size_t> order(inputs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return inputs[a].size() > inputs[b].size(); });
  std::vector<std::vector<TokenId>> batch;
  std::vector<size_t> batch_index;
  int64_t batch_tokens = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    std::vector<float> vecs;
    {
      std::lock_guard<std::mutex> lock(forward_mutex_);
      vecs = model_->Embed(batch, pooling_, *pool_);
    }
    for (size_t j = 0; j < batch.size(); ++j) std::copy_n(&vecs[j * dim], dim, &out[batch_index[j] * dim]);
    batch.clear();
    batch_index.clear();
    batch_tokens = 0;
  };
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(inputs[i].size());
    if (!batch.empty() && batch_tokens + len > options_.max_batch_tokens) flush();
    batch.push_back(inputs[i]);
    batch_index.push_back(i);
    batch_tokens += len;
  }
  flush();
  if (options_.normalize) NormalizeRows(out.data(), inputs.size(), dim);
  return out;
}

StatusOr<std::vector<float>> LocalEmbedder::Embed(std::span<const std::string> texts) {
  std::vector<std::vector<TokenId>> inputs;
  inputs.reserve(texts.size());
  for (const std::string& text : texts) inputs.push_back(Tokenize(text, /*truncate=*/true));
  return EmbedTokens(inputs);
}

std::string LocalEmbedder::Describe() const {
  const EncoderConfig& c = model_->config();
  return name_ + " (" + c.architecture + ", " + std::to_string(c.n_layer) + " layers, dimension " +
         std::to_string(c.n_embd) + ", context " + std::to_string(c.context_length) + ", " + PoolingName(pooling_) +
         " pooling" + (options_.normalize ? ", normalized" : "") + ")";
}

}  // namespace tachyon
