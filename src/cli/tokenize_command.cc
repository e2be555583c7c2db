#include "cli/tokenize_command.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/format.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string text;
  bool ids = false;
  bool pieces = false;
  bool no_bos = false;
  bool parse_special = false;
  std::string decode;
  bool special = false;
  std::string jsonl;
  std::string file;
};

std::string Quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<std::vector<TokenId>> ParseIds(const std::string& text, int32_t vocab_size) {
  std::vector<TokenId> ids;
  std::string item;
  std::stringstream ss(text);
  while (ss >> item) {
    std::stringstream parts(item);
    std::string part;
    while (std::getline(parts, part, ',')) {
      if (part.empty()) continue;
      char* end = nullptr;
      long value = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0') return InvalidArgumentError("'" + part + "' is not a token id");
      if (value < 0 || value >= vocab_size) {
        return InvalidArgumentError("token id " + part + " is outside the vocabulary of " +
                                    std::to_string(vocab_size) + " tokens");
      }
      ids.push_back(TokenId(static_cast<int32_t>(value)));
    }
  }
  return ids;
}

int RunJsonl(const TokenizeFlags& flags, const Tokenizer& tokenizer, EncodeOptions options) {
  std::ifstream in(flags.jsonl);
  if (!in) return Fail(flags.jsonl + ": cannot open");
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object() || !object.contains("text") ||
        !object["text"].is_string()) {
      return Fail(flags.jsonl + ":" + std::to_string(line_number) +
                  ": expected a JSON object with a string \"text\"");
    }
    std::string text = object["text"];
    nlohmann::json ids = nlohmann::json::array();
    for (TokenId id : tokenizer.Encode(text, options)) ids.push_back(id.value());
    nlohmann::json out = {{"text", text}, {"ids", ids}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

int Run(const TokenizeFlags& flags) {
  StatusOr<GgufFile> file = GgufFile::Open(flags.model);
  if (!file.ok()) return Fail(file.status().message());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) return Fail(flags.model + ": " + tokenizer.status().message());
  const Tokenizer& tok = **tokenizer;
  EncodeOptions options{.add_special = !flags.no_bos, .parse_special = flags.parse_special};

  if (!flags.decode.empty()) {
    StatusOr<std::vector<TokenId>> ids = ParseIds(flags.decode, tok.vocab().size());
    if (!ids.ok()) return Fail(ids.status().message());
    std::cout << tok.Decode(*ids, {.special = flags.special}) << "\n";
    return 0;
  }
  if (!flags.jsonl.empty()) return RunJsonl(flags, tok, options);

  std::string text = flags.text;
  if (!flags.file.empty()) {
    if (!flags.text.empty()) return Fail("give the text or --file, not both");
    std::ifstream in(flags.file, std::ios::binary);
    if (!in) return Fail(flags.file + ": cannot open");
    in.seekg(0, std::ios::end);
    if (const std::streamoff size = in.tellg(); in && size >= 0) {  // a regular file: one read of its size
      text.resize(static_cast<size_t>(size));
      in.seekg(0);
      if (!in.read(text.data(), size)) return Fail(flags.file + ": cannot read");
    } else {  // a pipe
      in.clear();
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
  }
  std::vector<TokenId> ids = tok.Encode(text, options);
  if (flags.ids) {
    std::string line;
    line.reserve(ids.size() * 7 + 1);
    char buf[16];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ' ';
      line.append(buf, std::to_chars(buf, buf + sizeof(buf), ids[i].value()).ptr);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  } else if (flags.pieces) {
    for (TokenId id : ids) std::cout << Quoted(tok.TokenToPiece(id, true)) << "\n";
  } else {
    for (TokenId id : ids) {
      std::printf("%8d -> %s\n", id.value(), Quoted(tok.TokenToPiece(id, true)).c_str());
    }
    std::printf("%zu tokens\n", ids.size());
  }
  return 0;
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Tokenize text (or --decode ids) with a model's own tokenizer, e.g. "
      "tachyon tokenize --model m.gguf --ids \"Hello world\"");
  cmd->add_option("--model", flags->model, "GGUF file with a tokenizer (a model or vocab-only)")
      ->required();
  cmd->add_option("text", flags->text, "Text to tokenize");
  cmd->add_option("--file", flags->file, "Tokenize the whole of this file (its bytes as they are) instead of text");
  cmd->add_flag("--ids", flags->ids, "Print only the ids, space-separated, on one line");
  cmd->add_flag("--pieces", flags->pieces, "Print only the pieces, one JSON string a line");
  cmd->add_flag("--no-bos", flags->no_bos, "Do not add BOS/EOS (CLS/SEP for WordPiece)");
  cmd->add_flag("--parse-special", flags->parse_special,
                "Match control tokens such as <|eot_id|> written in the text");
  cmd->add_option("--decode", flags->decode, "Decode these ids (\"1,2,3\" or \"1 2 3\") to text");
  cmd->add_flag("--special", flags->special, "With --decode: render control tokens' text");
  cmd->add_option("--jsonl", flags->jsonl,
                  "Read {\"text\": ...} lines from this file, write {\"text\", \"ids\"} lines "
                  "(the vocabulary is loaded once)");
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
