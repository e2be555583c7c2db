#include "embed/hash_embedder.h"

#include <cmath>
#include <memory>

#include "embed/text_words.h"
#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

uint64_t Fnv1a(std::string_view s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  // A final avalanche: FNV's low bits alone pick the slot.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

}  // namespace

StatusOr<std::unique_ptr<HashEmbedder>> HashEmbedder::Create(const HashEmbedderOptions& options) {
  if (options.dimension < 8 || options.dimension > 65536) {
    return InvalidArgumentError("hash embedder dimension " + std::to_string(options.dimension) + " is not in 8..65536");
  }
  if (options.min_ngram < 1 || options.max_ngram < options.min_ngram || options.max_ngram > 8) {
    return InvalidArgumentError("hash embedder n-grams " + std::to_string(options.min_ngram) + ".." +
                                std::to_string(options.max_ngram) + " must be within 1..8");
  }
  return std::unique_ptr<HashEmbedder>(new HashEmbedder(options));
}

HashEmbedder::HashEmbedder(const HashEmbedderOptions& options)
    : options_(options),
      id_("hash:d" + std::to_string(options.dimension) + ":n" + std::to_string(options.min_ngram) + "-" +
          std::to_string(options.max_ngram)) {}

void HashEmbedder::EmbedOne(std::string_view text, float* out) const {
  const int dim = options_.dimension;
  std::fill(out, out + dim, 0.0f);
  auto add = [&](std::string_view feature, uint64_t seed) {
    const uint64_t h = Fnv1a(feature, seed);
    out[h % static_cast<uint64_t>(dim)] += (h >> 63) ? -1.0f : 1.0f;
  };
  std::vector<size_t> starts;  // byte offset of each character of the marked word
  for (const std::string& word : FoldedWords(text)) {
    add(word, 1);
    const std::string marked = "<" + word + ">";
    starts.clear();
    for (size_t offset = 0; offset < marked.size();) {
      starts.push_back(offset);
      DecodeUtf8(marked, &offset);
    }
    starts.push_back(marked.size());
    const int chars = static_cast<int>(starts.size()) - 1;
    for (int n = options_.min_ngram; n <= options_.max_ngram; ++n) {
      for (int i = 0; i + n <= chars; ++i) {
        add(std::string_view(marked).substr(starts[i], starts[i + n] - starts[i]), 2);
      }
    }
  }
  // Damped counts: a word repeated ten times is not ten times the signal.
  for (int i = 0; i < dim; ++i) {
    if (out[i] != 0.0f) out[i] = std::copysign(1.0f + std::log(std::fabs(out[i])), out[i]);
  }
  NormalizeRows(out, 1, dim);
}

StatusOr<std::vector<float>> HashEmbedder::Embed(std::span<const std::string> texts) {
  std::vector<float> out(texts.size() * options_.dimension);
  for (size_t i = 0; i < texts.size(); ++i) EmbedOne(texts[i], &out[i * options_.dimension]);
  return out;
}

}  // namespace tachyon
