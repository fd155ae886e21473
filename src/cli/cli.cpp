#include "src/cli/cli.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/context.hpp"

namespace dropbench {

// The command table: one line per subcommand.
Command make_devices_command();
Command make_philox_command();
Command make_rng_command();
Command make_dropout_command();
Command make_gemm_command();
Command make_attention_command();
Command make_run_command();
Command make_compare_command();
Command make_model_command();
Command make_recommend_command();
Command make_profile_command();

namespace {

std::vector<Command> all_commands() {
  return {
      make_devices_command(),
      make_philox_command(),
      make_rng_command(),
      make_dropout_command(),
      make_gemm_command(),
      make_attention_command(),
      make_run_command(),
      make_compare_command(),
      make_model_command(),
      make_recommend_command(),
      make_profile_command(),
  };
}

void add_common_options(CLI::App& sub, CommonOptions& o) {
  sub.add_option("--config", o.config_path, "JSON config (configs/*.json); default: the built-in quick config");
  sub.add_option("--set", o.sets,
                 "Override a config field: --set workload.sq=8192, --set sweep.sq=[2048,4096], "
                 "--set sweep.sq=pow2:2K:64K, --set sweep.sq=range:1024:8192:1024 (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  sub.add_option("-o,--output", o.output, "Write the JSON report here (rewritten atomically after every point)");
  sub.add_option("--format", o.format, "Table format on stdout")->check(CLI::IsMember({"md", "json", "csv"}));
  sub.add_option("--device", o.device, "CUDA device index");
  sub.add_option("--seed", o.seed, "Philox key (64-bit); overrides workload.seed");
  sub.add_option("--offset", o.offset, "Philox counter word 3 (32-bit); overrides workload.offset");
  sub.add_option("--min-samples", o.min_samples, "Keep at least this many samples per measurement");
  sub.add_option("--min-time", o.min_time, "Seconds of samples before the noise criterion may stop");
  sub.add_option("--max-noise", o.max_noise, "Stop when the relative stdev is at most this (0.005 = 0.5%)");
  sub.add_flag("--cold", o.cold, "Flush the L2 cache before every sample");
  sub.add_flag("-q,--quiet", o.quiet, "No progress lines on stderr");
  sub.add_flag("--dry-run", o.dry_run, "Expand and walk the sweep (NVTX ranges included) without touching a GPU");
}

Config resolve_config(const CommonOptions& o) {
  Config cfg = o.config_path.empty() ? builtin_config() : load_config(o.config_path);
  for (const std::string& s : o.sets) apply_override(cfg, s);
  // Common flags go through the same validation as config fields.
  if (o.seed) apply_override(cfg, fmt::format("workload.seed={}", *o.seed));
  if (o.offset) apply_override(cfg, fmt::format("workload.offset={}", *o.offset));
  if (o.min_samples) apply_override(cfg, fmt::format("measure.min_samples={}", *o.min_samples));
  if (o.min_time) apply_override(cfg, fmt::format("measure.min_time={}", *o.min_time));
  if (o.max_noise) apply_override(cfg, fmt::format("measure.max_noise={}", *o.max_noise));
  if (o.cold) apply_override(cfg, "measure.cold=true");
  return cfg;
}

void check_output_path(const std::string& path) {
  if (path.empty()) return;
  const auto dir = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(dir))
    throw UsageError(fmt::format("--output: directory '{}' does not exist", dir.string()));
}

}  // namespace

void require_gpu(int device) {
  const int n = device_count();
  if (n == 0)
    throw NoDeviceError(
        "no CUDA device found: this command measures on an NVIDIA GPU (use --dry-run to walk the sweep without one)");
  if (device < 0 || device >= n)
    throw UsageError(fmt::format("--device: {} is out of range (allowed: 0..{})", device, n - 1));
  DB_CUDA(cudaSetDevice(device));
}

int run_cli(int argc, char** argv) {
  CLI::App app{
      "dropbench: measure what attention dropout costs on Hopper GPUs, and how to hide it.\n"
      "Philox RNG, mask-tensor vs seeded dropout, QKV GEMM, attention, and the baseline / fused / overlap /\n"
      "chunked pipelines, with nvbench-style statistics, JSON reports and NVTX ranges.",
      "dropbench"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(DROPBENCH_VERSION));
  app.footer("Run `dropbench <command> --help` for what each command measures. Exit codes: 0 ok, 1 CUDA/runtime "
             "failure, 2 bad input or no GPU.");

  CommonOptions opts;
  std::vector<Command> cmds = all_commands();
  std::vector<CLI::App*> subs;
  for (Command& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    sub->footer(c.help);
    if (c.sweeps) add_common_options(*sub, opts);
    if (c.add_options) c.add_options(*sub);
    subs.push_back(sub);
  }

  std::vector<std::string> args(argv, argv + argc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help/version (rc 0) or the parse error
    return rc == 0 ? 0 : 2;
  }

  try {
    for (size_t i = 0; i < cmds.size(); ++i) {
      if (!subs[i]->parsed()) continue;
      RunContext ctx;
      ctx.opts = opts;
      ctx.argv = args;
      if (cmds[i].sweeps) {
        ctx.cfg = resolve_config(opts);
        check_output_path(opts.output);
        if (!opts.dry_run) require_gpu(opts.device);
        ctx.context = make_context(args, opts.dry_run ? -1 : opts.device);
        ctx.context["dry_run"] = opts.dry_run;
      }
      return cmds[i].run(ctx);
    }
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "dropbench: %s\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dropbench: error: %s\n", e.what());
    return 2;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "dropbench: CUDA failure: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dropbench: failure: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace dropbench
