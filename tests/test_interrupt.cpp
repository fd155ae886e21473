// The interrupt handlers with real signals: one request however it is delivered twice at once (coreutils
// `timeout` signals the child and then its whole process group), a later repeat kills at once.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "src/core/interrupt.hpp"

using namespace dropbench;

TEST(Interrupt, TheSameSignalTwiceAtOnceIsOneRequest) {
  install_interrupt_handlers();
  clear_interrupt();
  // timeout's two copies (to the child, then to its group). Not kill(0, ...): under ctest the group may hold
  // the test driver. A signal sent to oneself is delivered before kill() returns, so the handler runs twice.
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE(interrupt_requested());         // still alive: the second copy did not take the default action
  EXPECT_EQ(interrupt_signal(), SIGTERM);
  EXPECT_THROW(throw_if_interrupted(), Interrupted);
  clear_interrupt();
  EXPECT_FALSE(interrupt_requested());
}

TEST(Interrupt, ARepeatASecondLaterKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_interrupt_handlers();
        clear_interrupt();
        ::raise(SIGINT);
        if (interrupt_signal() != SIGINT) std::_Exit(3);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        ::raise(SIGINT);
        std::_Exit(0);  // not reached: the repeat takes SIGINT's default action
      },
      testing::KilledBySignal(SIGINT), "");
}
