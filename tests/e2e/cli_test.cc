// The real binary: `tachyon --help/--version`, `model gen`, `model info`.
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

std::string SharedDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return env != nullptr ? env : TACHYON_SHARED_DIR;
}

// ctest runs test cases as parallel processes: the pid keeps their files apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

TEST(CliTest, VersionAndHelp) {
  CommandResult version = RunTachyon("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "tachyon 0.1.0\n");
  CommandResult help = RunTachyon("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("model"), std::string::npos);
  CommandResult gen_help = RunTachyon("model gen --help");
  EXPECT_EQ(gen_help.exit_code, 0);
  EXPECT_NE(gen_help.out.find("--shape"), std::string::npos);
  EXPECT_NE(gen_help.out.find("--vocab"), std::string::npos);
  CommandResult none = RunTachyon("");
  EXPECT_NE(none.exit_code, 0) << "a subcommand is required";
}

TEST(CliTest, GenListNamesEveryShape) {
  CommandResult list = RunTachyon("model gen --list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const char* shape : {"tiny", "stories15m", "smol-135m", "llama-1b", "qwen2-0.5b", "qwen3-0.6b", "qwen3-4b", "qwen3-tiny",
                            "qwen3-30b-a3b", "qwen3moe-tiny", "mixtral-8x7b", "mixtral-tiny"}) {
    EXPECT_NE(list.out.find(shape), std::string::npos) << shape;
  }
}

TEST(CliTest, GenThenInfoJson) {
  std::string path = TempPath("e2e_tiny_q4_0.gguf");
  CommandResult gen = RunTachyon("model gen --shape tiny --type q4_0 --seed 5 --out " + path);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.out.find("wrote " + path), std::string::npos);

  CommandResult info = RunTachyon("model info --json " + path);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  nlohmann::json j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["parameters"], 2952448);
  EXPECT_EQ(j["context_length"], 2048);
  EXPECT_EQ(j["embedding_length"], 256);
  EXPECT_EQ(j["block_count"], 4);
  EXPECT_EQ(j["head_count_kv"], 2);
  EXPECT_EQ(j["file_type_name"], "Q4_0");
  EXPECT_EQ(j["tokenizer"]["model"], "gpt2");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 258);
  EXPECT_EQ(j["tensors_by_type"]["Q4_0"], 30);
  EXPECT_EQ(j["tensors_by_type"]["F32"], 9);
  ASSERT_EQ(j["tensors"].size(), 39u);
  EXPECT_EQ(j["tensors"][0]["name"], "token_embd.weight");
  EXPECT_EQ(j["tensors"][0]["shape"], nlohmann::json({256, 258}));
  EXPECT_EQ(j["tensors"][0]["bytes"], 256 / 32 * 18 * 258);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["length"], 258);
  EXPECT_FALSE(j["metadata"]["tokenizer.ggml.tokens"].contains("value")) << "long arrays summarized";
  EXPECT_EQ(j["metadata"]["llama.block_count"]["value"], 4);

  CommandResult text = RunTachyon("model info " + path);
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("parameters:      3.0 M (2952448)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("blk.3.ffn_down.weight"), std::string::npos);
  fs::remove(path);
}

TEST(CliTest, GenWithVocabFile) {
  std::string vocab = SharedDir() + "/fixtures/tokenizer/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << vocab << " is absent (needs ../shared)";
  std::string path = TempPath("e2e_stories_q8_0.gguf");
  CommandResult gen =
      RunTachyon("model gen --shape stories15m --type q8_0 --vocab " + vocab + " --out " + path);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  nlohmann::json j = nlohmann::json::parse(RunTachyon("model info --json --no-tensors " + path).out);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 32000);
  EXPECT_FALSE(j.contains("tensors"));
  // stories15M: 6 layers of dim 288, tied 32000 x 288 embedding.
  EXPECT_EQ(j["parameters"], 6 * (2 * 288 + 4 * 288 * 288 + 3 * 288 * 768) + 288 + 32000 * 288);
  fs::remove(path);
}

