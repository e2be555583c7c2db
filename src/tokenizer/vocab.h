// Vocab: a model's tokens and tokenizer settings, read from GGUF metadata
// (tokenizer.ggml.*), shared by the SPM, BPE and WPM tokenizers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/strong_id.h"
#include "gguf/gguf_file.h"

namespace tachyon {

// tokenizer.ggml.model
enum class VocabKind {
  kSpm,  // "llama": SentencePiece-style, score-ordered merges, byte fallback
  kBpe,  // "gpt2": byte-level BPE with a regex pre-tokenizer
  kWpm,  // "bert": WordPiece
};

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
};

// Hash that lets an unordered_map<std::string, ...> be searched by string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// The byte a byte token spells ("<0x41>" -> 0x41), or nullopt when it is not <0xHH>.
std::optional<uint8_t> ByteTokenValue(std::string_view text);

class Vocab {
 public:
  static StatusOr<Vocab> FromGguf(const GgufFile& file);

  VocabKind kind() const { return kind_; }
  const std::string& model_name() const { return model_name_; }  // "llama", "gpt2", "bert"
  const std::string& pre() const { return pre_; }                 // tokenizer.ggml.pre, or ""
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const TokenData& token(TokenId id) const { return tokens_[id.value()]; }
  bool IsValid(TokenId id) const { return id.value() >= 0 && id.value() < size(); }

  // Exact text lookup (the last token with that text wins, as in llama.cpp).
  std::optional<TokenId> Find(std::string_view text) const;

  std::optional<TokenId> bos() const { return bos_; }
  std::optional<TokenId> eos() const { return eos_; }
  std::optional<TokenId> eot() const { return eot_; }
  std::optional<TokenId> unk() const { return unk_; }
  std::optional<TokenId> sep() const { return sep_; }
  std::optional<TokenId> pad() const { return pad_; }
  std::optional<TokenId> cls() const { return cls_; }
  std::optional<TokenId> mask() const { return mask_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }

  // Tokens that end a generation: eos, eot, and control tokens whose text marks
  // the end of a turn (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, ...).
  bool IsEndOfGeneration(TokenId id) const;
  const std::vector<TokenId>& end_of_generation() const { return eog_; }

  // Tokens matched in raw text before the tokenizer runs (control, user-defined
  // and unknown types), longest text first.
  const std::vector<TokenId>& special_tokens() const { return special_tokens_; }

  // Longest token text in bytes (WordPiece matching bound).
  size_t max_token_bytes() const { return max_token_bytes_; }

  // BPE merge rank of the pair (left, right) by text, or -1.
  int32_t MergeRank(std::string_view left, std::string_view right) const;
  // The BPE merges in rank order: merge(rank) is its (left, right) pieces.
  int32_t num_merges() const { return static_cast<int32_t>(merge_offsets_.size()) - 1; }
  std::pair<std::string_view, std::string_view> merge(int32_t rank) const;

 private:
  Status ReadSpecialIds(const GgufFile& file);
  // FromGguf's steps, in order.
  Status ReadTokens(const GgufFile& file);
  void SetDefaultIds();
  Status ReadMerges(const GgufFile& file);
  void IndexSpecialTokens();

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_name_;
  std::string pre_;
  // The slot of a token's text (of hash TextHash(text)) in token_slots_, and of a
  // merge line in merge_slots_: its entry's, else the empty slot where it would go.
  size_t TokenSlot(size_t hash, std::string_view text) const;
  size_t MergeSlot(size_t hash, std::string_view line) const;
  // The merge line "left right" of a rank, in merge_text_.
  std::string_view MergeLine(int32_t rank) const {
    return std::string_view(merge_text_).substr(merge_offsets_[rank], merge_offsets_[rank + 1] - merge_offsets_[rank]);
  }

  std::vector<TokenData> tokens_;
  // Text -> id and merge line -> rank: open addressing over the ids and ranks
  // (a slot: 32 bits of the text's hash, then id + 1; 0 empty; compared with the
  // text they index when the hashes agree), so a load allocates a few arrays
  // rather than a node and a key per entry.
  std::vector<uint64_t> token_slots_;
  std::optional<TokenId> bos_, eos_, eot_, unk_, sep_, pad_, cls_, mask_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  std::vector<TokenId> eog_;
  std::vector<TokenId> special_tokens_;
  size_t max_token_bytes_ = 0;
  // Every merge line back to back; rank r is merge_offsets_[r] ..
  // merge_offsets_[r + 1]; one offset, no merge, until ReadMerges.
  std::string merge_text_;
  std::vector<uint32_t> merge_offsets_{0};
  // "left right" -> rank; the text key keeps lookups exact whatever the ids.
  std::vector<uint64_t> merge_slots_;
};

}  // namespace tachyon
