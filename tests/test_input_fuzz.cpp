// Every entry point that reads JSON (a config, a machine file, a profile, a report for compare / merge / --resume /
// model --report / profile --power-from) fed generated malformed documents: truncated, nested past the limit, a
// number past double's range, junk, and a value of the wrong type at a random path of a valid document. Each run:
// no crash, no raw library error; a refusal is exit 2 with one line "dropbench: error: ..."; the input file and an
// existing -o file are never touched by a refusal. Broken documents (all but the wrong-type ones) must be refused;
// a wrong type may also be accepted (exit 0) where the command does not read that field.
// The runs are in this process (run_cli), so a crash fails the whole test; a fixed seed makes them repeatable.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/cli.hpp"
#include "test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary | std::ios::trunc) << text; }

struct Outcome {
  int code;
  std::string err;
};

// run_cli with stdout to /dev/null and stderr captured.
Outcome run_in_process(std::vector<std::string> args, const std::string& err_file) {
  args.insert(args.begin(), "dropbench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  const int devnull = ::open("/dev/null", O_WRONLY);
  const int errfd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(devnull, 1);
  ::dup2(errfd, 2);
  const int code = dropbench::run_cli(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  for (int fd : {saved_out, saved_err, devnull, errfd}) ::close(fd);
  return {code, slurp(err_file)};
}

// Every node of `j` as a JSON pointer (the root included).
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) pointers(it.value(), at / it.key(), out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) pointers(j[i], at / i, out);
}

// A value of another type than `v`.
json other_type(const json& v, std::mt19937& rng) {
  const std::vector<json> pool = {json(1.5), json(-1), json(18446744073709551615ull), json("x"), json(true), json(nullptr),
                                  json::array(), json::array({1, "a"}), json::object(), json{{"k", 1}}};
  for (;;) {
    const json& c = pool[rng() % pool.size()];
    if (c.type() != v.type() || (v.is_number() && !c.is_number())) return c;
  }
}

std::string nested(size_t depth, bool arrays) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += arrays ? "[" : "{\"a\":";
  s += "1";
  for (size_t i = 0; i < depth; ++i) s += arrays ? "]" : "}";
  return s;
}

enum class Kind { Broken, WrongType };
struct Doc {
  std::string what;
  std::string text;
  Kind kind;
};

// Malformed versions of `base` (a valid document): `n_type` wrong-type ones, and the broken ones.
std::vector<Doc> generate(const json& base, size_t n_type, size_t n_trunc, size_t n_deep, size_t n_ovf, std::mt19937& rng) {
  std::vector<Doc> docs;
  const std::string text = base.dump(2);
  std::vector<json::json_pointer> ptrs;
  pointers(base, json::json_pointer(), ptrs);
  std::vector<json::json_pointer> numbers, containers;
  for (const auto& p : ptrs) {
    if (base.at(p).is_number()) numbers.push_back(p);
    if (base.at(p).is_structured()) containers.push_back(p);
  }
  // Truncated anywhere before the closing brace (so never valid JSON), including inside a string or a UTF-8 char.
  const size_t last = text.rfind('}');
  for (size_t i = 0; i < n_trunc; ++i) {
    const size_t cut = i == 0 ? 0 : 1 + rng() % (last - 1);
    docs.push_back({"truncated at byte " + std::to_string(cut), text.substr(0, cut), Kind::Broken});
  }
  // Nested past the limit at a random place (65 levels up to 100 000).
  const std::vector<size_t> depths = {65, 200, 5000, 100000};
  for (size_t i = 0; i < n_deep; ++i) {
    const auto& at = containers[rng() % containers.size()];
    const bool arrays = rng() % 2 == 0;
    const size_t depth = depths[rng() % depths.size()];
    json d = base;
    json& c = d.at(at);
    if (c.is_object()) c["deep_fuzz"] = "@@DEEP@@";
    else c.push_back("@@DEEP@@");
    std::string t = d.dump(2);
    t.replace(t.find("\"@@DEEP@@\""), 10, nested(depth, arrays));
    docs.push_back({"nested " + std::to_string(depth) + " deep at " + at.to_string(), t, Kind::Broken});
  }
  // A number past double's range.
  for (size_t i = 0; i < n_ovf && !numbers.empty(); ++i) {
    const auto& at = numbers[rng() % numbers.size()];
    json d = base;
    d.at(at) = "@@OVF@@";
    std::string t = d.dump(2);
    const char* big[] = {"1e309", "-1e400", "123456789e999"};
    t.replace(t.find("\"@@OVF@@\""), 9, big[rng() % 3]);
    docs.push_back({"overflow at " + at.to_string(), t, Kind::Broken});
  }
  // Junk.
  for (const char* j : {"", "   ", "nul", "{", "[1,2", "{\"a\":}", "\xff\xfe{}", "{\"a\":\"\xc3\"}", "1 2", "{}}"})
    docs.push_back({"junk", j, Kind::Broken});
  // The wrong type at a random path (the top level and every path, sampled).
  for (size_t i = 0; i < n_type; ++i) {
    const auto& at = ptrs[i == 0 ? 0 : rng() % ptrs.size()];
    json d = base;
    d.at(at) = other_type(d.at(at), rng);
    docs.push_back({"wrong type at " + at.to_string(), d.dump(2), Kind::WrongType});
  }
  return docs;
}

