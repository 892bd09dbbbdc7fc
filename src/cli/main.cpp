// sluice — run giant sparse MoE models (Kimi K3) by streaming weights from disk.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

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

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); i++) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); j++) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "sluice runn": CLI11 would say only that a subcommand is required; name the
// word it did not know and the nearest command (or list them all).
bool unknown_command(const std::vector<sluice::cli::CommandEntry>& reg, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::string nearest, all;
  size_t best = 3;  // more edits than this is not a typo
  for (const auto& e : reg) {
    if (e.name == word) return false;
    all += (all.empty() ? "" : ", ") + e.name;
    const size_t d = edit_distance(word, e.name);
    if (d < best || (nearest.empty() && e.name.rfind(word, 0) == 0)) best = std::min(d, best), nearest = e.name;
  }
  std::fprintf(stderr, "sluice: unknown command '%s' (%s%s)\n", sluice::escape_control(word).c_str(),
               nearest.empty() ? "commands: " : "did you mean ", nearest.empty() ? all.c_str() : (nearest + "?").c_str());
  return true;
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
  if (unknown_command(reg, argc, argv)) return 2;
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
