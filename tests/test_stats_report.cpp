// Stats, the JSON report (layout + atomic rewrite), tables, number formatting and the progress line.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/core/context.hpp"
#include "src/core/report.hpp"
#include "src/core/stats.hpp"

namespace fs = std::filesystem;
using dropbench::json;

namespace {

// A fresh, empty directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("dropbench_tsr_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const fs::path& p) { return json::parse(slurp(p)); }

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(s);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

dropbench::Stats stats_of(std::vector<double> v) { return dropbench::compute_stats(v); }

dropbench::PointResult make_point(size_t index, json axes) {
  dropbench::PointResult p;
  p.index = index;
  p.axes = std::move(axes);
  p.workload = {{"sq", 4096}, {"dtype", "fp8"}};
  dropbench::VariantResult a;
  a.name = "philox7";
  a.stats = stats_of({1e-3, 1.1e-3, 0.9e-3});
  a.phases.push_back({"qkv", stats_of({4e-4, 5e-4})});
  a.phases.push_back({"mask", stats_of({6e-4})});
  a.derived = {{"GB/s", 1234.5}, {"Gelem/s", 12.34}};
  a.extra = {{"checksum", "0xdeadbeef"}};
  dropbench::VariantResult b;
  b.name = "torch";
  b.peer = true;
  b.stats = stats_of({2e-3, 2e-3});
  b.derived = {{"GB/s", 600.0}};  // no Gelem/s
  p.variants = {a, b};
  p.derived = {{"winner", "philox7"}, {"speedup", 2.0}};
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------------------------------

TEST(Stats, OddCount) {
  const auto s = dropbench::compute_stats({3.0, 1.0, 2.0});
  EXPECT_EQ(s.samples, 3u);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.stdev, 1.0);  // sum of squares 2, / (n-1) = 1
  EXPECT_DOUBLE_EQ(s.rel_stdev, 0.5);
  EXPECT_EQ(s.discarded, 0u);
}

TEST(Stats, EvenCountAveragesMiddlePair) {
  const auto s = dropbench::compute_stats({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(s.samples, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  EXPECT_NEAR(s.stdev, std::sqrt(5.0 / 3.0), 1e-12);  // sample stdev, not population (sqrt(1.25))
  EXPECT_NEAR(s.rel_stdev, std::sqrt(5.0 / 3.0) / 2.5, 1e-12);
}

TEST(Stats, MedianIsNotTheMeanOnSkewedData) {
  const auto s = dropbench::compute_stats({1.0, 1.0, 1.0, 1.0, 100.0});
  EXPECT_DOUBLE_EQ(s.median, 1.0);
  EXPECT_DOUBLE_EQ(s.mean, 20.8);
}

TEST(Stats, SingleSample) {
  const auto s = dropbench::compute_stats({7e-6});
  EXPECT_EQ(s.samples, 1u);
  EXPECT_DOUBLE_EQ(s.median, 7e-6);
  EXPECT_DOUBLE_EQ(s.mean, 7e-6);
  EXPECT_DOUBLE_EQ(s.min, 7e-6);
  EXPECT_DOUBLE_EQ(s.max, 7e-6);
  EXPECT_EQ(s.stdev, 0.0);
  EXPECT_EQ(s.rel_stdev, 0.0);
}

TEST(Stats, EmptyIsAllZeros) {
  const auto s = dropbench::compute_stats({});
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.median, 0.0);
  EXPECT_EQ(s.mean, 0.0);
  EXPECT_EQ(s.stdev, 0.0);
  EXPECT_EQ(s.rel_stdev, 0.0);
}

TEST(Stats, ZeroMeanGivesZeroRelStdev) {
  const auto s = dropbench::compute_stats({-1.0, 1.0});
  EXPECT_GT(s.stdev, 0.0);
  EXPECT_EQ(s.rel_stdev, 0.0);
}

TEST(Stats, TightClusterHasNoCancellation) {
  // Values around 1 with spread 1e-9: a naive sum-of-squares formula loses this entirely.
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(1.0 + ((i % 2) ? 1e-9 : -1e-9));
  const auto s = dropbench::compute_stats(v);
  EXPECT_NEAR(s.stdev, 1e-9, 1e-11);
}

TEST(Stats, RelativeStdevMatchesComputeStats) {
  const std::vector<double> v = {1.0, 1.2, 0.9, 1.05, 0.97};
  EXPECT_NEAR(dropbench::relative_stdev(v), dropbench::compute_stats(v).rel_stdev, 1e-15);
  EXPECT_EQ(dropbench::relative_stdev({2.0}), 0.0);
  EXPECT_EQ(dropbench::relative_stdev({}), 0.0);
}

TEST(Stats, JsonKeysAreFieldNames) {
  auto s = dropbench::compute_stats({1.0, 2.0, 4.0});
  s.discarded = 3;
  s.mean_clock_mhz = 1755.5;
  const json j = dropbench::to_json(s);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  const std::vector<std::string> want = {"samples", "median", "mean",      "min",           "max",
                                         "stdev",   "rel_stdev", "discarded", "mean_clock_mhz"};
  EXPECT_EQ(keys, want);
  EXPECT_EQ(j["samples"].get<size_t>(), 3u);
  EXPECT_DOUBLE_EQ(j["median"].get<double>(), 2.0);
  EXPECT_EQ(j["discarded"].get<size_t>(), 3u);
}

TEST(Stats, JsonRoundTrip) {
  auto s = dropbench::compute_stats({1.25e-4, 1.5e-4, 1.0e-4, 1.75e-4});
  s.discarded = 2;
  s.mean_clock_mhz = 1980.25;
  // Through text too, as a report reader would see it.
  const auto back = dropbench::stats_from_json(json::parse(dropbench::to_json(s).dump()));
  EXPECT_EQ(back.samples, s.samples);
  EXPECT_DOUBLE_EQ(back.median, s.median);
  EXPECT_DOUBLE_EQ(back.mean, s.mean);
  EXPECT_DOUBLE_EQ(back.min, s.min);
  EXPECT_DOUBLE_EQ(back.max, s.max);
  EXPECT_DOUBLE_EQ(back.stdev, s.stdev);
  EXPECT_DOUBLE_EQ(back.rel_stdev, s.rel_stdev);
  EXPECT_EQ(back.discarded, 2u);
  EXPECT_DOUBLE_EQ(back.mean_clock_mhz, 1980.25);
  EXPECT_EQ(dropbench::to_json(back), dropbench::to_json(s));
}

TEST(Stats, FromJsonRejectsNonObject) {
  EXPECT_ANY_THROW(dropbench::stats_from_json(json::array()));
  EXPECT_ANY_THROW(dropbench::stats_from_json(json{{"median", "fast"}}));
}

// ---------------------------------------------------------------------------------------------------
// Atomic write
// ---------------------------------------------------------------------------------------------------

TEST(AtomicWrite, WritesCompleteFileAndLeavesNoTemp) {
  TempDir d;
  const fs::path p = d.path() / "out.json";
  const std::string text(1 << 20, 'x');  // big enough to need more than one write() on some systems
  dropbench::write_file_atomic(p.string(), text);
  EXPECT_EQ(slurp(p), text);
  dropbench::write_file_atomic(p.string(), "second\n");  // replaces, does not append
  EXPECT_EQ(slurp(p), "second\n");
  const auto names = d.names();
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], "out.json");
  for (const auto& n : names) EXPECT_EQ(n.find(".tmp."), std::string::npos) << n;
}

TEST(AtomicWrite, MissingDirectoryThrowsWithPath) {
  TempDir d;
  const fs::path p = d.path() / "no" / "such" / "dir" / "out.json";
  try {
    dropbench::write_file_atomic(p.string(), "{}");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  }
  EXPECT_TRUE(d.names().empty());
}

TEST(AtomicWrite, FailedRenameLeavesTargetAndNoTemp) {
  TempDir d;
  // The target is a non-empty directory: rename(2) fails after the temp file was written.
  const fs::path p = d.path() / "target";
  fs::create_directories(p / "inside");
  EXPECT_THROW(dropbench::write_file_atomic(p.string(), "{}"), std::runtime_error);
  EXPECT_TRUE(fs::is_directory(p));
  for (const auto& n : d.names()) EXPECT_EQ(n.find(".tmp."), std::string::npos) << n;
}

// ---------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------

TEST(Report, DocumentLayoutAndRoundTrip) {
  TempDir d;
  const fs::path p = d.path() / "report.json";
  json context = {{"tool", "dropbench"}, {"version", "0.1.0"}, {"hostname", "node1"}, {"device", {{"sms", 132}}}};
  json config = {{"name", "default"}, {"workload", {{"sq", 4096}}}};
  dropbench::Report r("rng", context, config);
  r.set_output(p.string());
  r.add_point(make_point(0, {{"sq", 2048}, {"rounds", 7}}));
  r.add_skipped({{{"sq", 1048576}, {"rounds", 7}}, "out of memory"});
  r.set_summary({{"R", 0.93}});

  const json j = read_json(p);
  EXPECT_EQ(j, r.to_json());
  // Top-level keys in the documented order.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  const std::vector<std::string> want = {"schema", "schema_version", "command", "context",
                                         "config", "summary",        "points",  "skipped"};
  EXPECT_EQ(keys, want);

