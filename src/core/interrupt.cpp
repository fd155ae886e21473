#include "src/core/interrupt.hpp"

#include <time.h>

#include <csignal>
#include <string>

namespace dropbench {
namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile long long g_first_ns = 0;  // when the flag was set by a signal (CLOCK_MONOTONIC)
// A repeat within this long is the same request: coreutils `timeout` sends its signal to the child and then to
// the whole process group, so the child gets SIGTERM twice within microseconds (and a job step's launcher may
// forward the scheduler's signal the same way). Taking that second copy as "kill now" lost the incomplete report.
constexpr long long kForceAfterNs = 1'000'000'000;

long long now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe (POSIX)
  return static_cast<long long>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The first signal asks the sweep to stop after the current sample; another one at least a second later (a
// measurement stuck outside the sample loop, an impatient user) takes the default action at once. signal(),
// raise() and clock_gettime() are async-signal-safe.
extern "C" void on_signal(int sig) {
  const long long t = now_ns();
  if (g_signal != 0) {
    if (sig == SIGPIPE) return;  // every later write to the closed pipe raises it again: the first one counts
    if (t - g_first_ns < kForceAfterNs) return;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_first_ns = t;
  g_signal = sig;
}
}  // namespace

Interrupted::Interrupted(int sig)
    : std::runtime_error("interrupted by " + std::string(sig == SIGTERM   ? "SIGTERM"
                                                         : sig == SIGINT  ? "SIGINT"
                                                         : sig == SIGPIPE ? "SIGPIPE (the reader of stdout or stderr went away)"
                                                                          : "a signal")),
      signal(sig) {}

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // A reader that goes away (`| head`) would kill the sweep without its report: the write fails with EPIPE
  // instead, and the sweep stops as for SIGTERM.
  std::signal(SIGPIPE, on_signal);
}
bool interrupt_requested() { return g_signal != 0; }
int interrupt_signal() { return static_cast<int>(g_signal); }
void request_interrupt(int sig) { g_signal = sig; }
void clear_interrupt() { g_signal = 0; }
void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted(static_cast<int>(g_signal));
}

}  // namespace dropbench
