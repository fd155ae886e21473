// CLI: CLI11 subcommands. Adding a command = one file src/cmd_<name>.cpp defining `Command make_<name>_command()`
// plus one line in the table in cli.cpp. Common options (--config, --set, -o, --format, --device, --seed,
// --offset, --min-samples, --min-time, --max-noise, --cold, --quiet, --dry-run, --shard, --resume, --devices) are
// added by the framework to every command that declares `sweeps = true`.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/core/run_context.hpp"

namespace dropbench {

struct Command {
  std::string name;      // subcommand name
  std::string summary;   // one line for `dropbench --help`
  std::string help;      // footer of `dropbench <name> --help`: what it measures, how to read it, examples
  bool sweeps = true;    // gets the common options and a RunContext
  // Adds command-specific options to `app` (may capture state through shared_ptr).
  std::function<void(CLI::App& app)> add_options;
  // Runs the command; returns the exit code. Throw UsageError for bad input (-> exit 2).
  std::function<int(RunContext& ctx)> run;
  // Optional, sweeping commands: input it refuses on any device, checked before a GPU is required (throws
  // UsageError).
  std::function<void(const Config& cfg, const CommonOptions& o)> check;
};

// Entry point used by main(): parses, dispatches, maps exceptions to exit codes
// (0 ok, 1 CUDA/runtime failure, 2 bad input or no GPU).
int run_cli(int argc, char** argv);

// Throws NoDeviceError ("no CUDA device: ...") when there is no usable GPU; selects `device`.
void require_gpu(int device);

}  // namespace dropbench
