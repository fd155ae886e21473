#include "src/core/pipelines.hpp"

#include <algorithm>

#include "kernels/common/check.hpp"

namespace dropbench {

const PipelineSpec& pipeline_spec(Pipeline p) {
  for (const PipelineSpec& s : pipeline_specs())
    if (s.id == p) return s;
  throw UsageError("pipeline: no spec for this pipeline (src/core/pipelines.cpp)");
}

const std::vector<Pipeline>& all_pipelines() {
  static const std::vector<Pipeline> v = [] {
    std::vector<Pipeline> out;
    for (const PipelineSpec& s : pipeline_specs()) out.push_back(s.id);
    return out;
  }();
  return v;
}

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

Pipeline parse_pipeline(const std::string& s) {
  for (const PipelineSpec& p : pipeline_specs())
    if (s == p.name) return p.id;
  throw UsageError("pipeline: '" + s + "' is not a pipeline (allowed: " + pipeline_names_text() + ")");
}

std::vector<Pipeline> parse_pipeline_list(const std::string& csv) {
  std::vector<Pipeline> out;
  size_t start = 0;
  while (start <= csv.size()) {
    const size_t comma = csv.find(',', start);
    const std::string item = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      const Pipeline p = parse_pipeline(item);
      if (std::find(out.begin(), out.end(), p) != out.end())
        throw UsageError("pipelines: '" + item + "' is listed twice");
      out.push_back(p);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.empty()) throw UsageError("pipelines: the list is empty (allowed: " + pipeline_names_text() + ")");
  return out;
}

}  // namespace dropbench
