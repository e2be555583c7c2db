// Writes the Jinja fuzzer's seeds into a directory: small templates that reach
// each statement, filter and test, and the real chat templates of
// ../shared/fixtures/chat-templates when they are there (read in place, never
// copied into the repository).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  fs::create_directories(out);
  const std::vector<std::string> seeds = {
      "{% for m in messages %}{{ m.role }}: {{ m.content|trim }}\n{% endfor %}",
      "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] }}{%- else -%}x{%- endif -%}",
      "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
      "{% macro f(x, y='d') %}{{ x ~ y }}{% endmacro %}{{ f(1) }}{{ f(2, y=3) }}",
      "{{ tools|tojson(indent=2) }}{{ tools|map(attribute='function')|selectattr('name')|list|length }}",
      "{{ raise_exception('no') if messages|length > 9 else messages[1:]|rejectattr('role', 'equalto', 'x')|list }}",
      "{{ 'a b'.split()|join(',') }}{{ 'x'.startswith(('a', 'x')) }}{{ {'k': 1}.get('k') }}{{ [1,2][::-1] }}",
      "{% for k, v in {'a': 1}|items %}{% if loop.first %}{{ k }}{% endif %}{% break %}{% endfor %}",
      "{{ strftime_now('%d %b %Y') }}{{ bos_token + 'x'|safe + eos_token }}{{ 7 // 2 }}{{ 2 ** 3 }}",
  };
  for (size_t i = 0; i < seeds.size(); ++i) std::ofstream(out / ("seed" + std::to_string(i))) << seeds[i];
  const fs::path shared = fs::path(TACHYON_SHARED_DIR) / "fixtures/chat-templates/templates";
  std::error_code ec;
  if (fs::exists(shared, ec)) {
    for (const auto& entry : fs::directory_iterator(shared, ec)) {
      fs::copy_file(entry.path(), out / entry.path().filename(), fs::copy_options::overwrite_existing, ec);
    }
  }
  return 0;
}
