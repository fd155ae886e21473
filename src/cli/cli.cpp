#include "src/cli/cli.hpp"
#include "src/cli/dry_plan.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <csignal>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/context.hpp"
#include "src/core/input.hpp"
#include "src/core/interrupt.hpp"
#include "src/core/merge.hpp"
#include "src/core/sweep_session.hpp"

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
Command make_merge_command();
// cmd_merge.cpp: reads and merges `inputs` (--devices joins its children's shard reports with it).
Report merge_report_files(const std::vector<std::string>& inputs);

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
      make_merge_command(),
  };
}

// The numeric common options as typed. CLI11 would convert them itself, but it wraps --seed -1 to 2^64-1 and
// reports a failed conversion without a range; as text they go through the config's own field rules instead.
struct RawNumbers {
  std::optional<std::string> seed, offset, device, min_samples, min_time, max_noise, shard;
};

void add_common_options(CLI::App& sub, CommonOptions& o, RawNumbers& raw) {
  sub.add_option("--config", o.config_path, "JSON config (configs/*.json); default: the built-in quick config");
  sub.add_option("--set", o.sets,
                 "Override a config field: --set workload.sq=8192, --set sweep.sq=[2048,4096], "
                 "--set sweep.sq=pow2:2K:64K, --set sweep.sq=range:1024:8192:1024 (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  sub.add_option("-o,--output", o.output, "Write the JSON report here (rewritten atomically after every point)");
  sub.add_option("--format", o.format, "Table format on stdout")->check(CLI::IsMember({"md", "json", "csv"}));
  sub.add_option("--device", raw.device, "CUDA device index (0..count-1)")->type_name("INT");
  sub.add_option("--seed", raw.seed, "Philox key, 0..2^64-1, decimal or 0x hex; overrides workload.seed")
      ->type_name("UINT64");
  sub.add_option("--offset", raw.offset, "Philox counter word 3, 0..2^32-1, decimal or 0x hex; overrides workload.offset")
      ->type_name("UINT32");
  sub.add_option("--min-samples", raw.min_samples, "Keep at least this many samples per measurement (1..1000000)")
      ->type_name("INT");
  sub.add_option("--min-time", raw.min_time, "Seconds of samples before the noise criterion may stop (0..3600)")
      ->type_name("FLOAT");
  sub.add_option("--max-noise", raw.max_noise, "Stop when the relative stdev is at most this (0.005 = 0.5%; (0, 1])")
      ->type_name("FLOAT");
  sub.add_flag("--cold", o.cold, "Flush the L2 cache before every sample");
  sub.add_flag("-q,--quiet", o.quiet, "No progress lines on stderr");
  sub.add_flag("--dry-run", o.dry_run, "Expand and walk the sweep (NVTX ranges included) without touching a GPU");
  sub.add_option("--device-memory", o.device_memory_gib,
                 "With --dry-run: GiB of free device memory to plan against (default: the --machine file's memory_gib, "
                 "else 139, an idle H200's)")
      ->type_name("GIB")
      ->check(finite_number(0.001, 1048576.0));
  sub.add_option("--machine", o.machine,
                 "With --dry-run: the model's machine file (configs/machines/*.json) for the estimates and its memory")
      ->type_name("FILE");
  sub.add_option("--model-clock", o.model_clock,
                 "With --dry-run: the SM clock of every modelled kernel: model (each kernel's own: the profile's "
                 "measured clock, the machine's max or sustained; the default), max, sustained, or MHz (100..3000), "
                 "e.g. a measured step's clock")
      ->type_name("CLOCK");
  sub.add_option("--shard", raw.shard,
                 "Measure only the points with index % N == i (round-robin slice; `dropbench merge` joins the shards)")
      ->type_name("i/N");
  sub.add_option("--resume", o.resume,
                 "Keep the points of this report (same command, config, version, device) and measure the missing "
                 "ones; -o defaults to this file")
      ->type_name("FILE");
  sub.add_option("--devices", o.devices,
                 "Run one child process per GPU (comma list, e.g. 0,1,2,3), each a --shard, and merge them into -o")
      ->type_name("LIST");
}

// `flag TEXT` = `--set key=TEXT`, so flags, config and --set share one rule; the message names the flag.
void apply_flag(Config& cfg, const std::string& flag, const std::string& key, const std::string& text) {
  // Past 2^64 a decimal word would parse as a double ("1e+20 must be a uint64"); the seed and offset rules
  // take digit strings too, with a digit-by-digit range check.
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const bool word = key == "workload.seed" || key == "workload.offset";
  const std::string value = digits && word ? json(text).dump() : text;
  const std::string assignment = key + "=" + value;
  try {
    apply_override(cfg, assignment);
  } catch (const UsageError& e) {
    std::string msg = e.what();
    for (const std::string& prefix : {"--set " + assignment + ": ", key + ": "})
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    // The rule quotes text values ("abc"); the flag's value was typed without quotes.
    if (const size_t q = msg.find(json(text).dump()); q != std::string::npos) msg.replace(q, text.size() + 2, text);
    throw UsageError(flag + ": " + msg);
  }
}

Config resolve_config(CommonOptions& o, const RawNumbers& raw) {
  Config cfg = o.config_path.empty() ? builtin_config() : load_config(o.config_path);
  for (const std::string& s : o.sets) apply_override(cfg, s);
  // Common flags go through the same validation as config fields.
  if (raw.seed) apply_flag(cfg, "--seed", "workload.seed", *raw.seed);
  if (raw.offset) apply_flag(cfg, "--offset", "workload.offset", *raw.offset);
  if (raw.min_samples) apply_flag(cfg, "--min-samples", "measure.min_samples", *raw.min_samples);
  if (raw.min_time) apply_flag(cfg, "--min-time", "measure.min_time", *raw.min_time);
  if (raw.max_noise) apply_flag(cfg, "--max-noise", "measure.max_noise", *raw.max_noise);
  if (o.cold) apply_override(cfg, "measure.cold=true");
  if (raw.seed) o.seed = cfg.workload.seed;
  if (raw.offset) o.offset = cfg.workload.offset;
  if (raw.min_samples) o.min_samples = cfg.measure.min_samples;
  if (raw.min_time) o.min_time = cfg.measure.min_time;
  if (raw.max_noise) o.max_noise = cfg.measure.max_noise;
  return cfg;
}

// The device count is known only with a GPU (require_gpu checks the upper end); the form is checked here.
int parse_device(const std::string& text) {
  int d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || end != text.data() + text.size() || d < 0)
    throw UsageError(fmt::format("--device: '{}' is not a device index (allowed: an integer 0..count-1)", text));
  return d;
}

