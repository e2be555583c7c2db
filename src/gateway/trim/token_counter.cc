#include "gateway/trim/token_counter.h"

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

TokenCounter::~TokenCounter() = default;

StatusOr<std::shared_ptr<const TokenCounter>> TokenCounter::ForModel(const std::string& gguf_path) {
  std::shared_ptr<TokenCounter> counter(new TokenCounter());
  if (gguf_path.empty()) {
    counter->description_ = "built-in byte-level (1 token per byte)";
    return std::shared_ptr<const TokenCounter>(std::move(counter));
  }
  StatusOr<GgufFile> file = GgufFile::Open(gguf_path);
  if (!file.ok()) return file.status();
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) return InvalidArgumentError(gguf_path + ": " + tokenizer.status().message());
  counter->tokenizer_ = std::move(tokenizer).value();
  const Vocab& vocab = counter->tokenizer_->vocab();
  const char* kind = vocab.kind() == VocabKind::kSpm ? "SentencePiece" : vocab.kind() == VocabKind::kWpm ? "WordPiece"
                                                                                                         : "BPE";
  const size_t slash = gguf_path.rfind('/');
  counter->description_ = (slash == std::string::npos ? gguf_path : gguf_path.substr(slash + 1)) + " (" + kind +
                          ", " + std::to_string(vocab.size()) + " tokens)";
  return std::shared_ptr<const TokenCounter>(std::move(counter));
}

int64_t TokenCounter::Count(std::string_view text) const {
  if (!tokenizer_) return static_cast<int64_t>(text.size());
  return static_cast<int64_t>(tokenizer_->Encode(text, {.add_special = false}).size());
}

}  // namespace tachyon
