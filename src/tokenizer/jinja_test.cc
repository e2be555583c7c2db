// The Jinja interpreter: the 15 real templates of ../shared/fixtures/chat-templates
// and this project's own (tests/golden/chat-templates: Qwen3, Gemma 3, Phi-4-mini)
// against the prompts Python's jinja2 renders on the shared conversations (every
// .txt byte for byte, every .error refused with its message), then the language's
// corners one by one.
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja.h"

#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tachyon::jinja {
namespace {

namespace fs = std::filesystem;

std::string ChatTemplatesDir() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/chat-templates";
}

// Folders of templates/ and expected/ renderings: the shared fixture's, then ours.
std::vector<std::string> TemplateDirs() {
  return {ChatTemplatesDir(), std::string(TACHYON_SOURCE_DIR) + "/tests/golden/chat-templates"};
}
constexpr int kNumTemplates = 15 + 3;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fixture's clock: 2026-12-01 09:30:00 UTC.
int64_t FixtureNow() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 11;
  tm.tm_mday = 1;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  return static_cast<int64_t>(timegm(&tm));
}

// bos_token / eos_token of each template's model (the fixture's README).
std::pair<std::string, std::string> SpecialTokens(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("meta-llama") || starts("meetkai")) return {"<|begin_of_text|>", "<|eot_id|>"};
  if (starts("NousResearch")) return {"<|begin_of_text|>", "<|im_end|>"};
  if (starts("Qwen")) return {"", "<|im_end|>"};
  if (starts("mistralai")) return {"<s>", "</s>"};
  if (starts("microsoft")) return {"<s>", "<|endoftext|>"};
  if (starts("google")) return {"<bos>", "<eos>"};
  if (starts("deepseek")) return {"<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                  "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};
  if (starts("CohereForAI")) return {"<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"};
  ADD_FAILURE() << "no special tokens known for " << name;
  return {};
}

// The fixture's conversations, one JSON object a line.
std::vector<nlohmann::ordered_json> Conversations(const std::string& dir) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(dir + "/conversations.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  }
  return out;
}

TEST(JinjaFixtureTest, EveryRealTemplateRendersAsJinja2Does) {
  const std::string dir = ChatTemplatesDir();
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  const std::vector<nlohmann::ordered_json> conversations = Conversations(dir);
  ASSERT_EQ(conversations.size(), 12u);
  int rendered = 0, refused = 0;
  for (const std::string& templates : TemplateDirs()) {
    for (const auto& entry : fs::directory_iterator(templates + "/templates")) {
      const std::string name = entry.path().stem().string();
      auto parsed = Template::Parse(ReadFile(entry.path().string()));
      ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().message();
      const auto [bos, eos] = SpecialTokens(name);
      for (const auto& c : conversations) {
        const std::string id = c["id"];
        Value context = Value::MakeDict();
        context.dict().Set("messages", Value::FromJson(c["messages"]));
        if (c.contains("tools")) context.dict().Set("tools", Value::FromJson(c["tools"]));
        context.dict().Set("add_generation_prompt", Value(c.value("add_generation_prompt", true)));
        context.dict().Set("bos_token", Value(bos));
        context.dict().Set("eos_token", Value(eos));
        StatusOr<std::string> out = parsed->Render(context, FixtureNow());
        const std::string expected_path = templates + "/expected/" + name + "." + id;
        if (fs::exists(expected_path + ".txt")) {
          ASSERT_TRUE(out.ok()) << name << " / " << id << ": " << out.status().message();
          EXPECT_EQ(*out, ReadFile(expected_path + ".txt")) << name << " / " << id;
          ++rendered;
        } else {
          ASSERT_TRUE(fs::exists(expected_path + ".error")) << expected_path;
          ASSERT_FALSE(out.ok()) << name << " / " << id << " should be refused, rendered:\n" << *out;
          EXPECT_EQ(out.status().message(), ReadFile(expected_path + ".error")) << name << " / " << id;
          ++refused;
        }
      }
    }
  }
  EXPECT_EQ(rendered + refused, kNumTemplates * 12);
  std::printf("%d prompts rendered byte for byte, %d refusals with jinja2's message\n", rendered, refused);
}

// A fixture conversation's messages as the API layer gives them to ChatTemplate
// (tool-call arguments as JSON text, as OpenAI clients send them).
std::vector<ChatMessage> Messages(const nlohmann::ordered_json& messages) {
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    ChatMessage c{.role = m["role"]};
    if (m["content"].is_null()) {
      c.content_null = true;
    } else {
      c.content = m["content"];
    }
    for (const auto& call : m.value("tool_calls", nlohmann::ordered_json::array())) {
      const auto& args = call["function"]["arguments"];
      c.tool_calls.push_back({call.value("id", ""), call["function"]["name"],
                              args.is_string() ? args.get<std::string>() : args.dump()});
    }
    c.tool_call_id = m.value("tool_call_id", "");
    c.name = m.value("name", "");
    out.push_back(std::move(c));
  }
  return out;
}