// "--shard i/N": 0 <= i < N.
Shard parse_shard(const std::string& text) {
  const char* allowed = "(allowed: i/N with 0 <= i < N, e.g. 0/4)";
  const size_t slash = text.find('/');
  size_t i = 0, n = 0;
  auto num = [](const std::string& t, size_t& v) {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size();
  };
  if (slash == std::string::npos || !num(text.substr(0, slash), i) || !num(text.substr(slash + 1), n) || n == 0 ||
      i >= n)
    throw UsageError(fmt::format("--shard: '{}' is not a shard {}", text, allowed));
  return Shard{i, n};
}

// "--devices 0,1,3": distinct device indices.
std::vector<int> parse_devices(const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int d = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || d < 0 ||
        std::find(out.begin(), out.end(), d) != out.end())
      throw UsageError(fmt::format("--devices: '{}' is not a list of distinct device indices (allowed: e.g. 0,1,2,3)", text));
    out.push_back(d);
    start = comma + 1;
  }
  return out;
}

// A word as the shell takes it back (the resume line is meant to be pasted).
std::string shell_quote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") ==
                        std::string::npos)
    return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// argv without the options named in `drop` (each with its value: "--x v" or "--x=v").
std::vector<std::string> without_options(const std::vector<std::string>& args, const std::vector<std::string>& drop) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    bool skip = false;
    for (const std::string& d : drop) {
      if (args[i] == d) {
        skip = true;
        ++i;  // its value
        break;
      }
      if (args[i].rfind(d + "=", 0) == 0) {
        skip = true;
        break;
      }
    }
    if (!skip) out.push_back(args[i]);
  }
  return out;
}

