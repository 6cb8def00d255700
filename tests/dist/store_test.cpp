// Note [Meeting in the store] in dist/store.h, over a file store: a peer's key with another
// WORLD_SIZE is named as the disagreement even when the peer has already exited (as a peer
// that found the disagreement first does), and a gone peer's key with the same WORLD_SIZE
// is named as an earlier job's, with the command that clears it. A live peer's disagreement
// carries no advice about the store.
#include "dist/store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "dist/local_process.h"
#include "tensor/error.h"

namespace fitgrad::dist {
namespace {
namespace fs = std::filesystem;

// The pid of a child that has exited and been reaped: a process that is gone.
long gone_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// meet_in_store for rank 0 of `world_size` after rank 1's key `peer` was written; its error.
std::string refusal(const std::string& peer, int world_size) {
  const fs::path dir =
      fs::temp_directory_path() / ("fitgrad_store_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string spec = "file:" + dir.string();
  const auto store = open_store(spec, std::chrono::seconds(5));
  store->set("fitgrad.rank.1", {peer.begin(), peer.end()});
  std::string what = "(no error)";
  try {
    meet_in_store(*store, spec, 0, world_size, std::chrono::seconds(5));
  } catch (const Error& e) {
    what = e.what();
  }
  fs::remove_all(dir);
  return what;
}

TEST(MeetInStore, AGonePeerWithAnotherWorldSizeIsNamedAsTheDisagreement) {
  const long pid = gone_pid();
  const std::string what = refusal(std::to_string(pid) + " " + host_name() + " 3", 2);
  EXPECT_NE(what.find("the ranks disagree on WORLD_SIZE: rank 1 (pid " + std::to_string(pid)),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("this one) has 2"), std::string::npos) << what;
  EXPECT_NE(what.find("If pid " + std::to_string(pid) + " is an earlier job's"), std::string::npos)
      << what;
}

// A peer that runs on this host (this test's own pid) is no earlier job's: no store advice.
TEST(MeetInStore, ALivePeerWithAnotherWorldSizeGetsNoStoreAdvice) {
  const std::string what = refusal(std::to_string(::getpid()) + " " + host_name() + " 3", 2);
  EXPECT_NE(what.find("the ranks disagree on WORLD_SIZE"), std::string::npos) << what;
  EXPECT_EQ(what.find("earlier job"), std::string::npos) << what;
}

TEST(MeetInStore, AGonePeerWithTheSameWorldSizeIsAnEarlierJobs) {
  const long pid = gone_pid();
  const std::string what = refusal(std::to_string(pid) + " " + host_name() + " 2", 2);
  EXPECT_NE(
      what.find("holds an earlier job's keys (rank 1's, written by pid " + std::to_string(pid)),
      std::string::npos)
      << what;
  EXPECT_NE(what.find("rm -r "), std::string::npos) << what;
}

}  // namespace
}  // namespace fitgrad::dist
