// tachyon: one binary, one subcommand per job (see README.md).
#include <CLI/CLI.hpp>

#include "cli/model_command.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "cli/tokenize_command.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Tachyon: a latency-first LLM serving system: a GGUF engine and an OpenAI-compatible server.",
      "tachyon"};
  app.set_version_flag("--version", "tachyon " TACHYON_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  tachyon::cli::AddModelCommand(app, &exit_code);
  tachyon::cli::AddTokenizeCommand(app, &exit_code);
  tachyon::cli::AddRunCommand(app, &exit_code);
  tachyon::cli::AddServeCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