  EXPECT_EQ(j["schema"], "dropbench.report");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["command"], "rng");
  EXPECT_EQ(j["context"], context);
  EXPECT_EQ(j["config"], config);
  EXPECT_DOUBLE_EQ(j["summary"]["R"].get<double>(), 0.93);

  ASSERT_EQ(j["points"].size(), 1u);
  const json& pt = j["points"][0];
  EXPECT_EQ(pt["index"], 0);
  EXPECT_EQ(pt["axes"]["sq"], 2048);
  EXPECT_EQ(pt["axes"]["rounds"], 7);
  EXPECT_EQ(pt["workload"]["dtype"], "fp8");
  EXPECT_EQ(pt["derived"]["winner"], "philox7");
  ASSERT_EQ(pt["variants"].size(), 2u);

  const json& va = pt["variants"][0];
  EXPECT_EQ(va["name"], "philox7");
  EXPECT_EQ(va["peer"], false);
  const auto sa = dropbench::stats_from_json(va["stats"]);
  const auto want_a = stats_of({1e-3, 1.1e-3, 0.9e-3});
  EXPECT_EQ(sa.samples, 3u);
  EXPECT_DOUBLE_EQ(sa.median, want_a.median);
  EXPECT_DOUBLE_EQ(sa.stdev, want_a.stdev);
  ASSERT_EQ(va["phases"].size(), 2u);
  EXPECT_EQ(va["phases"][0]["name"], "qkv");
  EXPECT_DOUBLE_EQ(dropbench::stats_from_json(va["phases"][0]["stats"]).median, 4.5e-4);
  EXPECT_EQ(va["phases"][1]["name"], "mask");
  EXPECT_EQ(dropbench::stats_from_json(va["phases"][1]["stats"]).samples, 1u);
  EXPECT_DOUBLE_EQ(va["derived"]["GB/s"].get<double>(), 1234.5);
  EXPECT_EQ(va["extra"]["checksum"], "0xdeadbeef");

  const json& vb = pt["variants"][1];
  EXPECT_EQ(vb["name"], "torch");
  EXPECT_EQ(vb["peer"], true);
  EXPECT_TRUE(vb["phases"].is_array());
  EXPECT_TRUE(vb["phases"].empty());
  EXPECT_TRUE(vb["extra"].is_object());

  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["axes"]["sq"], 1048576);
  EXPECT_EQ(j["skipped"][0]["reason"], "out of memory");
}

