// Note [A pid is a process's] in dist/local_process.h: a live process runs; a thread's id,
// which kill(id, 0) accepts, does not; nor does a zombie or a reaped child.
#include "dist/local_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace fitgrad::dist {
namespace {

TEST(LocalProcess, AThreadsIdIsNoProcess) {
  EXPECT_TRUE(process_runs(::getpid()));
  std::atomic<long> tid{0};
  std::atomic<bool> done{false};
  std::thread t([&] {
    tid = ::syscall(SYS_gettid);
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(::kill(pid_t(tid.load()), 0), 0);  // what the check was fooled by
  EXPECT_FALSE(process_runs(tid));
  done = true;
  t.join();
}

TEST(LocalProcess, AZombieAndAReapedChildAreGone) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  // Wait for the exit without reaping: the child is a zombie.
  ASSERT_EQ(::waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(process_runs(child));
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_runs(child));
  EXPECT_FALSE(process_runs(0));
}

}  // namespace
}  // namespace fitgrad::dist
