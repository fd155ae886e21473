// Reading what the user gives: JSON files (configs, machine files, profiles, reports), numbers typed on the
// command line, and the one-line error text they produce. Every JSON file goes through read_json_input, so every
// command refuses the same things the same way: a path that is not a regular file (a FIFO would block, a
// directory reads as nothing), text nested deeper than kMaxJsonDepth (printing such a value recurses once per
// level), and text that is not JSON or holds a number no double can carry (1e309).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "src/core/config.hpp"

namespace dropbench {

// Deepest nesting of arrays and objects accepted in any JSON input; dropbench's own files nest at most 8 deep.
constexpr size_t kMaxJsonDepth = 64;

// The JSON document in file `path`. `who` starts every message (e.g. "config", "merge", "--machine"), `what`
// names what the file should be, for the "allowed" part ("a JSON config file, e.g. configs/quick.json").
// Throws UsageError("<who>: <path>: <why> (allowed: <what>)"), one line, for: missing or unreadable, not a
// regular file, nested deeper than kMaxJsonDepth, not JSON, a number out of double's range.
// `comments`: accept // and /* */ comments (configs do).
json read_json_input(const std::string& path, const std::string& who, const std::string& what, bool comments = false);
// Its two halves: the file's text (the file checks), and that text parsed (the depth and JSON checks).
std::string read_input_file(const std::string& path, const std::string& who, const std::string& what);
json parse_json_input(const std::string& text, const std::string& path, const std::string& who, const std::string& what,
                      bool comments = false);
// The same for JSON text already in memory (a --set value): "" when it is acceptable, else why not.
std::string json_text_problem(std::string_view text, bool comments = false);
// How deep arrays and objects nest in `text` (strings skipped), counting at most up to `limit` + 1.
size_t json_depth(std::string_view text, size_t limit = kMaxJsonDepth);

// The one parser for numbers typed as text (options, fields): a decimal or scientific number, whole text, that
// is finite (no nan, inf, or a value past double's range). nullopt otherwise.
std::optional<double> parse_finite_number(std::string_view text);

// nlohmann's message without its "[json.exception.type_error.302] " tag.
std::string json_error_text(const json::exception& e);

// "path[3].stats" style JSON path helpers for messages.
std::string json_path_key(const std::string& base, const std::string& key);
std::string json_path_index(const std::string& base, size_t i);

// `text` made fit for one line of a message: newlines and control characters become spaces, invalid UTF-8
// becomes '?', and past `max_bytes` it is cut at a character boundary with "...".
std::string one_line(std::string_view text, size_t max_bytes = 4000);

}  // namespace dropbench