// The one line an interrupted sweep prints: what it kept, where, and the command that resumes it.
void print_interrupted(const Interrupted& e, const CommonOptions& o, const std::vector<std::string>& args) {
  const SweepOutcome& w = last_sweep_outcome();
  const std::string stop = w.stopped_at ? fmt::format(" at point {} (not kept)", *w.stopped_at) : std::string();
  if (o.output.empty()) {
    std::fprintf(stderr, "dropbench: %s%s after %zu of %zu points; no report written (no -o), nothing to resume\n",
                 e.what(), stop.c_str(), w.measured, w.to_measure);
    return;
  }
  if (!w.wrote_report) {
    std::fprintf(stderr, "dropbench: %s%s after %zu of %zu points; nothing to keep, %s left as it was\n", e.what(),
                 stop.c_str(), w.measured, w.to_measure, o.output.c_str());
    return;
  }
  std::string cmd;
  for (const std::string& a : without_options(args, {"--resume"})) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  cmd += " --resume " + shell_quote(o.output);
  std::fprintf(stderr,
               "dropbench: %s%s after %zu of %zu points; %s holds %zu of %zu (\"complete\": false); resume with: %s\n",
               e.what(), stop.c_str(), w.measured, w.to_measure, o.output.c_str(), w.in_report, w.total_points, cmd.c_str());
}

// The command's own options as given (not the common ones): recorded in context.options, so that --resume
// and merge refuse reports made with, e.g., another --pipelines.
json command_options(const CLI::App& sub, const std::set<const CLI::Option*>& common) {
  json o = json::object();
  for (const CLI::Option* opt : sub.get_options()) {
    if (common.count(opt) || opt->count() == 0 || opt == sub.get_help_ptr()) continue;
    o[opt->get_name()] = opt->results();
  }
  return o;
}

// --resume FILE: the report must be this sweep's (command, resolved config, tool version, device, options,
// shard); -o defaults to it.
ReportFile check_resume_report(const RunContext& ctx, const std::string& command, bool devices) {
  const CommonOptions& o = ctx.opts;
  ReportFile f = read_report_file(o.resume, "--resume");
  json mine = run_identity(command, ctx.cfg, ctx.context);
  json theirs = report_identity(f.doc, "--resume", f.path);
  if (devices) theirs["device"] = mine["device"];  // each child compares its own device
  const std::vector<std::string> diffs = identity_differences(theirs, mine);
  if (!diffs.empty())
    throw UsageError(fmt::format("--resume: {} is not a report of this run: {} (allowed: a report of the same command, "
                                 "config, tool version and device)",
                                 f.path, diffs.front()));
  const Shard old = report_shard(f.doc), now = o.shard.value_or(Shard{});
  if (old.count != 1 && (old.count != now.count || old.index != now.index))
    throw UsageError(fmt::format("--resume: {} is shard {}/{}, this run is shard {}/{} (allowed: the same shard, or "
                                 "an unsharded report)",
                                 f.path, old.index, old.count, now.index, now.count));
  return f;
}

void load_resume(RunContext& ctx, const std::string& command) {
  ReportFile f = check_resume_report(ctx, command, /*devices=*/false);
  if (ctx.opts.output.empty()) ctx.opts.output = ctx.opts.resume;
  ctx.resume_doc = std::move(f.doc);
}

