// sluice — run giant sparse MoE models (Kimi K3) by streaming weights from disk.
#include <cstdio>
#include <exception>

#include "base/error.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sluice: exact Kimi K3 inference that streams weights from disk"};
  app.require_subcommand(1);
  sluice::cli::Action action;
  sluice::cli::add_run_command(app, &action);
  sluice::cli::add_logits_command(app, &action);
  sluice::cli::add_make_model_command(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: %s\n", e.what());
    return 1;
  }
}
