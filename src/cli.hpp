// CLI: CLI11 subcommands. Adding a command = one file src/cmd_<name>.cpp defining `Command make_<name>_command()`
// plus one line in the table in cli.cpp. Common options (--config, --set, -o, --format, --device, --seed,
// --offset, --min-samples, --min-time, --max-noise, --cold, --quiet, --dry-run) are added by the framework
// to every command that declares `sweeps = true`.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config.hpp"
#include "report.hpp"

namespace dropbench {

struct CommonOptions {
  std::string config_path;              // --config FILE ("" = built-in quick config)
  std::vector<std::string> sets;        // --set key=value, in order
  std::string output;                   // -o/--output FILE.json
  std::string format = "md";            // --format md|json|csv (stdout table)
  int device = 0;                       // --device N
  std::optional<uint64_t> seed;         // --seed
  std::optional<uint32_t> offset;       // --offset
  std::optional<int64_t> min_samples;   // --min-samples
  std::optional<double> min_time;       // --min-time (s)
  std::optional<double> max_noise;      // --max-noise (fraction, e.g. 0.005)
  bool cold = false;                    // --cold
  bool quiet = false;                   // --quiet
  bool dry_run = false;                 // --dry-run: expand the sweep, walk it (NVTX ranges too), no GPU
};

// What a sweeping command receives: the resolved config (file + --set + common overrides applied and
// validated), the run context JSON (tool, git, host, device...), and argv.
struct RunContext {
  CommonOptions opts;
  Config cfg;
  json context;
  std::vector<std::string> argv;
  // Print the table in the requested format to stdout (and nothing else goes to stdout).
  void print_table(const Table& t) const;
};

struct Command {
  std::string name;      // subcommand name
  std::string summary;   // one line for `dropbench --help`
  std::string help;      // footer of `dropbench <name> --help`: what it measures, how to read it, examples
  bool sweeps = true;    // gets the common options and a RunContext
  // Adds command-specific options to `app` (may capture state through shared_ptr).
  std::function<void(CLI::App& app)> add_options;
  // Runs the command; returns the exit code. Throw UsageError for bad input (-> exit 2).
  std::function<int(RunContext& ctx)> run;
};

// Entry point used by main(): parses, dispatches, maps exceptions to exit codes
// (0 ok, 1 CUDA/runtime failure, 2 bad input or no GPU).
int run_cli(int argc, char** argv);

// Throws NoDeviceError ("no CUDA device: ...") when there is no usable GPU; selects `device`.
void require_gpu(int device);

}  // namespace dropbench
