#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace tachyon {
namespace {

// Ids stored as 0xFFFFFFFF (or -1) mean "none".
constexpr uint64_t kNoToken32 = 0xFFFFFFFFull;

// A power of two at least twice n: the open-addressing tables stay at most half
// full.
size_t TableSize(size_t n) {
  size_t size = 16;
  while (size < 2 * n) size *= 2;
  return size;
}

size_t TextHash(std::string_view text) { return std::hash<std::string_view>()(text); }

// A slot: the entry's 32 high bits of hash over its id + 1 (0: empty), so a probe
// reads an entry's text only when the hashes agree.
uint64_t SlotOf(size_t hash, int32_t entry) {
  return (static_cast<uint64_t>(hash >> 32) << 32) | static_cast<uint32_t>(entry + 1);
}
int32_t EntryOf(uint64_t slot) { return static_cast<int32_t>(static_cast<uint32_t>(slot)) - 1; }

// The slot of `text` in `slots` (open addressing, linear probing): the one
// holding an entry whose text (text_of(entry)) equals it, else the empty slot
// where it would go.
template <class TextOf>
size_t Probe(const std::vector<uint64_t>& slots, size_t hash, std::string_view text, const TextOf& text_of) {
  const size_t mask = slots.size() - 1;
  const uint64_t tag = hash >> 32;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    const uint64_t s = slots[slot];
    if (s == 0 || ((s >> 32) == tag && text_of(EntryOf(s)) == text)) return slot;
  }
}

}  // namespace

size_t Vocab::TokenSlot(size_t hash, std::string_view text) const {
  return Probe(token_slots_, hash, text, [&](int32_t id) -> std::string_view { return tokens_[id].text; });
}

size_t Vocab::MergeSlot(size_t hash, std::string_view line) const {
  return Probe(merge_slots_, hash, line, [&](int32_t rank) { return MergeLine(rank); });
}

std::optional<TokenId> Vocab::Find(std::string_view text) const {
  if (token_slots_.empty()) return std::nullopt;
  const uint64_t slot = token_slots_[TokenSlot(TextHash(text), text)];
  if (slot == 0) return std::nullopt;
  return TokenId(EntryOf(slot));
}

int32_t Vocab::MergeRank(std::string_view left, std::string_view right) const {
  if (merge_slots_.empty()) return -1;
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(1, ' ').append(right);
  const uint64_t slot = merge_slots_[MergeSlot(TextHash(key), key)];
  return slot == 0 ? -1 : EntryOf(slot);
}

std::pair<std::string_view, std::string_view> Vocab::merge(int32_t rank) const {
  const std::string_view line = MergeLine(rank);
  const size_t space = line.find(' ', 1);  // ReadMerges checked there is one
  return {line.substr(0, space), line.substr(space + 1)};
}

