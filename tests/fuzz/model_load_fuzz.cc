// libFuzzer target: the whole load path on arbitrary bytes: GgufFile::Parse, then
// the tokenizer (Vocab::FromGguf), ModelConfig and the binding of every weight, as
// `tachyon serve --model` does. Each must return a clear error or a model, never
// crash, read out of bounds or allocate beyond the file's size (-rss_limit_mb). A
// model that loads encodes and decodes a short text.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon;
  StatusOr<GgufFile> file = GgufFile::Parse(data, size);
  if (!file.ok()) return 0;
  StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(*file);
  if (tok.ok()) {
    std::vector<TokenId> ids = (*tok)->Encode("Hello <s> wörld", {.add_special = true, .parse_special = true});
    for (TokenId id : ids) {
      if (!(*tok)->vocab().IsValid(id)) std::abort();
    }
    (void)(*tok)->Decode(ids);
  }
  StatusOr<ModelConfig> config = ModelConfig::FromGguf(*file);
  if (!config.ok()) return 0;
  if (config->head_dim <= 0 || config->n_layer <= 0 || config->n_vocab <= 0) std::abort();
  StatusOr<std::unique_ptr<Model>> model = Model::FromFile(std::move(file).value());
  (void)model;
  return 0;
}
