// sluice — run giant sparse MoE models (Kimi K3) by streaming weights from disk.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/escape.h"
#include "base/read_fault.h"
#include "cli/commands.h"

namespace sluice::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

Command::Command(std::string name, std::string help, Setup setup) {
  command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
}

}  // namespace sluice::cli

namespace {

// "sluice: run: --model is required": the argument parser's errors in the
// shape of every other error, naming the subcommand being parsed.
int parse_error(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::string where;
  for (const CLI::App* sub : app.get_subcommands()) where = sub->get_name();
  std::fprintf(stderr, "sluice: %s%s%s (see sluice %s--help)\n", where.c_str(), where.empty() ? "" : ": ", e.what(),
               where.empty() ? "" : (where + " ").c_str());
  return e.get_exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: exact Kimi K3 inference that streams weights from disk"};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION + " (git " + SLUICE_GIT_HASH + ")");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<sluice::cli::Action>> actions;
  auto& reg = sluice::cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  sluice::cli::Action chosen;
  for (auto& entry : reg) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.help);
    actions.push_back(std::make_unique<sluice::cli::Action>());
    sluice::cli::Action* slot = actions.back().get();
    entry.setup(*sub, slot);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e);
  }
  try {
    sluice::arm_read_faults_from_env();  // tests inject read faults through SLUICE_FAULT_READ
    for (size_t i = 0; i < reg.size(); i++)
      if (app.got_subcommand(reg[i].name) && *actions[i]) return (*actions[i])();
    return 0;
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "sluice: %s\n", sluice::escape_control(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sluice: out of memory (a size in the input or --ram-budget exceeds what this machine has)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", sluice::escape_control(e.what()).c_str());
    return 1;
  }
}