// A file's inode and modification time as text ("" when it does not exist): a report rewritten (by rename) is
// another inode.
std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return fmt::format("{}:{}.{}", static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_mtim.tv_sec),
                     static_cast<long>(st.st_mtim.tv_nsec));
}

// Starts this program again with arguments `args` (argv[0] included), its stdout into `out`, in a process group of
// its own: a terminal's Ctrl-C reaches only the parent, which forwards it once (a second signal would make the
// child quit at once, without its report). posix_spawn's status (0: started, pid set).
int spawn_self(std::vector<std::string> args, const std::string& out, pid_t& pid) {
  std::vector<char*> cargv;
  for (std::string& w : args) cargv.push_back(w.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// Waits for every started child (pid >= 0), its exit code into codes (128 + signal when killed); an interrupt
// is forwarded to the children once. Whether it was.
bool wait_children(std::vector<pid_t>& pids, std::vector<int>& codes) {
  bool forwarded = false;
  for (;;) {
    bool live = false;
    for (size_t k = 0; k < pids.size(); ++k) {
      if (pids[k] < 0) continue;
      int st = 0;
      const pid_t r = ::waitpid(pids[k], &st, WNOHANG);
      if (r == 0) {
        live = true;
        continue;
      }
      codes[k] = r < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      pids[k] = -1;
    }
    if (!live) return forwarded;
    if (interrupt_requested() && !forwarded) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, interrupt_signal());
      forwarded = true;
    }
    ::usleep(20000);
  }
}

// The shard reports this run's children wrote, merged into `output` (incomplete when fewer than n were written).
Report merge_shards(const std::vector<std::string>& present, size_t n, const std::string& output) {
  Report merged = merge_report_files(present);
  merged.set_output(output);
  if (present.size() < n) {
    merged.sweep().complete = false;
    merged.sweep().incomplete_reason = {{"kind", "merge"},
                                        {"message", fmt::format("{} of {} shard reports were written", present.size(), n)}};
  }
  merged.write();
  return merged;
}

