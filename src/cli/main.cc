// tachyon: one binary, one subcommand per job (see README.md).
#include <CLI/CLI.hpp>

#include "cli/audit_command.h"
#include "cli/bench_command.h"
#include "cli/cache_command.h"
#include "cli/config_command.h"
#include "cli/prompt_command.h"
#include "cli/router_command.h"
#include "cli/embed_command.h"
#include "cli/model_command.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "cli/template_command.h"
#include "cli/tokenize_command.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Tachyon: a latency-first LLM serving system: a GGUF engine, an OpenAI-compatible server and a load "
      "generator to measure it (or any other server).",
      "tachyon"};
  app.set_version_flag("--version", "tachyon " TACHYON_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  tachyon::cli::AddModelCommand(app, &exit_code);
  tachyon::cli::AddTokenizeCommand(app, &exit_code);
  tachyon::cli::AddTemplateCommand(app, &exit_code);
  tachyon::cli::AddEmbedCommand(app, &exit_code);
  tachyon::cli::AddCacheCommand(app, &exit_code);
  tachyon::cli::AddRouterCommand(app, &exit_code);
  tachyon::cli::AddPromptCommand(app, &exit_code);
  tachyon::cli::AddRunCommand(app, &exit_code);
  tachyon::cli::AddServeCommand(app, &exit_code);
  tachyon::cli::AddAuditCommand(app, &exit_code);
  tachyon::cli::AddConfigCommand(app, &exit_code);
  std::string command_line = "tachyon";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  tachyon::cli::AddBenchCommand(app, &exit_code, command_line);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