TEST(CliTest, InfoOnEveryFixture) {
  std::string dir = SharedDir() + "/fixtures";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  int num_files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    CommandResult info = RunTachyon("model info --json " + entry.path().string());
    ASSERT_EQ(info.exit_code, 0) << entry.path() << ": " << info.err;
    EXPECT_TRUE(nlohmann::json::accept(info.out)) << entry.path();
    ++num_files;
  }
  EXPECT_GE(num_files, 16);
}

TEST(CliTest, ErrorsAreClearAndExitNonZero) {
  CommandResult shape = RunTachyon("model gen --shape llama-70b --out /tmp/x.gguf");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_NE(shape.err.find("unknown shape 'llama-70b'"), std::string::npos) << shape.err;
  CommandResult type = RunTachyon("model gen --shape tiny --type q5_k --out /tmp/x.gguf");
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_NE(type.err.find("unknown type 'q5_k'"), std::string::npos) << type.err;
  CommandResult missing = RunTachyon("model gen --shape tiny");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--out"), std::string::npos);

  std::string corrupt = TempPath("e2e_corrupt.gguf");
  std::ofstream(corrupt, std::ios::binary) << "GGUF\x03\x00\x00\x00garbage";
  CommandResult info = RunTachyon("model info " + corrupt);
  EXPECT_EQ(info.exit_code, 1);
  EXPECT_NE(info.err.find("tachyon: error: " + corrupt + ": file is truncated"), std::string::npos)
      << info.err;
  CommandResult absent = RunTachyon("model info /nonexistent.gguf");
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("No such file"), std::string::npos) << absent.err;
  fs::remove(corrupt);
}

// A k-quant mix of the llama-tiny fixture against the F32 file: more bits, closer
// distributions; a model against itself is KL 0 with every top token the same.
TEST(CliTest, QuantizeThenCompare) {
  std::string models = SharedDir() + "/fixtures/models";
  if (!fs::exists(models + "/llama-tiny-f32.gguf")) GTEST_SKIP() << models << " is absent (needs ../shared)";
  const std::string f32 = models + "/llama-tiny-f32.gguf";
  std::map<std::string, double> kl;
  for (const char* type : {"q3_k_m", "q5_k_m"}) {
    std::string out = TempPath(std::string("e2e_compare_") + type + ".gguf");
    CommandResult q = RunTachyon("model quantize " + f32 + " " + out + " --type " + type);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    CommandResult c = RunTachyon("model compare " + f32 + " " + out + " --tokens 64 --json");
    ASSERT_EQ(c.exit_code, 0) << c.err;
    nlohmann::json j = nlohmann::json::parse(c.out);
    EXPECT_EQ(j["positions"], 64);
    kl[type] = j["mean_kl"].get<double>();
    EXPECT_GT(kl[type], 0.0) << type;
    EXPECT_GT(j["top1_agreement"].get<double>(), 0.5) << type;
    fs::remove(out);
  }
  EXPECT_LT(kl["q5_k_m"], kl["q3_k_m"]);
  nlohmann::json self = nlohmann::json::parse(RunTachyon("model compare " + f32 + " " + f32 + " --tokens 32 --json").out);
  EXPECT_EQ(self["mean_kl"], 0.0);
  EXPECT_EQ(self["top1_agreement"], 1.0);
  CommandResult other = RunTachyon("model compare " + f32 + " " + models + "/stories260K.gguf");
  EXPECT_EQ(other.exit_code, 0) << "the same 512-token vocabulary: comparable, if far apart";
  CommandResult missing = RunTachyon("model compare " + f32 + " /nonexistent.gguf");
  EXPECT_EQ(missing.exit_code, 1);
}

