// The built-in byte-level vocabulary as a Tokenizer, for fuzz targets that need one
// (written once to a temporary GGUF at LLVMFuzzerInitialize; aborts if it cannot be).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_gen.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::fuzz {

// The tokenizer, made on the first call (name: the temporary file's stem).
inline const Tokenizer& BuiltinTokenizer(const std::string& name) {
  static std::unique_ptr<GgufFile> file;
  static std::unique_ptr<Tokenizer> tokenizer;
  if (tokenizer) return *tokenizer;
  const std::string path = std::filesystem::temp_directory_path() / (name + ".gguf");
  GgufWriter writer;
  writer.SetMetadata("general.architecture", "llama");
  for (GgufKeyValue& kv : BuiltinByteVocab()) writer.SetMetadata(kv.key, kv.value);
  if (!writer.Open(path).ok() || !writer.Close().ok()) std::abort();
  StatusOr<GgufFile> opened = GgufFile::Open(path);
  if (!opened.ok()) std::abort();
  file = std::make_unique<GgufFile>(std::move(opened).value());
  StatusOr<std::unique_ptr<Tokenizer>> made = Tokenizer::FromGguf(*file);
  if (!made.ok()) std::abort();
  tokenizer = std::move(made).value();
  return *tokenizer;
}

}  // namespace tachyon::fuzz
