#include "src/core/interrupt.hpp"

#include <csignal>
#include <string>

namespace dropbench {
namespace {
volatile std::sig_atomic_t g_signal = 0;
// The first signal asks the sweep to stop after the current sample; a second one (a measurement stuck outside
// the sample loop, an impatient user) takes the default action at once. signal() and raise() are async-signal-safe.
extern "C" void on_signal(int sig) {
  if (g_signal != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}
}  // namespace

Interrupted::Interrupted(int sig)
    : std::runtime_error("interrupted by " + std::string(sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT"
                                                                                                  : "a signal")),
      signal(sig) {}

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}
bool interrupt_requested() { return g_signal != 0; }
int interrupt_signal() { return static_cast<int>(g_signal); }
void request_interrupt(int sig) { g_signal = sig; }
void clear_interrupt() { g_signal = 0; }
void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted(static_cast<int>(g_signal));
}

}  // namespace dropbench