TEST(CliTest, QuantizeThenRun) {
  std::string models = SharedDir() + "/fixtures/models";
  if (!fs::exists(models + "/stories260K.gguf")) GTEST_SKIP() << models << " is absent (needs ../shared)";
  std::string out = TempPath("e2e_quantized_stories_q8_0.gguf");
  CommandResult q = RunTachyon("model quantize " + models + "/stories260K.gguf " + out + " --type q8_0");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("wrote " + out), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(RunTachyon("model info --json " + out).out);
  EXPECT_EQ(j["file_type_name"], "Q8_0");
  EXPECT_EQ(j["tensors_by_type"]["F16"], 5) << "ffn_down rows of 172 fit no 32-block: F16";
  CommandResult run = RunTachyon("run --model " + out + " -p 'Once upon a time' -n 8 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
  CommandResult bad = RunTachyon("model quantize " + models + "/stories260K.gguf " + out + " --type iq2_xxs");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown type 'iq2_xxs'"), std::string::npos) << bad.err;
  fs::remove(out);
}

TEST(CliTest, TokenizeEncodesDecodesAndReadsJsonl) {
  std::string vocab = SharedDir() + "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << vocab << " is absent (needs ../shared)";
  CommandResult ids = RunTachyon("tokenize --model " + vocab + " --ids 'Hello world'");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, "128000 9906 1917\n");
  CommandResult no_bos = RunTachyon("tokenize --model " + vocab + " --ids --no-bos 'Hello world'");
  EXPECT_EQ(no_bos.out, "9906 1917\n");
  CommandResult special =
      RunTachyon("tokenize --model " + vocab + " --ids --no-bos --parse-special '<|eot_id|>'");
  EXPECT_EQ(special.out, "128009\n");
  CommandResult decode = RunTachyon("tokenize --model " + vocab + " --decode 9906,1917");
  EXPECT_EQ(decode.out, "Hello world\n");
  CommandResult table = RunTachyon("tokenize --model " + vocab + " 'Hi'");
  EXPECT_NE(table.out.find("128000 -> \"<|begin_of_text|>\""), std::string::npos) << table.out;

  std::string jsonl = TempPath("e2e_tokenize.jsonl");
  std::ofstream(jsonl) << "{\"text\": \"Hello world\"}\n\n{\"text\": \"\"}\n";
  CommandResult lines = RunTachyon("tokenize --model " + vocab + " --no-bos --jsonl " + jsonl);
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(lines.out, "{\"ids\":[9906,1917],\"text\":\"Hello world\"}\n{\"ids\":[],\"text\":\"\"}\n");
  std::ofstream(jsonl) << "{\"text\": 5}\n";
  CommandResult bad = RunTachyon("tokenize --model " + vocab + " --jsonl " + jsonl);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(jsonl + ":1: expected a JSON object"), std::string::npos) << bad.err;
  CommandResult bad_id = RunTachyon("tokenize --model " + vocab + " --decode 1,x");
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_NE(bad_id.err.find("'x' is not a token id"), std::string::npos);
  fs::remove(jsonl);
}

TEST(CliTest, TokenizeWorksOnEveryVocabFixture) {
  std::string dir = SharedDir() + "/fixtures/tokenizer";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  int num_files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    CommandResult r = RunTachyon("tokenize --model " + entry.path().string() +
                                 " --ids --no-bos 'Hello, world! 123 héllo'");
    EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << entry.path();
    ++num_files;
  }
  EXPECT_GE(num_files, 12);
}

TEST(CliTest, TokenizeGeneratedModelWithBuiltinVocab) {
  std::string path = TempPath("e2e_tok_builtin.gguf");
  ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + path).exit_code, 0);
  CommandResult r = RunTachyon("tokenize --model " + path + " --ids 'Hi!'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "256 72 105 33\n") << "BOS then one token per byte";
  EXPECT_EQ(RunTachyon("tokenize --model " + path + " --decode '256 72 105 33'").out, "Hi!\n");
  fs::remove(path);
}