bool Vocab::IsEndOfGeneration(TokenId id) const {
  return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

Status Vocab::ReadSpecialIds(const GgufFile& file) {
  struct Key {
    const char* name;
    std::optional<TokenId>* field;
  };
  for (Key key : {Key{"tokenizer.ggml.bos_token_id", &bos_}, Key{"tokenizer.ggml.eos_token_id", &eos_},
                  Key{"tokenizer.ggml.eot_token_id", &eot_},
                  Key{"tokenizer.ggml.unknown_token_id", &unk_},
                  Key{"tokenizer.ggml.seperator_token_id", &sep_},
                  Key{"tokenizer.ggml.padding_token_id", &pad_},
                  Key{"tokenizer.ggml.cls_token_id", &cls_},
                  Key{"tokenizer.ggml.mask_token_id", &mask_}}) {
    const GgufValue* value = file.Find(key.name);
    if (value == nullptr) continue;
    std::optional<int64_t> id = value->AsInt();
    if (!id) {
      return InvalidArgumentError(std::string(key.name) + " is a " +
                                  GgufValueTypeName(value->type()) + ", expected an integer id");
    }
    if (*id == -1 || static_cast<uint64_t>(*id) == kNoToken32) {
      *key.field = std::nullopt;
      continue;
    }
    if (*id < 0 || *id >= size()) {
      return InvalidArgumentError(std::string(key.name) + " = " + std::to_string(*id) +
                                  " is outside the vocabulary of " + std::to_string(size()) +
                                  " tokens");
    }
    *key.field = TokenId(static_cast<int32_t>(*id));
  }
  auto read_bool = [&](const char* name, bool* field) -> Status {
    const GgufValue* value = file.Find(name);
    if (value == nullptr) return Status::Ok();
    std::optional<bool> b = value->AsBool();
    if (!b) return InvalidArgumentError(std::string(name) + " must be a bool");
    *field = *b;
    return Status::Ok();
  };
  RETURN_IF_ERROR(read_bool("tokenizer.ggml.add_bos_token", &add_bos_));
  RETURN_IF_ERROR(read_bool("tokenizer.ggml.add_eos_token", &add_eos_));
  RETURN_IF_ERROR(read_bool("tokenizer.ggml.add_space_prefix", &add_space_prefix_));
  return Status::Ok();
}

std::optional<uint8_t> ByteTokenValue(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<uint8_t>(value);
}

// The tokens' texts, scores and types.
Status Vocab::ReadTokens(const GgufFile& file) {
  ASSIGN_OR_RETURN(const GgufArray* tokens, file.GetArray("tokenizer.ggml.tokens"));
  const std::vector<std::string>* texts = tokens->get<std::string>();
  if (texts == nullptr || texts->empty()) {
    return InvalidArgumentError("tokenizer.ggml.tokens must be a non-empty array of strings");
  }
  if (texts->size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("tokenizer.ggml.tokens has more than 2^31 entries");
  }
  const size_t n = texts->size();
  const std::vector<float>* scores = nullptr;
  if (const GgufValue* s = file.Find("tokenizer.ggml.scores")) {
    scores = s->AsArray() ? s->AsArray()->get<float>() : nullptr;
    if (scores == nullptr || scores->size() != n) {
      return InvalidArgumentError("tokenizer.ggml.scores must be " + std::to_string(n) +
                                  " float32 values, one per token");
    }
  }
  const std::vector<int32_t>* types = nullptr;
  if (const GgufValue* t = file.Find("tokenizer.ggml.token_type")) {
    types = t->AsArray() ? t->AsArray()->get<int32_t>() : nullptr;
    if (types == nullptr || types->size() != n) {
      return InvalidArgumentError("tokenizer.ggml.token_type must be " + std::to_string(n) +
                                  " int32 values, one per token");
    }
  }
  tokens_.resize(n);
  token_slots_.assign(TableSize(n), 0);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = tokens_[i];
    t.text = (*texts)[i];
    if (scores) t.score = (*scores)[i];
    if (types) {
      int32_t type = (*types)[i];
      t.type = type >= 0 && type <= 6 ? static_cast<TokenType>(type) : TokenType::kNormal;
    }
    if (t.type == TokenType::kByte && t.text.rfind("<0x", 0) == 0 && !ByteTokenValue(t.text)) {
      return InvalidArgumentError("tokenizer.ggml.tokens[" + std::to_string(i) + "]: the byte token '" + t.text +
                                  "' is not <0xHH> with two hex digits");
    }
    // The last token with a text wins.
    const size_t hash = TextHash(t.text);
    token_slots_[TokenSlot(hash, t.text)] = SlotOf(hash, static_cast<int32_t>(i));
    max_token_bytes_ = std::max(max_token_bytes_, t.text.size());
  }
  return Status::Ok();
}

// Special ids by tokenizer kind, before what the file says.
void Vocab::SetDefaultIds() {
  switch (kind_) {
    case VocabKind::kSpm:
      bos_ = TokenId(1);
      eos_ = TokenId(2);
      unk_ = TokenId(0);
      add_bos_ = true;
      add_space_prefix_ = true;
      break;
    case VocabKind::kBpe:
      bos_ = TokenId(11);
      eos_ = TokenId(11);
      break;
    case VocabKind::kWpm:
      bos_ = cls_ = TokenId(101);
      eos_ = sep_ = TokenId(102);
      unk_ = TokenId(100);
      pad_ = TokenId(0);
      mask_ = TokenId(103);
      add_bos_ = true;
      add_eos_ = true;
      break;
  }
  for (std::optional<TokenId>* id : {&bos_, &eos_, &unk_, &sep_, &cls_, &pad_, &mask_}) {
    if (*id && !IsValid(**id)) *id = std::nullopt;  // a default the vocabulary is too small for
  }
}