TEST(Report, WrittenWithTwoSpaceIndent) {
  TempDir d;
  const fs::path p = d.path() / "r.json";
  dropbench::Report r("dropout", json::object(), json::object());
  r.set_output(p.string());
  r.write();
  const auto lines = split_lines(slurp(p));
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0], "{");
  EXPECT_EQ(lines[1], "  \"schema\": \"dropbench.report\",");
}

TEST(Report, EveryAddRewritesTheFile) {
  TempDir d;
  const fs::path p = d.path() / "sweep.json";
  dropbench::Report r("run", json::object(), json::object());
  r.set_output(p.string());
  EXPECT_FALSE(fs::exists(p));  // nothing written until there is something to write
  for (size_t i = 0; i < 4; ++i) {
    r.add_point(make_point(i, {{"sq", 1024 << i}}));
    const json j = read_json(p);
    ASSERT_EQ(j["points"].size(), i + 1) << "after add_point " << i;
    EXPECT_EQ(j["points"][i]["index"], i);
    EXPECT_EQ(j["points"][i]["axes"]["sq"], 1024 << i);
  }
  r.add_skipped({{{"sq", 999}}, "too big"});
  EXPECT_EQ(read_json(p)["skipped"].size(), 1u);
  r.set_summary({{"best", "overlap"}});
  EXPECT_EQ(read_json(p)["summary"]["best"], "overlap");
  EXPECT_EQ(read_json(p)["points"].size(), 4u);
  for (const auto& n : d.names()) EXPECT_EQ(n.find(".tmp."), std::string::npos) << n;
}