TEST(CliTest, PromptAuditReportsWritesAndNeverOverwrites) {
  const std::string prompt = TempPath("audit_prompt.txt");
  std::ofstream(prompt) << "# Role\nYou help customers of the Acme store with their orders.   \n\n\n\n"
                           "Rules:\n- Always answer in a friendly and polite tone.\n- Never share internal prices.\n"
                           "- Always answer in a friendly and polite tone.\n";
  CommandResult text = RunTachyon("prompt audit " + prompt);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("built-in byte-level"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("exact duplicates"), std::string::npos);
  CommandResult json = RunTachyon("prompt audit " + prompt + " --json --prefill-tps 100");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["tokens"], 201);
  ASSERT_EQ(j["duplicates"].size(), 1u);
  EXPECT_EQ(j["duplicates"][0]["text"], "Always answer in a friendly and polite tone.");
  EXPECT_EQ(j["duplicates"][0]["lines"], nlohmann::json::array({7, 9}));
  // 3 trailing spaces, 2 blank lines and the final newline; the copy's line, "- " and newline included.
  EXPECT_EQ(j["removable_tokens"], 6 + 47);
  EXPECT_DOUBLE_EQ(j["prefill_ms_saved"].get<double>(), 1e3 * 53 / 100);

  const std::string trimmed = TempPath("audit_trimmed.txt");
  ASSERT_EQ(RunTachyon("prompt audit " + prompt + " --write " + trimmed).exit_code, 0);
  std::ifstream in(trimmed);
  const std::string written((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(written, "# Role\nYou help customers of the Acme store with their orders.\n\nRules:\n"
                     "- Always answer in a friendly and polite tone.\n- Never share internal prices.\n");
  CommandResult same = RunTachyon("prompt audit " + prompt + " --write " + prompt);
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_NE(same.err.find("another file"), std::string::npos) << same.err;

  // A request JSON: its system prompt is audited; --write writes the request back, trimmed.
  const std::string request = TempPath("audit_request.json");
  std::ifstream original(prompt);
  const std::string system((std::istreambuf_iterator<char>(original)), {});
  std::ofstream(request) << nlohmann::json({{"model", "m"}, {"messages", {{{"role", "system"}, {"content", system}},
                                                                          {{"role", "user"}, {"content", "hi"}}}}})
                                .dump();
  CommandResult req = RunTachyon("prompt audit " + request + " --json --write " + trimmed);
  ASSERT_EQ(req.exit_code, 0) << req.err;
  EXPECT_EQ(nlohmann::json::parse(req.out)["input"], "the system prompt of a request (1 message)");
  std::ifstream in2(trimmed);
  const nlohmann::json back = nlohmann::json::parse(in2);
  EXPECT_EQ(back["messages"][0]["content"], written.substr(0, written.size() - 1));
  EXPECT_EQ(back["messages"][1]["content"], "hi");
  EXPECT_EQ(RunTachyon("prompt audit /nonexistent.txt").exit_code, 1);
  for (const std::string& f : {prompt, trimmed, request}) std::remove(f.c_str());
}

}  // namespace
}  // namespace tachyon::e2e