// --devices: one child per device, the same command line with --device d --shard k/N -o <out>.shards/...;
// SIGINT/SIGTERM are forwarded; the shard reports are merged into -o (incomplete when a child failed).
int run_on_devices(const CommonOptions& o, const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  const std::vector<int> devs = parse_devices(o.devices);
  if (o.shard) throw UsageError("--devices: cannot be combined with --shard (each device runs one shard of the sweep)");
  if (o.output.empty()) throw UsageError("--devices: needs -o FILE (the merged report; the shards go to FILE.shards/)");
  if (!o.dry_run) {  // fail here, once, rather than in every child
    const int count = device_count();
    if (count == 0) require_gpu(0);
    for (int d : devs)
      if (d >= count) throw UsageError(fmt::format("--devices: {} is out of range (allowed: 0..{})", d, count - 1));
  }
  const std::string dir = o.output + ".shards";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("--devices: cannot create {} ({})", dir, ec.message()));

  install_interrupt_handlers();
  const std::vector<std::string> base = without_options(args, {"--devices", "--device", "-o", "--output"});
  const size_t n = devs.size();
  std::vector<std::string> reports(n), outs(n);
  // What each shard report was before the children ran: a file an earlier run left there and no child of this
  // run rewrote (every child refused, or failed before its first point) is not part of this run's report.
  std::vector<std::string> before(n);
  for (size_t k = 0; k < n; ++k) before[k] = file_identity(fmt::format("{}/shard-{}-of-{}.json", dir, k, n));
  std::vector<pid_t> pids(n, -1);
  std::vector<int> codes(n, -1);
  for (size_t k = 0; k < n; ++k) {
    reports[k] = fmt::format("{}/shard-{}-of-{}.json", dir, k, n);
    outs[k] = fmt::format("{}/shard-{}-of-{}.out", dir, k, n);
    std::vector<std::string> a = base;
    for (const std::string& w : {std::string("--device"), std::to_string(devs[k]), std::string("--shard"),
                                 fmt::format("{}/{}", k, n), std::string("-o"), reports[k]})
      a.push_back(w);
    const int rc = spawn_self(a, outs[k], pids[k]);
    if (rc != 0) {
      pids[k] = -1;
      codes[k] = 1;
      std::fprintf(stderr, "dropbench: --devices: cannot start the child for device %d: %s\n", devs[k], std::strerror(rc));
    }
  }
  const bool forwarded = wait_children(pids, codes);
  // The shards' tables, in shard order.
  for (const std::string& f : outs) {
    std::ifstream in(f, std::ios::binary);
    std::cout << in.rdbuf();
  }
  std::cout << std::flush;

  int code = 0;
  std::string failed;
  for (size_t k = 0; k < n; ++k)
    if (codes[k] != 0) {
      failed += fmt::format("{}shard {} (device {}) exit {}", failed.empty() ? "" : ", ", k, devs[k], codes[k]);
      if (code == 0) code = codes[k];
    }
  if (forwarded) code = 128 + interrupt_signal();

  std::vector<std::string> present;
  for (size_t k = 0; k < n; ++k) {
    const std::string now = file_identity(reports[k]);
    if (!now.empty() && now != before[k]) present.push_back(reports[k]);  // written by this run's child
  }
  const std::string why = failed.empty() ? "interrupted" : failed;
  if (present.empty()) {
    std::fprintf(stderr, "dropbench: --devices: %s; no shard wrote a report, so %s was not written\n", why.c_str(),
                 o.output.c_str());
    return code != 0 ? code : 1;
  }
  const Report merged = merge_shards(present, n, o.output);
  const size_t have = merged.points().size() + merged.skipped().size();
  if (code != 0)
    std::fprintf(stderr, "dropbench: --devices: %s; %s holds %zu of %zu points (\"complete\": %s), shard reports in %s\n",
                 why.c_str(), o.output.c_str(), have, merged.sweep().total_points,
                 merged.sweep().complete ? "true" : "false", dir.c_str());
  return code;
}

// A command's exit code, unless what it wrote to stdout did not all arrive (a full disk, a closed stdout, a
// reader that went away): then the error, and a non-zero code.
int stdout_checked(int code) {
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good()) return code;
  const int err = errno;
  throw OutputError(fmt::format("stdout: the output was not all written ({}){}", err ? std::strerror(err) : "write error",
                                code != 0 ? fmt::format("; the command had failed with exit {}", code) : std::string()));
}

std::string command_list(const std::vector<Command>& cmds) {
  std::string s;
  for (const Command& c : cmds) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

// One line for any CLI11 parse error: CLI11's own report is two lines without the prefix, and a failed
// conversion names no type.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e, const std::vector<Command>& cmds) {
  std::string msg = e.what();
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands()) sub = s;
  const std::string help = sub ? fmt::format("dropbench {} --help", sub->get_name()) : "dropbench --help";
  if (!sub && e.get_name() == "RequiredError")
    return fmt::format("a command is required (allowed: {})", command_list(cmds));
  if (const std::string conv = "Could not convert: "; msg.rfind(conv, 0) == 0) {
    const size_t eq = msg.find(" = ", conv.size());
    if (eq != std::string::npos) {
      const std::string name = msg.substr(conv.size(), eq - conv.size()), value = msg.substr(eq + 3);
      const CLI::Option* opt = sub ? sub->get_option_no_throw(name) : nullptr;
      const std::string type = opt ? opt->get_type_name() : "value";
      msg = fmt::format("{}: '{}' is not a valid {} (allowed: see `{}`)", name, value, type, help);
    }
  } else {
    msg += fmt::format(" (see `{}`)", help);
  }
  for (char& ch : msg)
    if (ch == '\n') ch = ' ';
  return msg;
}

}  // namespace

