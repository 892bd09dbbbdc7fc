// cli/commands.h — each `sluice` subcommand registers itself on the CLI11 app.
//
// The CLI is a thin client of libsluice: it parses flags, calls the library,
// prints results. Every error reaches main() as an exception and is printed as
// one line on stderr ("sluice: <file>: <problem>") with a non-zero exit code.
//
// A command lives in its own cli/cmd_<name>.cpp and registers itself with
//   static sluice::cli::Command reg("name", "help", [](CLI::App& sub, Action* act) {...});
// The setup function adds options to `sub` and sets `*act` (run after parsing;
// returns the exit code).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sluice::cli {

using Action = std::function<int()>;
using Setup = std::function<void(CLI::App& sub, Action* action)>;

struct Command {
  Command(std::string name, std::string help, Setup setup);
};

struct CommandEntry {
  std::string name, help;
  Setup setup;
};
std::vector<CommandEntry>& command_registry();

}  // namespace sluice::cli
