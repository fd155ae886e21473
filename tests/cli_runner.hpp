// Runs the dropbench executable (dropbench_binary(): $DROPBENCH_TEST_BINARY, else the build's) with a
// shell-quoted argument string; stdout and stderr captured separately, exit code decoded. Shared by the CLI-level tests.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_paths.hpp"

namespace dropbench_test {

struct CliResult {
  int code;
  std::string out, err;
};

// `prefix` goes before the executable (e.g. "timeout 20 ").
inline CliResult run_dropbench(const std::string& args, const std::string& prefix = "") {
  static int counter = 0;
  const auto errf = std::filesystem::temp_directory_path() /
                    ("dropbench_test_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = prefix + "'" + dropbench_binary() + "' " + args + " 2>'" + errf.string() + "'";
  CliResult r{};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(errf);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(errf);
  return r;
}

}  // namespace dropbench_test