// BPE merges, "left right" per rank.
Status Vocab::ReadMerges(const GgufFile& file) {
  ASSIGN_OR_RETURN(const GgufArray* merges, file.GetArray("tokenizer.ggml.merges"));
  const std::vector<std::string>* lines = merges->get<std::string>();
  if (lines == nullptr) return InvalidArgumentError("tokenizer.ggml.merges must be strings");
  if (lines->size() > static_cast<size_t>(INT32_MAX - 1)) {
    return InvalidArgumentError("tokenizer.ggml.merges has more than 2^31 entries");
  }
  size_t bytes = 0;
  for (const std::string& line : *lines) bytes += line.size();
  if (bytes > UINT32_MAX) return InvalidArgumentError("tokenizer.ggml.merges holds more than 4 GiB of text");
  merge_text_.reserve(bytes);
  merge_offsets_.reserve(lines->size() + 1);
  merge_slots_.assign(TableSize(lines->size()), 0);
  for (size_t rank = 0; rank < lines->size(); ++rank) {
    const std::string& line = (*lines)[rank];
    size_t space = line.find(' ', 1);
    if (space == std::string::npos) {
      return InvalidArgumentError("tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" +
                                  line + "' is not two pieces separated by a space");
    }
    merge_text_.append(line);
    merge_offsets_.push_back(static_cast<uint32_t>(merge_text_.size()));
    const size_t hash = TextHash(line);
    uint64_t& slot = merge_slots_[MergeSlot(hash, line)];
    if (slot == 0) slot = SlotOf(hash, static_cast<int32_t>(rank));  // the first rank of a duplicate wins
  }
  return Status::Ok();
}

// Special tokens matched in raw text, and the end-of-generation set.
void Vocab::IndexSpecialTokens() {
  // Special tokens matched in raw text, longest first (ties in id order).
  for (int32_t i = 0; i < size(); ++i) {
    TokenType type = tokens_[i].type;
    if ((type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown) && !tokens_[i].text.empty()) {
      special_tokens_.push_back(TokenId(i));
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](TokenId a, TokenId b) {
    return token(a).text.size() > token(b).text.size();
  });

  // End of generation: eos, eot, and control tokens that mark the end of a turn.
  for (std::optional<TokenId> id : {eos_, eot_}) {
    if (id) eog_.push_back(*id);
  }
  for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                           "<|eom_id|>", "<EOT>", "<｜end▁of▁sentence｜>", "</s>"}) {
    std::optional<TokenId> id = Find(text);
    if (id && token(*id).type == TokenType::kControl && !IsEndOfGeneration(*id)) {
      eog_.push_back(*id);
    }
  }
}

StatusOr<Vocab> Vocab::FromGguf(const GgufFile& file) {
  Vocab v;
  StatusOr<std::string> model = file.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status().WithContext("no tokenizer in this file");
  v.model_name_ = *model;
  if (*model == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else if (*model == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else if (*model == "bert") {
    v.kind_ = VocabKind::kWpm;
  } else {
    return UnimplementedError("tokenizer.ggml.model '" + *model +
                              "' is not supported (llama, gpt2 and bert are)");
  }
  if (auto pre = file.GetString("tokenizer.ggml.pre"); pre.ok()) v.pre_ = *pre;

  RETURN_IF_ERROR(v.ReadTokens(file));
  v.SetDefaultIds();
  RETURN_IF_ERROR(v.ReadSpecialIds(file));
  if (v.kind_ == VocabKind::kBpe) RETURN_IF_ERROR(v.ReadMerges(file));
  v.IndexSpecialTokens();
  return v;
}

}  // namespace tachyon
