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

// The one check of an output path (-o of every command, merge included), made before anything is read or
// measured: a file path in an existing, writable directory; not a directory, device or pipe (the report replaces
// the file by rename). `option` names it in the message ("--output"). Throws UsageError.
void check_output_path(const std::string& path, const std::string& option = "--output");

// A CLI11 check for a number option: the text must be a finite number (core's parse_finite_number: no nan, inf,
// 1e999) in [lo, hi]; the message names the range.
CLI::Validator finite_number(double lo, double hi);

// What every command that needs a GPU says without one (after "dropbench: "), exit 2: one line, the same for
// `devices` and the measuring commands, so the README can quote it.
constexpr const char* kNoGpuMessage =
    "no CUDA device found: this command needs an NVIDIA GPU and its driver (use --dry-run to walk a sweep without one)";

// Throws NoDeviceError ("no CUDA device: ...") when there is no usable GPU; selects `device`.
void require_gpu(int device);

}  // namespace dropbench
