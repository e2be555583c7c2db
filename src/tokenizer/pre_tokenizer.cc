#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

namespace tachyon {
namespace {

// The pre-tokenizer expressions of each model family, from the models' own
// tokenizer.json files as llama.cpp adapted them (llama-vocab.cpp), so that a
// GGUF's tokenizer.ggml.pre selects the same split as llama.cpp.
const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Written as escapes: U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126 and U+212A have
// singleton canonical decompositions, and editors that normalize to NFC would
// silently turn them into other code points (and break the ranges).
const char* const kDeepseekLlmLetters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

struct Family {
  std::vector<std::string> expressions;
  bool ignore_merges = false;
};

const std::map<std::string, Family>& Families() {
  static const std::map<std::string, Family> families = [] {
    std::map<std::string, Family> f;
    Family gpt2{{kGpt2}};
    Family llama3{{kLlama3}, true};
    Family qwen2{{kQwen2}};
    Family starcoder{{"\\p{N}", kGpt2}};
    Family deepseek_llm{{"[\r\n]", kDeepseekLlmLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$",
                         "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}};
    Family deepseek_coder{{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}};
    Family deepseek_v3{{"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
                        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                        "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}};
    Family falcon{{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}};
    Family fallback{{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}};
    Family bloom{{" ?[^(\\s|.,!?…。，、।۔،)]+"}};
    for (const char* name : {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}) f[name] = llama3;
    for (const char* name : {"dbrx", "smaug-bpe", "chatglm-bpe"}) f[name] = Family{{kLlama3}};
    for (const char* name : {"qwen2", "stablelm2", "hunyuan"}) f[name] = qwen2;
    for (const char* name : {"gpt-2", "mpt", "olmo", "jais", "trillion"}) f[name] = gpt2;
    for (const char* name : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                             "minerva-7b"}) {
      f[name] = starcoder;
    }
    f["deepseek-llm"] = deepseek_llm;
    f["deepseek-coder"] = deepseek_coder;
    f["deepseek-v3"] = deepseek_v3;
    f["falcon"] = falcon;
    for (const char* name : {"poro-chat", "bloom", "gpt3-finnish"}) f[name] = bloom;
    f["viking"] = Family{{" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}};
    f["default"] = fallback;
    return f;
  }();
  return families;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

// A JIT stack per thread (a stack may not be shared by concurrent matches),
// larger than PCRE2's 32 KB default so long runs of one class still match.
struct JitContext {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  JitContext() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~JitContext() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

pcre2_match_context* ThreadMatchContext() {
  thread_local JitContext jit;
  return jit.context;
}

}  // namespace

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::KnownNames() {
  std::vector<std::string> names;
  for (const auto& [name, family] : Families()) names.push_back(name);
  return names;
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::ForName(const std::string& pre) {
  auto it = Families().find(pre.empty() ? "default" : pre);
  if (it == Families().end()) {
    std::string known;
    for (const std::string& name : KnownNames()) known += (known.empty() ? "" : ", ") + name;
    return UnimplementedError("pre-tokenizer '" + pre + "' (tokenizer.ggml.pre) is not known; " +
                              "known: " + known);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> p, FromExpressions(it->second.expressions));
  p->ignore_merges_ = it->second.ignore_merges;
  return p;
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromExpressions(
    const std::vector<std::string>& expressions) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  for (const std::string& expression : expressions) {
    auto compiled = std::make_unique<Compiled>();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    // $ matches only at the very end, as in ECMAScript regexes.
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expression.data()),
                                   expression.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                                   &error_code, &error_offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return InvalidArgumentError("pre-tokenizer expression '" + expression + "' at offset " +
                                  std::to_string(error_offset) + ": " +
                                  reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
    p->expressions_.push_back(std::move(compiled));
  }
  return p;
}

std::vector<std::pair<size_t, size_t>> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  pcre2_match_context* context = ThreadMatchContext();
  for (const auto& expression : expressions_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(expression->code, nullptr);
    next.clear();
    for (auto [begin, end] : pieces) {
      // Each piece is its own subject: lookarounds and $ see only the piece.
      PCRE2_SPTR subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
      size_t length = end - begin;
      size_t position = 0, emitted = 0;
      while (position < length) {
        int rc = pcre2_match(expression->code, subject, length, position, PCRE2_NO_UTF_CHECK, match,
                             context);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
          // JIT limits hit: the interpreter, with its own heap-based limits, decides.
          rc = pcre2_match(expression->code, subject, length, position,
                           PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match, nullptr);
        }
        if (rc < 0) break;  // no more matches
        PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        size_t match_begin = ovector[0], match_end = ovector[1];
        if (match_end == match_begin) {
          // An empty match splits nothing; step over one character.
          position = match_begin + 1;
          while (position < length && (subject[position] & 0xC0) == 0x80) ++position;
          continue;
        }
        if (match_begin > emitted) next.emplace_back(begin + emitted, begin + match_begin);
        next.emplace_back(begin + match_begin, begin + match_end);
        emitted = position = match_end;
      }
      if (emitted < length) next.emplace_back(begin + emitted, end);
    }
    pcre2_match_data_free(match);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace tachyon