// The report is first written after a point has been measured: a path that cannot take it must fail now.
void check_output_path(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  const char* allowed = "(allowed: a file path in an existing, writable directory, e.g. report.json)";
  if (path.empty()) throw UsageError(fmt::format("{}: \"\" is not a file path {}", option, allowed));
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw UsageError(fmt::format("{}: '{}' is a directory {}", option, path, allowed));
  // The report replaces the file by rename(); onto a device or a pipe (/dev/null, /dev/stdout) that would
  // replace the node itself.
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw UsageError(fmt::format("{}: '{}' is not a regular file {}", option, path, allowed));
  const auto dir = fs::absolute(path).parent_path();
  if (!fs::is_directory(dir, ec))
    throw UsageError(fmt::format("{}: directory '{}' does not exist {}", option, dir.string(), allowed));
  // access(W_OK) says yes to root on /proc; creating a file, as the report writer does, is the real test.
  const std::string probe = fmt::format("{}.probe.{}", path, static_cast<long>(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 && errno != EEXIST)
    throw UsageError(fmt::format("{}: cannot create a file in '{}' ({}) {}", option, dir.string(),
                                 std::strerror(errno), allowed));
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

CLI::Validator finite_number(double lo, double hi) {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const std::optional<double> v = parse_finite_number(text);
        if (!v) return fmt::format("'{}' is not a finite number (allowed: {})", one_line(text, 40), range);
        if (*v < lo || *v > hi) return fmt::format("{} is out of range (allowed: {})", one_line(text, 40), range);
        return {};
      },
      "NUMBER in " + range);
}

void require_gpu(int device) {
  const int n = device_count();
  if (n == 0)
    throw NoDeviceError(kNoGpuMessage);
  if (device < 0 || device >= n)
    throw UsageError(fmt::format("--device: {} is out of range (allowed: 0..{})", device, n - 1));
  DB_CUDA(cudaSetDevice(device));
}

