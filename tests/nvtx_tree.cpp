#include "nvtx_tree.hpp"

#include <fstream>
#include <istream>
#include <sstream>

namespace nvtx_tree {

namespace {

std::string at_line(std::size_t line_no, const std::string& msg) {
  return "nvtx log line " + std::to_string(line_no) + ": " + msg;
}

// Open ranges of one domain: the path from the root down to the innermost open range, as indices.
struct DomainState {
  std::vector<std::size_t> open;  // child indices from the root
  std::vector<std::size_t> open_lines;
};

Range& innermost(Range& root, const DomainState& st) {
  Range* cur = &root;
  for (std::size_t i : st.open) cur = &cur->children[i];
  return *cur;
}

void render_into(std::string& out, const Range& r, int depth) {
  for (const Range& c : r.children) {
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += c.name;
    out += '\n';
    render_into(out, c, depth + 1);
  }
}

}  // namespace

std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 1 >= s.size()) throw ParseError("dangling backslash in \"" + std::string(s) + "\"");
    switch (s[++i]) {
      case '\\': out += '\\'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: throw ParseError("bad escape \\" + std::string(1, s[i]) + " in \"" + std::string(s) + "\"");
    }
  }
  return out;
}

Forest parse(std::istream& in, const ParseOptions& opt) {
  Forest forest;
  std::map<std::string, DomainState> states;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string_view v = line;
    try {
      if (v.substr(0, 5) == "push ") {
        std::string_view rest = v.substr(5);
        auto tab = rest.find('\t');
        if (tab == std::string_view::npos) throw ParseError("push without a tab before the name");
        std::string domain = unescape(rest.substr(0, tab));
        std::string name = unescape(rest.substr(tab + 1));
        auto [it, fresh] = forest.try_emplace(domain);
        if (fresh) it->second.name = domain;
        DomainState& st = states[domain];
        Range& parent = innermost(it->second, st);
        parent.children.push_back(Range{name, {}});
        st.open.push_back(parent.children.size() - 1);
        st.open_lines.push_back(line_no);
      } else if (v.substr(0, 4) == "pop ") {
        if (v.find('\t') != std::string_view::npos) throw ParseError("tab in a pop line");
        std::string domain = unescape(v.substr(4));
        auto st = states.find(domain);
        if (st == states.end() || st->second.open.empty())
          throw ParseError("unbalanced pop: no open range in domain \"" + domain + "\"");
        st->second.open.pop_back();
        st->second.open_lines.pop_back();
      } else {
        throw ParseError("expected \"push <domain>\\t<name>\" or \"pop <domain>\", got \"" + line + "\"");
      }
    } catch (const ParseError& e) {
      throw ParseError(at_line(line_no, e.what()));
    }
  }
  if (!opt.allow_open_at_end) {
    for (const auto& [domain, st] : states) {
      if (st.open.empty()) continue;
      const Range& open = innermost(forest.at(domain), st);
      throw ParseError(at_line(st.open_lines.back(), "range \"" + open.name + "\" in domain \"" + domain +
                                                          "\" is never popped (" +
                                                          std::to_string(st.open.size()) + " open at end)"));
    }
  }
  return forest;
}

Forest parse_text(std::string_view text, const ParseOptions& opt) {
  std::istringstream in{std::string(text)};
  return parse(in, opt);
}

Forest parse_file(const std::string& path, const ParseOptions& opt) {
  std::ifstream in(path);
  if (!in) throw ParseError("cannot open nvtx log " + path);
  return parse(in, opt);
}

std::string render(const Range& root) {
  std::string out;
  render_into(out, root, 0);
  return out;
}

std::string render(const Forest& forest) {
  std::string out;
  for (const auto& [domain, root] : forest) {
    out += "[" + domain + "]\n";
    out += render(root);
  }
  return out;
}

const Range& domain_root(const Forest& forest, const std::string& domain) {
  auto it = forest.find(domain);
  if (it == forest.end()) throw std::out_of_range("no NVTX ranges in domain \"" + domain + "\"");
  return it->second;
}

std::vector<std::string> child_names(const Range& r) {
  std::vector<std::string> names;
  names.reserve(r.children.size());
  for (const Range& c : r.children) names.push_back(c.name);
  return names;
}

const Range* find_child(const Range& r, std::string_view name) {
  for (const Range& c : r.children)
    if (c.name == name) return &c;
  return nullptr;
}

const Range* find_path(const Range& r, const std::vector<std::string>& path) {
  const Range* cur = &r;
  for (const auto& step : path) {
    cur = find_child(*cur, step);
    if (!cur) return nullptr;
  }
  return cur;
}

std::size_t count_descendants(const Range& r) {
  std::size_t n = r.children.size();
  for (const Range& c : r.children) n += count_descendants(c);
  return n;
}

}  // namespace nvtx_tree
