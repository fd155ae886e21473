#include "src/core/pipelines.hpp"

#include <algorithm>

#include "kernels/common/check.hpp"

namespace dropbench {

const PipelineSpec& pipeline_spec(Pipeline p) {
  for (const PipelineSpec& s : pipeline_specs())
    if (s.id == p) return s;
  throw UsageError("pipeline: no spec for this pipeline (src/core/pipelines.cpp)");
}

const std::vector<Pipeline>& all_pipelines() { return pass_pipelines(Pass::Fwd); }

bool applies_to(Pipeline p, Pass pass) {
  const PipelineSpec& s = pipeline_spec(p);
  return pass == Pass::Fwd ? s.fwd : s.train;
}

const std::vector<Pipeline>& pass_pipelines(Pass pass) {
  auto of = [](Pass ps) {
    std::vector<Pipeline> out;
    for (const PipelineSpec& s : pipeline_specs())
      if (applies_to(s.id, ps)) out.push_back(s.id);
    return out;
  };
  static const std::vector<Pipeline> fwd = of(Pass::Fwd), train = of(Pass::Train);
  return pass == Pass::Fwd ? fwd : train;
}

std::string pass_pipeline_names_text(Pass pass) {
  std::string out;
  for (Pipeline p : pass_pipelines(pass)) out += (out.empty() ? "" : ", ") + std::string(pipeline_name(p));
  return out;
}

Pass parse_pass(const std::string& s) {
  if (s == "fwd") return Pass::Fwd;
  if (s == "train") return Pass::Train;
  throw UsageError("workload.pass: '" + s + "' is not a pass (allowed: fwd, train)");
}

const char* pass_name(Pass p) { return p == Pass::Fwd ? "fwd" : "train"; }

const char* pipeline_name(Pipeline p) { return pipeline_spec(p).name; }

std::vector<std::string> pipeline_names() {
  std::vector<std::string> out;
  for (const PipelineSpec& s : pipeline_specs()) out.emplace_back(s.name);
  return out;
}

std::string pipeline_names_text() {
  std::string out;
  for (const std::string& n : pipeline_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Pipeline parse_pipeline(const std::string& s, const std::string& field) {
  for (const PipelineSpec& p : pipeline_specs())
    if (s == p.name) return p.id;
  throw UsageError(field + ": '" + s + "' is not a pipeline (allowed: " + pipeline_names_text() + ")");
}

std::vector<Pipeline> parse_pipeline_list(const std::string& csv, const std::string& field) {
  std::vector<Pipeline> out;
  size_t start = 0;
  while (start <= csv.size()) {
    const size_t comma = csv.find(',', start);
    const std::string item = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      const Pipeline p = parse_pipeline(item, field);
      if (std::find(out.begin(), out.end(), p) != out.end())
        throw UsageError(field + ": '" + item + "' is listed twice");
      out.push_back(p);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.empty()) throw UsageError(field + ": the list is empty (allowed: " + pipeline_names_text() + ")");
  return out;
}

}  // namespace dropbench