namespace {

// The report context of a sweep on `device` (-1: none): the machine, whether it is a dry run, the options given.
json sweep_context(const std::vector<std::string>& args, int device, const CommonOptions& opts, const CLI::App& sub,
                   const std::set<const CLI::Option*>& common) {
  json c = make_context(args, device);
  c["dry_run"] = opts.dry_run;
  c["options"] = command_options(sub, common);
  return c;
}

// A sweep command's context: config, device and shard, output and resume checks, the GPU. A run over several
// devices is started here and its exit code returned; otherwise nullopt, with ctx and opts ready for the command.
std::optional<int> prepare_sweep(RunContext& ctx, CommonOptions& opts, const RawNumbers& raw, const Command& cmd,
                                 const CLI::App& sub, const std::set<const CLI::Option*>& common,
                                 const std::vector<std::string>& args) {
  if (raw.device) opts.device = parse_device(*raw.device);
  if (raw.shard) opts.shard = parse_shard(*raw.shard);
  ctx.cfg = resolve_config(opts, raw);  // also fills opts.seed, opts.offset, ... from the checked values
  const bool output_given = sub.get_option("--output")->count() > 0;
  if (!opts.devices.empty()) {
    if (!opts.resume.empty() && opts.output.empty()) opts.output = opts.resume;
    if (output_given || !opts.output.empty()) check_output_path(opts.output);
    // The children would each refuse a report of another run: refused here, once, before any child.
    if (!opts.resume.empty()) {
      RunContext probe;
      probe.argv = args;
      probe.cfg = ctx.cfg;
      probe.opts = opts;
      probe.opts.shard.reset();
      probe.context = sweep_context(args, -1, opts, sub, common);
      if (!opts.dry_run) probe.context.erase("device");  // the children's device is compared by them
      check_resume_report(probe, cmd.name, /*devices=*/true);
    }
    return run_on_devices(opts, args);
  }
  if (output_given || !opts.output.empty()) check_output_path(opts.output);
  check_plan_options(opts);
  if (cmd.check) cmd.check(ctx.cfg, opts);
  if (!opts.dry_run) require_gpu(opts.device);
  ctx.context = sweep_context(args, opts.dry_run ? -1 : opts.device, opts, sub, common);
  ctx.opts = opts;
  if (!ctx.opts.resume.empty()) {
    load_resume(ctx, cmd.name);
    check_output_path(ctx.opts.output);
  }
  opts = ctx.opts;
  return std::nullopt;
}

// The exit code of a command's failure, after its one line on stderr: 128 + the signal for an interrupt, 2 for bad
// input or no GPU, 1 for a CUDA or runtime failure (a broken stdout pipe: 128 + SIGPIPE). Anything else is rethrown.
int failure_exit(std::exception_ptr failure, const CommonOptions& opts, const std::vector<std::string>& args) {
  try {
    std::rethrow_exception(failure);
  } catch (const Interrupted& e) {
    print_interrupted(e, opts, args);
    return 128 + e.signal;
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "dropbench: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dropbench: error: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const OutputError& e) {
    std::fprintf(stderr, "dropbench: error: %s\n", one_line(e.what()).c_str());
    return interrupt_signal() == SIGPIPE ? 128 + SIGPIPE : 1;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "dropbench: CUDA failure: %s\n", one_line(e.what()).c_str());
    return 1;
  } catch (const json::exception& e) {
    // Every JSON input is checked where it is read, naming its file and field; this is the net under those checks.
    std::fprintf(stderr, "dropbench: error: a JSON input has a field of an unexpected type: %s (allowed: the files as "
                 "dropbench writes them)\n", one_line(json_error_text(e)).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dropbench: failure: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{
      "dropbench: measure what attention dropout costs on Hopper GPUs, and how to hide it.\n"
      "Philox RNG, mask-tensor vs seeded dropout, QKV GEMM, attention, and the baseline / fused / overlap /\n"
      "chunked pipelines, with nvbench-style statistics, JSON reports and NVTX ranges.",
      "dropbench"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(DROPBENCH_VERSION));
  app.footer("Run `dropbench <command> --help` for what each command measures. Exit codes: 0 ok, 1 CUDA/runtime "
             "failure (compare: a regression past --fail-on-regression), 2 bad input or no GPU, 128 + the signal "
             "when interrupted (130, 143) or writing to a closed pipe (141).");

  CommonOptions opts;
  RawNumbers raw;
  std::vector<Command> cmds = all_commands();
  std::vector<CLI::App*> subs;
  std::set<const CLI::Option*> common;
  for (Command& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    sub->footer(c.help);
    if (c.sweeps) add_common_options(*sub, opts, raw);
    for (const CLI::Option* opt : std::as_const(*sub).get_options()) common.insert(opt);
    if (c.add_options) c.add_options(*sub);
    subs.push_back(sub);
  }

  std::vector<std::string> args(argv, argv + argc);
  // The top level has flags only, so its first word that is not a flag must be a command. CLI11 would say
  // "A subcommand is required" for a misspelt one.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] == '-') continue;
    if (std::none_of(cmds.begin(), cmds.end(), [&](const Command& c) { return c.name == a; })) {
      std::fprintf(stderr, "dropbench: error: unknown command '%s' (allowed: %s)\n", a.c_str(),
                   command_list(cmds).c_str());
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "dropbench: error: %s\n", parse_error_line(app, e, cmds).c_str());
    return 2;
  }

  try {
    for (size_t i = 0; i < cmds.size(); ++i) {
      if (!subs[i]->parsed()) continue;
      RunContext ctx;
      ctx.argv = args;
      if (cmds[i].sweeps) {
        if (const std::optional<int> code = prepare_sweep(ctx, opts, raw, cmds[i], *subs[i], common, args)) return *code;
      }
      ctx.opts = opts;
      return stdout_checked(cmds[i].run(ctx));
    }
  } catch (...) {
    return failure_exit(std::current_exception(), opts, args);
  }
  return 2;
}

}  // namespace dropbench
