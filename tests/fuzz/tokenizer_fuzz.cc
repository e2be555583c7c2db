// libFuzzer target: arbitrary bytes as text through every tokenizer kind.
// Encoding must not crash (ASan/UBSan watch), every id must be in the
// vocabulary, streamed detokenizer chunks must be valid UTF-8, and for the
// lossless tokenizers decode(encode(x)) must give x back (or x with invalid
// UTF-8 replaced by U+FFFD, the one change byte-level BPE makes).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_gen.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using namespace tachyon;

struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
};

std::vector<Loaded>& Tokenizers() {
  static std::vector<Loaded> tokenizers;
  return tokenizers;
}

void Add(StatusOr<GgufFile> file) {
  if (!file.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", file.status().ToString().c_str());
    std::abort();
  }
  Loaded loaded{std::make_unique<GgufFile>(std::move(file).value()), nullptr};
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*loaded.file);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", tokenizer.status().ToString().c_str());
    std::abort();
  }
  loaded.tokenizer = std::move(tokenizer).value();
  Tokenizers().push_back(std::move(loaded));
}

// The built-in byte-level vocabulary, with a few merges and a user-defined token.
StatusOr<GgufFile> BuiltinVocab(const std::string& path) {
  GgufWriter writer;
  writer.SetMetadata("general.architecture", "llama");
  for (GgufKeyValue& kv : BuiltinByteVocab()) {
    if (kv.key == "tokenizer.ggml.pre") kv.value = GgufValue("llama-bpe");
    writer.SetMetadata(kv.key, kv.value);
  }
  RETURN_IF_ERROR(writer.Open(path));
  RETURN_IF_ERROR(writer.Close());
  return GgufFile::Open(path);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string temp = std::filesystem::temp_directory_path() / "tachyon_tokenizer_fuzz.gguf";
  Add(BuiltinVocab(temp));
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  std::string dir = std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/tokenizer/";
  for (const char* name : {"llama-bpe", "llama-spm", "bert-bge", "deepseek-llm", "mpt", "phi-3"}) {
    std::string path = dir + "ggml-vocab-" + name + ".gguf";
    if (std::filesystem::exists(path)) Add(GgufFile::Open(path));
  }
  std::fprintf(stderr, "tokenizer_fuzz: %zu tokenizers\n", Tokenizers().size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string valid = SanitizeUtf8(text);
  for (const Loaded& loaded : Tokenizers()) {
    const Tokenizer& tok = *loaded.tokenizer;
    for (bool parse_special : {false, true}) {
      std::vector<TokenId> ids = tok.Encode(text, {.add_special = true, .parse_special = parse_special});
      StreamingDetokenizer detok(tok);
      for (TokenId id : ids) {
        if (!tok.vocab().IsValid(id)) std::abort();
        std::string chunk = detok.Add(id);
        if (SanitizeUtf8(chunk) != chunk) std::abort();
      }
      (void)detok.Flush();
      if (!parse_special && tok.IsLossless()) {
        std::vector<TokenId> plain = tok.Encode(text, {.add_special = false});
        // Lossless unless the text contains a user-defined token's text whose
        // SentencePiece re-encoding adds a prefix space after it.
        bool has_user_defined = false;
        for (TokenId special : tok.vocab().special_tokens()) {
          if (tok.vocab().token(special).type == TokenType::kUserDefined &&
              valid.find(tok.vocab().token(special).text) != std::string::npos) {
            has_user_defined = true;
          }
        }
        // SentencePiece keeps invalid bytes as byte tokens (x itself comes back);
        // byte-level BPE sees U+FFFD for them (the sanitized x comes back).
        std::string decoded = tok.Decode(plain);
        // SentencePiece spells spaces as U+2581, so a U+2581 in the text comes back as a space.
        bool has_spm_space = tok.vocab().kind() == VocabKind::kSpm &&
                             valid.find("\xe2\x96\x81") != std::string::npos;
        if (!has_user_defined && !has_spm_space && decoded != valid && decoded != text) {
          std::fprintf(stderr, "round trip failed with %s vocabulary\n", tok.vocab().model_name().c_str());
          std::abort();
        }
      }
    }
  }
  return 0;
}