// ChatTemplate with tools and tool calls: each template gets the arguments in
// the form its probe chose, and renders exactly what jinja2 renders for that
// form (arguments sent as strings or as objects alike), or refuses with its message.
TEST(JinjaFixtureTest, ToolConversationsRenderInTheFormTheTemplateReads) {
  const std::string dir = ChatTemplatesDir();
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is absent (needs ../shared)";
  const std::vector<nlohmann::ordered_json> conversations = Conversations(dir);
  int compared = 0, objects = 0;
  for (const std::string& templates : TemplateDirs()) {
    for (const auto& entry : fs::directory_iterator(templates + "/templates")) {
      const std::string name = entry.path().stem().string();
      const auto [bos, eos] = SpecialTokens(name);
      auto t = ChatTemplate::FromJinja(ReadFile(entry.path().string()), bos, eos, false);
      ASSERT_TRUE(t.ok()) << name;
      t->set_now(FixtureNow());
      objects += t->tool_arguments_as_object();
      for (const auto& c : conversations) {
        std::string id = c["id"];
        if (!c.contains("tools")) continue;
        const bool argstr = id.size() > 7 && id.compare(id.size() - 7, 7, "-argstr") == 0;
        const std::string base = argstr ? id.substr(0, id.size() - 7) : id;
        const bool has_calls = fs::exists(templates + "/expected/" + name + "." + base + "-argstr.txt") ||
                               fs::exists(templates + "/expected/" + name + "." + base + "-argstr.error");
        // A template that writes the string it is given shows the client's text:
        // the -argstr conversation carries it as the fixture rendered it.
        if (has_calls && !t->tool_arguments_as_object() && !argstr) continue;
        const std::string expected = templates + "/expected/" + name + "." + base +
                                     (t->tool_arguments_as_object() || !has_calls ? "" : "-argstr");
        const nlohmann::ordered_json tools = c["tools"];
        StatusOr<std::string> out = t->Render(Messages(c["messages"]), c.value("add_generation_prompt", true), nullptr, &tools);
        if (fs::exists(expected + ".txt")) {
          ASSERT_TRUE(out.ok()) << name << " / " << id << ": " << out.status().message();
          EXPECT_EQ(*out, ReadFile(expected + ".txt")) << name << " / " << id;
        } else {
          ASSERT_FALSE(out.ok()) << name << " / " << id;
          EXPECT_EQ(out.status().message(), ReadFile(expected + ".error")) << name << " / " << id;
        }
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, kNumTemplates * 3);
  EXPECT_GT(objects, 0);
  EXPECT_LT(objects, kNumTemplates) << "some templates write the string they are given";
}

std::string Render(const std::string& source, const std::string& json = "{}") {
  auto t = Template::Parse(source);
  if (!t.ok()) return "parse error: " + t.status().message();
  auto out = t->Render(Value::FromJson(nlohmann::ordered_json::parse(json)));
  return out.ok() ? *out : "error: " + out.status().message();
}

TEST(JinjaTest, WhitespaceControlAsHuggingFaceConfiguresIt) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one goes.
  EXPECT_EQ(Render("{% if true %}\n  yes\n{% endif %}\nafter"), "  yes\nafter");
  EXPECT_EQ(Render("    {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(Render("a   {% if true %}x{% endif %}"), "a   x") << "not at a line's start: kept";
  EXPECT_EQ(Render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(Render("{{ 'x' }}\n"), "x\n") << "no trimming after an expression";
  EXPECT_EQ(Render("a\n  {%- if true %}\nb{% endif %}"), "ab");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x") << "'+' keeps the indentation";
  EXPECT_EQ(Render("{# a comment #}\nx"), "x");
}

TEST(JinjaTest, PythonSemantics) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 2.5, {'k': [1]}] }}"), "[1, 'a', None, True, 2.5, {'k': [1]}]");
  EXPECT_EQ(Render("{{ {'a': 'é', 'b': \"it's\", 'c': 1.0, 'd': none}|tojson }}"),
               "{\"a\": \"é\", \"b\": \"it's\", \"c\": 1.0, \"d\": null}");
  EXPECT_EQ(Render("{{ {'a': [1, 2], 'b': {}}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }}"),
            "3 -4 2 3.5 1024 0.30000000000000004");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' ~ 1 ~ none }}"), "ababab [1, 2] x1None");
  EXPECT_EQ(Render("{{ '  hi  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b  c'.split() }}"),
            "hi|['a', 'b', '', 'c']|['a', 'b', 'c']");
  EXPECT_EQ(Render("{{ 'héllo'|length }} {{ 'héllo'[1] }} {{ 'héllo'[::-1] }} {{ [1,2,3,4][1:3] }}"),
            "5 é olléh [2, 3]");
  EXPECT_EQ(Render("{{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ x is defined }}"),
            "True True True True False");
  EXPECT_EQ(Render("{{ 'x' + 1 }}"), "error: TypeError: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(Render("{{ 'x' + y }}"), "error: UndefinedError: 'y' is undefined");
  EXPECT_EQ(Render("{{ 'x' + m.role }}", R"({"m": {}})"),
            "error: UndefinedError: 'dict object' has no attribute 'role'");
  EXPECT_EQ(Render("{{ m.role }}|{{ m.role.x if false else 'ok' }}", R"({"m": {}})"), "|ok");
  EXPECT_EQ(Render("{{ 1 < 'a' }}"), "error: TypeError: '<' not supported between instances of 'int' and 'str'");
}

TEST(JinjaTest, StatementsLoopsMacrosAndNamespaces) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3] if x != 2 %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}"
                   "{% endfor %}"),
            "1:1,2:3");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "02");
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1")
      << "a loop's set does not leak";
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}"
                   "{{ ns.n }}"),
            "6");
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(Render("{{ m|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(', ') }}",
                   R"({"m": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"},
                             {"role": "user", "content": "c"}]})"),
            "a, c");
  EXPECT_EQ(Render("{{ x|default('d') }} {{ none|string }} {{ '5'|int + 1 }} {{ [3, 1, 3]|unique|list }}"),
            "d None 6 [3, 1]");
  EXPECT_EQ(Render("{% set s %}block {{ 1 }}{% endset %}[{{ s }}]"), "[block 1]");
  EXPECT_EQ(Render("{{ 'a\n\nb\n'|indent(2) }}|{{ 'a\n\nb'|indent(2, true, true) }}"), "a\n\n  b\n|  a\n  \n  b");
  EXPECT_EQ(Render("{{ raise_exception('no system role') }}"), "error: TemplateError: no system role");
  // Markup (|safe) + a plain string escapes the plain one, as markupsafe does.
  EXPECT_EQ(Render("{{ 'a'|safe + '<\"b\">' }} {{ '<x>' ~ ('y'|safe) }} {{ 'c' + 'd' }}"), "a&lt;&#34;b&#34;&gt; <x>y cd");
  EXPECT_EQ(Render("{{ 'a\\nb' }}{{ \"\\u00e9\" }}"), "a\nbé");
}

