// Writes llama.cpp's logits for a GGUF file in the golden fixtures' format
// (tests/golden/arch/README.md): for each prompt, the prompt in one llama_decode
// call (logits of every position), then greedy steps of one token each. Built by
// make_arch_goldens.sh against a llama.cpp checkout outside this repository; it
// is not part of Tachyon's build.
//
//   llama_logits MODEL.gguf OUT_DIR STEM PROMPTS.json STEPS KEEP_ROWS
// PROMPTS.json: [{"name": "short", "ids": [256, 12, ...]}, ...]. KEEP_ROWS: the
// prompt rows stored (the last ones; all of a shorter prompt).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

// A minimal reader of the prompts file: each "ids" array of integers, in order,
// with the "name" before it.
struct Prompt {
  std::string name;
  std::vector<int> ids;
};

std::vector<Prompt> ReadPrompts(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  std::vector<Prompt> prompts;
  size_t at = 0;
  while ((at = s.find("\"name\"", at)) != std::string::npos) {
    Prompt p;
    const size_t q1 = s.find('"', s.find(':', at) + 1);
    const size_t q2 = s.find('"', q1 + 1);
    p.name = s.substr(q1 + 1, q2 - q1 - 1);
    const size_t open = s.find('[', s.find("\"ids\"", q2));
    const size_t close = s.find(']', open);
    std::stringstream list(s.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(list, item, ',')) p.ids.push_back(std::stoi(item));
    prompts.push_back(p);
    at = close;
  }
  return prompts;
}

int Argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;  // lowest id on ties
  }
  return best;
}

float Top2Margin(const float* row, int n) {
  float a = -INFINITY, b = -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (row[i] > a) {
      b = a;
      a = row[i];
    } else if (row[i] > b) {
      b = row[i];
    }
  }
  return a - b;
}

void Decode(llama_context* ctx, const std::vector<int>& ids, int first_pos) {
  llama_batch batch = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = first_pos + static_cast<int>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int>(ids.size());
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    std::exit(1);
  }
  llama_batch_free(batch);
}

void WriteF32(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

std::string JsonList(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string JsonList(const std::vector<float>& v) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.9g", v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: llama_logits MODEL.gguf OUT_DIR STEM PROMPTS.json STEPS KEEP_ROWS\n");
    return 2;
  }
  const std::string model_path = argv[1], out_dir = argv[2], stem = argv[3];
  const std::vector<Prompt> prompts = ReadPrompts(argv[4]);
  const int steps = std::stoi(argv[5]), keep_rows = std::stoi(argv[6]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  // llama.cpp sets token attributes by general.name (a name holding "phi3" needs
  // the real Phi-3 vocabulary's <unk> and <|endoftext|>); the generated files
  // carry a byte vocabulary, so the name is replaced by a neutral one.
  llama_model_kv_override overrides[2] = {};
  overrides[0].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
  std::snprintf(overrides[0].key, sizeof overrides[0].key, "general.name");
  std::snprintf(overrides[0].val_str, sizeof overrides[0].val_str, "tachyon golden");
  mp.kv_overrides = overrides;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (model == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::string entries;
  for (const Prompt& p : prompts) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) return 1;
    const int n = static_cast<int>(p.ids.size());
    Decode(ctx, p.ids, 0);
    const int first = n > keep_rows ? n - keep_rows : 0;
    std::vector<float> prompt_logits;
    for (int r = first; r < n; ++r) {
      const float* row = llama_get_logits_ith(ctx, r);
      prompt_logits.insert(prompt_logits.end(), row, row + n_vocab);
    }
    std::vector<float> step_logits;
    std::vector<int> greedy;
    std::vector<float> margins;
    const float* row = llama_get_logits_ith(ctx, n - 1);
    for (int k = 0; k < steps; ++k) {
      if (k > 0) {
        Decode(ctx, {greedy.back()}, n - 1 + k);
        row = llama_get_logits_ith(ctx, 0);
      }
      step_logits.insert(step_logits.end(), row, row + n_vocab);
      greedy.push_back(Argmax(row, n_vocab));
      margins.push_back(Top2Margin(row, n_vocab));
    }
    llama_free(ctx);
    const std::string prompt_file = stem + "." + p.name + ".prompt_logits.f32";
    const std::string step_file = stem + "." + p.name + ".step_logits.f32";
    WriteF32(out_dir + "/" + prompt_file, prompt_logits);
    WriteF32(out_dir + "/" + step_file, step_logits);
    if (!entries.empty()) entries += ",\n";
    entries += "    {\"name\": \"" + p.name + "\", \"prompt_ids\": " + JsonList(p.ids) + ",\n     \"logits_file\": \"" +
               prompt_file + "\", \"logits_positions\": [" + std::to_string(first) + ", " + std::to_string(n - 1) +
               "],\n     \"greedy_ids\": " + JsonList(greedy) + ",\n     \"step_logits_file\": \"" + step_file +
               "\",\n     \"greedy_top2_margin\": " + JsonList(margins) + "}";
  }
  llama_model_free(model);
  std::ofstream out(out_dir + "/" + stem + ".logits.json");
  out << "{\"n_vocab\": " << n_vocab << ",\n  \"prompts\": [\n" << entries << "\n  ]}\n";
  return 0;
}