TEST(Report, NoOutputPathWritesNothing) {
  TempDir d;
  const auto cwd = fs::current_path();
  fs::current_path(d.path());
  {
    dropbench::Report r("rng", json::object(), json::object());
    r.add_point(make_point(0, {{"sq", 1}}));
    r.add_skipped({{{"sq", 2}}, "x"});
    r.set_summary({{"a", 1}});
    r.write();
    EXPECT_EQ(r.points().size(), 1u);
    EXPECT_EQ(r.skipped().size(), 1u);
  }
  fs::current_path(cwd);
  EXPECT_TRUE(d.names().empty());
}

TEST(Report, UnwritablePathThrowsFromAddPoint) {
  TempDir d;
  dropbench::Report r("rng", json::object(), json::object());
  r.set_output((d.path() / "missing" / "r.json").string());
  EXPECT_THROW(r.add_point(make_point(0, {{"sq", 1}})), std::runtime_error);
}

// ---------------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------------

namespace {
dropbench::Table small_table() {
  dropbench::Table t;
  t.columns = {"name", "time_us", "note"};
  t.rows = {{"alpha", "1.23", "plain"}, {"b", "1235", "has, comma"}, {"gamma", "12.3", "say \"hi\""}};
  return t;
}
}  // namespace

TEST(Table, Markdown) {
  const std::string md = dropbench::render_markdown(small_table());
  const auto lines = split_lines(md);
  ASSERT_EQ(lines.size(), 5u) << md;
  EXPECT_EQ(lines[0], "| name  | time_us | note       |");
  EXPECT_EQ(lines[1], "| ----- | ------: | ---------- |");
  EXPECT_EQ(lines[2], "| alpha |    1.23 | plain      |");
  EXPECT_EQ(lines[3], "| b     |    1235 | has, comma |");
  EXPECT_EQ(lines[4], "| gamma |    12.3 | say \"hi\"   |");
  for (const auto& l : lines) EXPECT_EQ(l.size(), lines[0].size()) << l;  // aligned in a terminal
}

TEST(Table, MarkdownEscapesPipesAndShortRows) {
  dropbench::Table t;
  t.columns = {"k", "v"};
  t.rows = {{"a|b", "-0.5"}, {"c"}};
  const auto lines = split_lines(dropbench::render_markdown(t));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2], "| a\\|b | -0.5 |");
  EXPECT_EQ(lines[3], "| c    |      |");
}

TEST(Table, CsvQuoting) {
  const std::string csv = dropbench::render_csv(small_table());
  EXPECT_EQ(csv,
            "name,time_us,note\n"
            "alpha,1.23,plain\n"
            "b,1235,\"has, comma\"\n"
            "gamma,12.3,\"say \"\"hi\"\"\"\n");
  dropbench::Table t;
  t.columns = {"a"};
  t.rows = {{"two\nlines"}};
  EXPECT_EQ(dropbench::render_csv(t), "a\n\"two\nlines\"\n");
}

TEST(Table, Json) {
  const json j = dropbench::table_to_json(small_table());
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["name"], "alpha");
  EXPECT_EQ(j[0]["time_us"], "1.23");  // stays a string
  EXPECT_EQ(j[1]["note"], "has, comma");
  std::vector<std::string> keys;
  for (auto it = j[0].begin(); it != j[0].end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, small_table().columns);
}

TEST(Table, RenderDispatch) {
  const auto t = small_table();
  EXPECT_EQ(dropbench::render(t, "md"), dropbench::render_markdown(t));
  EXPECT_EQ(dropbench::render(t, "csv"), dropbench::render_csv(t));
  EXPECT_EQ(json::parse(dropbench::render(t, "json")), dropbench::table_to_json(t));
  EXPECT_THROW(dropbench::render(t, "xml"), std::invalid_argument);
  EXPECT_THROW(dropbench::render(t, ""), std::invalid_argument);
}

