#include "src/core/input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kernels/common/check.hpp"

namespace dropbench {

namespace {

// Larger than any report a sweep writes (a 10 000-point run report is ~100 MB); past it the text is not ours.
constexpr off_t kMaxJsonBytes = off_t{1} << 30;

// Length of the UTF-8 sequence starting at s[i] (1..4), or 0 when it is not a valid one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  return n;
}

}  // namespace

std::string json_error_text(const json::exception& e) {
  std::string msg = e.what();
  if (msg.rfind("[json.exception", 0) == 0)
    if (const size_t p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
  return msg;
}

size_t json_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string json_text_problem(std::string_view text, bool comments) {
  if (json_depth(text) > kMaxJsonDepth)
    return fmt::format("nested more than {} levels deep", kMaxJsonDepth);
  try {
    const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/true, comments);
    static_cast<void>(parsed);
  } catch (const json::exception& e) {
    return "not JSON: " + json_error_text(e);
  }
  return {};
}

namespace {
UsageError input_error(const std::string& who, const std::string& path, const std::string& why, const std::string& what) {
  return UsageError(one_line(fmt::format("{}: {}: {} (allowed: {})", who, path, why, what)));
}
}  // namespace

std::string read_input_file(const std::string& path, const std::string& who, const std::string& what) {
  auto bad = [&](const std::string& why) { return input_error(who, path, why, what); };
  if (path.empty()) throw UsageError(fmt::format("{}: \"\" is not a file name (allowed: {})", who, what));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw bad(errno == ENOENT ? std::string("no such file, cannot open it")
                              : fmt::format("cannot open ({})", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw bad("is a directory");
  // A FIFO would block the read until a writer comes (forever, for a typo); a device reads without end.
  if (!S_ISREG(st.st_mode)) throw bad("is not a regular file (a pipe, device or socket)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw bad(fmt::format("cannot open ({})", std::strerror(errno)));
  std::string text;
  {
    struct stat fst {};
    if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {  // replaced between stat and open
      ::close(fd);
      throw bad("is not a regular file (a pipe, device or socket)");
    }
    if (fst.st_size > kMaxJsonBytes) {
      ::close(fd);
      throw bad(fmt::format("is {} bytes, more than {} (not a file dropbench writes)", static_cast<long long>(fst.st_size),
                            static_cast<long long>(kMaxJsonBytes)));
    }
    text.reserve(static_cast<size_t>(fst.st_size));
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        throw bad(fmt::format("read error ({})", std::strerror(err)));
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (static_cast<off_t>(text.size()) > kMaxJsonBytes) {
        ::close(fd);
        throw bad("grew past 1 GiB while it was read");
      }
    }
    ::close(fd);
  }
  return text;
}

json parse_json_input(const std::string& text, const std::string& path, const std::string& who, const std::string& what,
                      bool comments) {
  if (json_depth(text) > kMaxJsonDepth)
    throw input_error(who, path, fmt::format("nested more than {} levels deep", kMaxJsonDepth), what);
  try {
    return json::parse(text, nullptr, /*allow_exceptions=*/true, comments);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past double's range
    throw input_error(who, path, "not JSON: " + json_error_text(e), what);
  }
}

json read_json_input(const std::string& path, const std::string& who, const std::string& what, bool comments) {
  return parse_json_input(read_input_file(path, who, what), path, who, what, comments);
}

std::optional<double> parse_finite_number(std::string_view text) {
  // from_chars takes "nan", "inf" and "infinity" too, and hex with a format flag; only decimal digits count here.
  if (text.empty()) return std::nullopt;
  size_t start = text[0] == '+' ? 1 : 0;  // from_chars takes '-' but not '+'
  if (start == text.size()) return std::nullopt;
  const std::string_view body = text.substr(start);
  if (body[0] == '+') return std::nullopt;
  const size_t digit = body[0] == '-' ? 1 : 0;
  if (digit >= body.size() || !(std::isdigit(static_cast<unsigned char>(body[digit])) || body[digit] == '.'))
    return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v, std::chars_format::general);
  if (ec != std::errc() || end != body.data() + body.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string json_path_key(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}
std::string json_path_index(const std::string& base, size_t i) { return fmt::format("{}[{}]", base, i); }

std::string one_line(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_len(text, i);
    if (out.size() + std::max<size_t>(n, 1) > max_bytes) {
      out += "...";
      break;
    }
    if (n == 0) {
      out += '?';
      ++i;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (n == 1 && (c < 0x20 || c == 0x7f)) out += ' ';
    else out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace dropbench
