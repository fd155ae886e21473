// What a sweeping command receives from the CLI layer: the common options and the resolved config. Kept free
// of CLI11 so that the core layer (SweepSession) and the block layer can take it without knowing the parser.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/core/config.hpp"
#include "src/core/report.hpp"

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
  std::optional<Shard> shard;           // --shard i/N: only the points with index % N == i
  std::string resume;                   // --resume FILE: keep its points, measure the missing ones
  std::string devices;                  // --devices 0,1,...: one child process (shard) per GPU (cli.cpp)
  std::optional<double> device_memory_gib;  // --device-memory: the GiB a dry run plans against (src/cli/dry_plan.hpp)
  std::string machine;                  // --machine: the model's machine file for a dry run's estimates and memory
  std::string model_clock;              // --model-clock: the SM clock of a dry run's estimates ("" = each kernel's own)
};

// What a sweeping command receives: the resolved config (file + --set + common overrides applied and
// validated), the run context JSON (tool, git, host, device...), and argv.
struct RunContext {
  CommonOptions opts;
  Config cfg;
  json context;
  std::vector<std::string> argv;
  json resume_doc;  // the --resume report, already checked against this run (command, config, version, device)
  // Print the table in the requested format to stdout (and nothing else goes to stdout).
  void print_table(const Table& t) const;
};

}  // namespace dropbench