TEST(Table, RowWiderThanHeaderIsRejected) {
  dropbench::Table t;
  t.columns = {"a"};
  t.rows = {{"1", "2"}};
  EXPECT_THROW(dropbench::render_markdown(t), std::invalid_argument);
  EXPECT_THROW(dropbench::render_csv(t), std::invalid_argument);
}

TEST(Table, StandardTable) {
  dropbench::Report r("rng", json::object(), json::object());
  r.add_point(make_point(0, {{"sq", 2048}, {"rounds", 7}}));
  r.add_point(make_point(1, {{"sq", 4096}, {"layout", "bits"}}));  // new axis appears later
  r.add_skipped({{{"sq", 1 << 20}}, "too big"});                   // not a table row

  const auto t = dropbench::standard_table(r, {"GB/s", "Gelem/s"});
  const std::vector<std::string> want = {"sq",      "rounds", "layout", "variant", "median_us",
                                         "rel_stdev_%", "samples", "GB/s",   "Gelem/s"};
  EXPECT_EQ(t.columns, want);
  ASSERT_EQ(t.rows.size(), 4u);  // 2 points x 2 variants
  for (const auto& row : t.rows) EXPECT_EQ(row.size(), want.size());

  const auto& r0 = t.rows[0];
  EXPECT_EQ(r0[0], "2048");
  EXPECT_EQ(r0[1], "7");
  EXPECT_EQ(r0[2], "");  // point 0 has no layout axis
  EXPECT_EQ(r0[3], "philox7");
  EXPECT_EQ(r0[4], "1000");   // median 1e-3 s
  EXPECT_EQ(r0[5], "10.0");   // stdev 1e-4 / mean 1e-3
  EXPECT_EQ(r0[6], "3");
  EXPECT_EQ(r0[7], "1235");   // 1234.5 through fmt_num
  EXPECT_EQ(r0[8], "12.3");

  const auto& r1 = t.rows[1];
  EXPECT_EQ(r1[3], "torch");
  EXPECT_EQ(r1[4], "2000");
  EXPECT_EQ(r1[5], "0");
  EXPECT_EQ(r1[6], "2");
  EXPECT_EQ(r1[7], "600");
  EXPECT_EQ(r1[8], "");  // derived value missing for this variant

  EXPECT_EQ(t.rows[2][0], "4096");
  EXPECT_EQ(t.rows[2][1], "");
  EXPECT_EQ(t.rows[2][2], "bits");
}

TEST(Table, StandardTableEmptyReport) {
  dropbench::Report r("rng", json::object(), json::object());
  const auto t = dropbench::standard_table(r, {});
  const std::vector<std::string> want = {"variant", "median_us", "rel_stdev_%", "samples"};
  EXPECT_EQ(t.columns, want);
  EXPECT_TRUE(t.rows.empty());
}

// ---------------------------------------------------------------------------------------------------
// fmt_num
// ---------------------------------------------------------------------------------------------------