namespace tachyon::e2e {
namespace {

// tachyon router train and eval through the binary: a model file, cross-validation and the --json keys.
TEST(CliTest, RouterTrainAndEval) {
  const std::string examples = TempPath("router_examples.jsonl");
  {
    std::ofstream out(examples);
    for (const char* opening : {"", "please ", "can you ", "now "}) {
      for (const char* t : {"classify this review as positive or negative", "label the sentiment of this tweet",
                            "is this email spam or not"}) {
        out << nlohmann::json({{"text", std::string(opening) + t}, {"label", "classify"}}).dump() << "\n";
      }
      for (const char* t : {"write a long essay on the history of rome", "compose a poem about the sea",
                            "draft a story about a dragon"}) {
        out << nlohmann::json({{"text", std::string(opening) + t}, {"label", "generate"}}).dump() << "\n";
      }
    }
  }
  const std::string model = TempPath("router.bin");
  CommandResult train = RunTachyon("router train --examples " + examples + " --out " + model + " --folds 4 --json");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const nlohmann::json t = nlohmann::json::parse(train.out);
  EXPECT_GE(t["cross_validation"]["accuracy"].get<double>(), 0.75) << train.out;
  EXPECT_DOUBLE_EQ(t["cross_validation"]["majority_baseline"].get<double>(), 0.5);
  CommandResult eval = RunTachyon("router eval --model " + model + " --examples " + examples + " --json");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const nlohmann::json e = nlohmann::json::parse(eval.out);
  EXPECT_GE(e["accuracy"].get<double>(), 0.9);
  EXPECT_TRUE(e["per_class"].contains("classify"));
  EXPECT_TRUE(e["per_class"]["generate"].contains("recall"));
  CommandResult broken = RunTachyon("router eval --model " + examples + " --examples " + examples);
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("not a router model"), std::string::npos) << broken.err;
  std::remove(examples.c_str());
  std::remove(model.c_str());
}

// `tachyon template render` reproduces Python's jinja2 on the real templates: a
// .txt prompt byte for byte on stdout, or exit 1 with the .error message on stderr.
TEST(CliTest, TemplateRenderMatchesJinja2) {
  const std::string dir = SharedDir() + "/fixtures/chat-templates";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  std::ifstream conversations(dir + "/conversations.jsonl");
  std::string line;
  int checked = 0;
  const std::vector<std::pair<std::string, std::string>> templates = {
      {"Qwen-Qwen2.5-7B-Instruct", "--eos-token '<|im_end|>'"},
      {"google-gemma-2-2b-it", "--bos-token '<bos>' --eos-token '<eos>'"},
      {"mistralai-Mistral-Nemo-Instruct-2407", "--bos-token '<s>' --eos-token '</s>'"},
  };
  while (std::getline(conversations, line)) {
    const std::string id = nlohmann::json::parse(line)["id"];
    const std::string file = ::testing::TempDir() + "/conversation_" + std::to_string(::getpid()) + ".json";
    std::ofstream(file) << line;
    for (const auto& [name, tokens] : templates) {
      CommandResult r = RunTachyon("template render --template " + dir + "/templates/" + name +
                                   ".jinja --conversation " + file + " " + tokens);
      const std::string expected = dir + "/expected/" + name + "." + id;
      std::ifstream txt(expected + ".txt"), error(expected + ".error");
      std::stringstream want;
      if (txt) {
        want << txt.rdbuf();
        EXPECT_EQ(r.exit_code, 0) << name << " / " << id << ": " << r.err;
        EXPECT_EQ(r.out, want.str()) << name << " / " << id;
      } else {
        want << error.rdbuf();
        EXPECT_EQ(r.exit_code, 1) << name << " / " << id;
        EXPECT_EQ(r.err, want.str() + "\n") << name << " / " << id;
        EXPECT_TRUE(r.out.empty());
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
  CommandResult no_template = RunTachyon("template render --model " + SharedDir() +
                                         "/fixtures/models/stories260K.gguf --conversation /nonexistent.json");
  EXPECT_EQ(no_template.exit_code, 1);
  EXPECT_NE(no_template.err.find("has no chat template"), std::string::npos) << no_template.err;
  const std::string bad = ::testing::TempDir() + "/bad_template_" + std::to_string(::getpid()) + ".jinja";
  std::ofstream(bad) << "{% for m in messages %}\n{{ m.content }";
  std::ofstream(::testing::TempDir() + "/c1.json") << R"({"messages": [{"role": "user", "content": "hi"}]})";
  CommandResult parse_error = RunTachyon("template render --template " + bad + " --conversation " +
                                         ::testing::TempDir() + "/c1.json");
  EXPECT_EQ(parse_error.exit_code, 1);
  EXPECT_NE(parse_error.err.find("template line 2, column 1: unclosed '{{'"), std::string::npos) << parse_error.err;
}

}  // namespace
}  // namespace tachyon::e2e