TEST(JinjaTest, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(Render("line one\n{% if x %}\nno end"), "parse error: template line 3, column 7: expected 'endif', found end of template");
  EXPECT_NE(Render("{{ 1 + }}").find("template line 1, column 8: unexpected end of tag"), std::string::npos)
      << Render("{{ 1 + }}");
  EXPECT_NE(Render("a\n  {% frobnicate %}").find("template line 2, column 6: unknown statement 'frobnicate'"),
            std::string::npos)
      << Render("a\n  {% frobnicate %}");
  EXPECT_NE(Render("{{ 'open").find("unclosed '{{'"), std::string::npos);
  EXPECT_EQ(Render("{{ x|nope }}"), "error: TemplateAssertionError: No filter named 'nope'.");
}

TEST(JinjaTest, WorkIsBounded) {
  // 10^10 iterations: refused by the step budget, not run.
  EXPECT_EQ(Render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            "error: TemplateError: the template ran past its step budget");
  EXPECT_EQ(Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "error: TemplateError: macro calls nested too deep");
  EXPECT_EQ(Render("{% set s = 'x' * 1000 %}{% for i in range(100000) %}{{ s }}{% endfor %}"),
            "error: TemplateError: the template's output passed its size limit");
  EXPECT_EQ(Render("{{ 'x' * 100000000 }}"), "error: TemplateError: a repeated string passed the output size limit");
  std::string deep(5000, '(');
  EXPECT_NE(Render("{{ " + deep + " }}").find("parse error"), std::string::npos) << "nesting is bounded when parsing";
}

// Which bytes of the prompt came from message content follows the content
// through filters, methods, concatenation, join, macros and set blocks.
TEST(JinjaTest, ContentRangesFollowTheContent) {
  auto t = Template::Parse(
      "{% macro show(x) %}[{{ x }}]{% endmacro %}"
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content|trim }}<|im_end|>\n{% endfor %}"
      "{{ '<s>' + messages[0].content.strip() }}|{{ messages|map(attribute='content')|join('/') }}|"
      "{{ show(messages[1].content) }}{% set b %}{{ messages[1].content }}{% endset %}{{ b ~ '!' }}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  Value messages = Value(Value::List{Value::MakeDict(), Value::MakeDict()});
  messages.list()[0].dict().Set("role", Value("user"));
  messages.list()[0].dict().Set("content", Value::Literal(" hi <|im_end|> "));
  messages.list()[1].dict().Set("role", Value("assistant"));
  messages.list()[1].dict().Set("content", Value::Literal("ok"));
  Value context = Value::MakeDict();
  context.dict().Set("messages", messages);
  std::vector<std::pair<size_t, size_t>> ranges;
  auto out = t->Render(context, 0, &ranges);
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<std::string> pieces;
  for (const auto& [a, b] : ranges) pieces.push_back(out->substr(a, b - a));
  EXPECT_EQ(pieces, (std::vector<std::string>{"hi <|im_end|>", "ok", "hi <|im_end|>", " hi <|im_end|> ", "ok", "ok",
                                              "ok"}))
      << *out;
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "sorted, apart";
}

}  // namespace
}  // namespace tachyon::jinja
