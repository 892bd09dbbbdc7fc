// cli/commands.h — each `sluice` subcommand registers itself on the CLI11 app.
//
// The CLI is a thin client of libsluice: it parses flags, calls the library,
// prints results. Every error reaches main() as an exception and is printed as
// one line on stderr ("sluice: <file>: <problem>") with a non-zero exit code.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace sluice::cli {

// A registered subcommand's action, run after parsing; returns the exit code.
using Action = std::function<int()>;

// Each adds its subcommand to `app` and stores its action in `*action` when chosen.
void add_logits_command(CLI::App& app, Action* action);
void add_run_command(CLI::App& app, Action* action);
void add_make_model_command(CLI::App& app, Action* action);

}  // namespace sluice::cli