class Fuzz : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("dropbench_fuzz_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static std::string source(const std::string& rel) { return dropbench_test::source_path(rel); }

  // Feeds every doc to `args` (the document's path replaces "@DOC", an existing -o file "@OUT").
  void feed(const std::string& entry, const json& base, const std::vector<std::string>& args, size_t n_type = 250) {
    std::mt19937 rng(0x5eed + static_cast<unsigned>(entry.size()));
    const std::vector<Doc> docs = generate(base, n_type, 40, 25, 25, rng);
    const std::string doc_path = path("doc.json"), out = path("out.json"), err = path("stderr.txt");
    const std::string keep = "{\"keep\": \"this existing file\"}\n";
    size_t refused = 0, accepted = 0;
    for (const Doc& d : docs) {
      spit(doc_path, d.text);
      spit(out, keep);
      std::vector<std::string> a = args;
      for (std::string& w : a) {
        if (w == "@DOC") w = doc_path;
        if (w == "@OUT") w = out;
      }
      const Outcome o = run_in_process(a, err);
      const std::string where = entry + ", " + d.what;
      EXPECT_EQ(slurp(doc_path), d.text) << where << ": the input was changed";
      if (d.kind == Kind::Broken) EXPECT_EQ(o.code, 2) << where << "\n" << o.err;
      else EXPECT_TRUE(o.code == 0 || o.code == 2) << where << ": exit " << o.code << "\n" << o.err;
      if (o.code == 2) {
        ++refused;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << where << "\n" << o.err;
        EXPECT_EQ(o.err.rfind("dropbench: error: ", 0), 0u) << where << "\n" << o.err;
        EXPECT_EQ(o.err.find("json.exception"), std::string::npos) << where << "\n" << o.err;
        EXPECT_EQ(slurp(out), keep) << where << ": a refused run touched -o";
      } else {
        ++accepted;
      }
      if (::testing::Test::HasFailure()) return;  // one document's failures are enough to read
    }
    std::printf("%s: %zu documents, %zu refused, %zu accepted (wrong type where the field is not read)\n", entry.c_str(),
                docs.size(), refused, accepted);
  }

  // A dry-run report of a small sweep, and the arguments that made it (for --resume).
  static json base_report(std::vector<std::string>& sweep) {
    sweep = {"gemm", "--dry-run", "-q", "--set", "sweep.sq=[64,128]", "--set", "sweep.embed=[4096]", "--set",
             "sweep.dtype=[fp8]"};
    std::vector<std::string> a = sweep;
    a.push_back("-o");
    a.push_back(path("base.json"));
    EXPECT_EQ(run_in_process(a, path("stderr.txt")).code, 0);
    return json::parse(slurp(path("base.json")));
  }

  static fs::path dir_;
};
fs::path Fuzz::dir_;

TEST_F(Fuzz, Config) {
  feed("config", json::parse(slurp(source("configs/quick.json"))),
       {"gemm", "--dry-run", "-q", "--config", "@DOC", "-o", "@OUT"});
}

TEST_F(Fuzz, MachineFile) {
  feed("machine", json::parse(slurp(source("configs/machines/h200.json"))), {"model", "--machine", "@DOC"});
  feed("machine (dry run)", json::parse(slurp(source("configs/machines/h200.json"))),
       {"rng", "--dry-run", "-q", "--set", "sweep.rounds=[7]", "--set", "sweep.threshold_bits=[8]", "--set",
        "sweep.layout=[tile]", "--machine", "@DOC", "-o", "@OUT"}, 60);
}

TEST_F(Fuzz, Profile) {
  feed("profile", json::parse(slurp(source("configs/profiles/h200.json"))), {"model", "--profile", "@DOC"});
}

TEST_F(Fuzz, ReportForCompare) {
  std::vector<std::string> sweep;
  const json base = base_report(sweep);
  feed("compare", base, {"compare", "@DOC", path("base.json")});
}

TEST_F(Fuzz, ReportForMerge) {
  std::vector<std::string> sweep;
  const json base = base_report(sweep);
  feed("merge", base, {"merge", "@DOC", "-o", "@OUT"});
}

TEST_F(Fuzz, ReportForResume) {
  std::vector<std::string> sweep;
  json base = base_report(sweep);
  // Half the points: a resume has something to measure.
  base["points"].erase(base["points"].begin() + 1);
  base["complete"] = false;
  sweep.insert(sweep.end(), {"--resume", "@DOC", "-o", "@OUT"});
  feed("--resume", base, sweep);
}

TEST_F(Fuzz, ReportForModel) {
  feed("model --report", json::parse(slurp(source("tests/fixtures/model/report_run.json"))),
       {"model", "--report", "@DOC"});
}

TEST_F(Fuzz, ReportForPowerFit) {
  feed("profile --power-from", json::parse(slurp(source("tests/fixtures/power/run_power.json"))),
       {"profile", "--power-from", "@DOC", "--out", "@OUT"});
}

}  // namespace