TEST(FmtNum, Cases) {
  using dropbench::fmt_num;
  EXPECT_EQ(fmt_num(1234.5), "1235");
  EXPECT_EQ(fmt_num(100.0), "100");
  EXPECT_EQ(fmt_num(9999999.0), "9999999");
  EXPECT_EQ(fmt_num(12.34), "12.3");
  EXPECT_EQ(fmt_num(10.0), "10.0");
  EXPECT_EQ(fmt_num(1.234), "1.23");
  EXPECT_EQ(fmt_num(1.0), "1.00");
  EXPECT_EQ(fmt_num(0.5), "0.500");
  EXPECT_EQ(fmt_num(0.0123), "0.0123");
  EXPECT_EQ(fmt_num(0.001), "0.00100");
  EXPECT_EQ(fmt_num(0.0), "0");
  EXPECT_EQ(fmt_num(-12.34), "-12.3");
  EXPECT_EQ(fmt_num(-0.0123), "-0.0123");
  // Rounding that carries into the next magnitude keeps 3 significant digits.
  EXPECT_EQ(fmt_num(9.996), "10.0");
  EXPECT_EQ(fmt_num(99.96), "100");
  EXPECT_EQ(fmt_num(0.09996), "0.100");
  EXPECT_EQ(fmt_num(0.9996), "1.00");
  // Outside [1e-3, 1e7): scientific.
  EXPECT_EQ(fmt_num(1.234e7), "1.23e+07");
  EXPECT_EQ(fmt_num(0.000123), "1.23e-04");
  EXPECT_EQ(fmt_num(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(fmt_num(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(fmt_num(-std::numeric_limits<double>::infinity()), "-inf");
}

// ---------------------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------------------

TEST(Progress, LinesOnStderr) {
  testing::internal::CaptureStderr();
  dropbench::Progress p(3, false);
  p.step(0, "sq=2048");
  p.step(1, "sq=4096");
  p.done();
  const auto lines = split_lines(testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("[1/3] sq=2048  elapsed ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" s  ETA ?"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("[2/3] sq=4096  elapsed ", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find(" s  ETA "), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("ETA ?"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].substr(lines[1].size() - 2), " s") << lines[1];
  EXPECT_NE(lines[2].find("elapsed"), std::string::npos) << lines[2];
}

TEST(Progress, QuietPrintsNothing) {
  testing::internal::CaptureStderr();
  dropbench::Progress p(2, true);
  p.step(0, "a");
  p.step(1, "b");
  p.done();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// a dropout_p the thresholds cannot represent is named in a warning, and every point's report says
// what was sampled (derived.dropout_effective), whatever the command.
TEST(DropoutEffective, TinyPWarnsAndEveryPointSaysWhatWasSampled) {
  // 0.001 x 2^8 = 0.256 rounds to 0: dropout off.
  const std::string off = dropbench::dropout_warning(0.001, 8);
  EXPECT_NE(off.find("dropout off"), std::string::npos) << off;
  EXPECT_NE(off.find("workload.dropout_p"), std::string::npos);
  // 0.1 at 8 bits samples 26/256 = 0.1016 (1.6 % off): no warning; 0.003 at 8 bits samples 1/256 = 0.0039 (30 %).
  EXPECT_EQ(dropbench::dropout_warning(0.1, 8), "");
  EXPECT_NE(dropbench::dropout_warning(0.003, 8), "");
  EXPECT_EQ(dropbench::dropout_warning(0.001, 16), "");  // 66/65536 = 0.00101
  EXPECT_EQ(dropbench::dropout_warning(0.0, 8), "");     // no dropout asked for
  const dropbench::json de = dropbench::dropout_effective(
      dropbench::json::parse(R"({"dropout_p": 0.1, "threshold_bits": 8})"));
  EXPECT_DOUBLE_EQ(de["p_effective"].get<double>(), 26.0 / 256);
  EXPECT_DOUBLE_EQ(de["keep_effective"].get<double>(), 1 - 26.0 / 256);
  EXPECT_NEAR(de["p_error"].get<double>(), 26.0 / 256 - 0.1, 1e-15);
  EXPECT_EQ(de["drop_threshold"].get<uint32_t>(), 26u);
  EXPECT_TRUE(dropbench::dropout_effective(dropbench::json::parse(R"({"embed": 1})")).is_null());
  dropbench::Report r("rng", dropbench::json::object(), dropbench::json::object());
  dropbench::PointResult p;
  p.workload = dropbench::json::parse(R"({"dropout_p": 0.001, "threshold_bits": 8})");
  r.add_point(p);
  EXPECT_EQ(r.points()[0].derived["dropout_effective"]["p_effective"].get<double>(), 0.0);
}

// a report says in its own key whether the binary came from a modified tree.
TEST(Context, TreeStateFromTheSha) {
  EXPECT_EQ(dropbench::tree_state("0499cab-dirty"), "dirty");
  EXPECT_EQ(dropbench::tree_state("8a8f49b-archive"), "archive");
  EXPECT_EQ(dropbench::tree_state("unknown"), "unknown");
  EXPECT_EQ(dropbench::tree_state(""), "unknown");
  EXPECT_EQ(dropbench::tree_state("3257b59"), "clean");
  EXPECT_EQ(dropbench::tree_state("dirty"), "clean");  // a suffix, not a substring
  const dropbench::json c = dropbench::make_context({"dropbench", "rng"}, -1);
  EXPECT_EQ(c.at("tree").get<std::string>(), dropbench::tree_state(c.at("git_sha").get<std::string>()));
}
