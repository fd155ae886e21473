// Parser for nvtx_recorder logs: "push <domain>\t<name>" / "pop <domain>" lines -> one tree of ranges per
// domain. Each domain's events are matched as one push/pop stack (the log does not record threads, so
// ranges pushed concurrently in the SAME domain from several threads cannot be told apart).
#pragma once
#include <cstddef>
#include <iosfwd>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nvtx_tree {

struct Range {
  std::string name;
  std::vector<Range> children;  // in push order

  // An aggregate, so expected trees read as Range{"rng", {Range{"point sq=256", {...}}, ...}}.
  bool operator==(const Range&) const = default;
};

// Bad input: unbalanced pop, range left open at the end (strict mode), malformed line. what() names the
// 1-based line number.
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ParseOptions {
  bool allow_open_at_end = false;  // true: ranges still open at the end of the log are kept, not an error
};

// domain name ("" = default domain) -> synthetic root (name == domain) whose children are the top-level
// ranges of that domain, in order.
using Forest = std::map<std::string, Range>;

Forest parse(std::istream& in, const ParseOptions& opt = {});
Forest parse_text(std::string_view text, const ParseOptions& opt = {});
// Throws ParseError if the file cannot be opened.
Forest parse_file(const std::string& path, const ParseOptions& opt = {});

// Escaping used by the recorder (\\, \t, \n, \r); unescape throws ParseError on a bad escape.
std::string unescape(std::string_view s);

// Indented text, two spaces per level, one range per line; the root itself is not printed.
//   rng
//     point sq=256
//       variant x
std::string render(const Range& root);
// Every domain: a "[domain]" header line ("[]" for the default domain), then render() of its root.
std::string render(const Forest& forest);

// Queries.
const Range& domain_root(const Forest& forest, const std::string& domain);  // throws std::out_of_range
std::vector<std::string> child_names(const Range& r);
// First child with that name, or nullptr.
const Range* find_child(const Range& r, std::string_view name);
// Follows names from r downward, first match at each level; nullptr when a step is missing.
const Range* find_path(const Range& r, const std::vector<std::string>& path);
// Number of ranges in the subtree below r (r itself not counted).
std::size_t count_descendants(const Range& r);

}  // namespace nvtx_tree
