// SIGINT / SIGTERM / SIGPIPE during a sweep: the handler only sets a flag (async-signal-safe); the harness checks it
// between samples and throws Interrupted, and the sweep writes what it has as an incomplete report.
#pragma once
#include <stdexcept>

namespace dropbench {

struct Interrupted : std::runtime_error {
  explicit Interrupted(int sig);
  int signal;
};

void install_interrupt_handlers();  // SIGINT, SIGTERM and SIGPIPE set the flag (idempotent); another SIGINT/SIGTERM
                                    // >= 1 s later kills at once
bool interrupt_requested();
int interrupt_signal();              // the signal that set the flag, 0 if none
void request_interrupt(int sig);     // sets the flag as the handler would (tests, test hooks)
void clear_interrupt();
void throw_if_interrupted();         // throws Interrupted when the flag is set

}  // namespace dropbench
