// TokenCounter: how many tokens a text is for one tokenizer, for the trimmer's
// budgets and `tachyon prompt audit`. A GGUF file's own tokenizer (a model or
// a vocab-only file), or the built-in byte-level one (one token per byte, no
// merges: the demo model's, and an upper bound for any byte-level BPE).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tachyon {

class Tokenizer;

class TokenCounter {
 public:
  // "" : the built-in byte-level tokenizer.
  static StatusOr<std::shared_ptr<const TokenCounter>> ForModel(const std::string& gguf_path);
  ~TokenCounter();

  // Tokens of the text alone (no BOS/EOS); safe from several threads.
  int64_t Count(std::string_view text) const;
  // "built-in byte-level (1 token per byte)" or "model.gguf (BPE, 49152 tokens)".
  const std::string& description() const { return description_; }

 private:
  TokenCounter() = default;
  std::unique_ptr<Tokenizer> tokenizer_;  // null: bytes
  std::string description_;
};

}  // namespace tachyon
