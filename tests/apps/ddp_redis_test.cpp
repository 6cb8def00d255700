// Ranks that meet in a Redis server, as a job across hosts does (Note [Rendezvous stores] in
// dist/rendezvous.h), with the built `fitgrad` on one host: two launchers of two ranks train
// as one launcher of four, through `--rdzv_endpoint`, bit for bit, and a job removes its keys
// so that the next one meets there too, while a killed job's keys are refused; a store that fails is
// named within bounded times (Note [A store that stops answering] in dist/store.h): a server
// that is absent, one killed while the ranks wait in it, and one that accepts but never
// answers. Needs redis-server (tools/install-deps.sh installs it); `make multihost-check`
// runs the same job across network namespaces.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/apps/ddp_helpers.h"

namespace {

using namespace fitgrad::ddp_test;
using Clock = std::chrono::steady_clock;

// A TCP port on 127.0.0.1 that nothing listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t n = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Whether something accepts connections on 127.0.0.1:port.
bool accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

class DdpRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shell("command -v redis-server > /dev/null") != 0)
      GTEST_SKIP() << "redis-server is not installed (tools/install-deps.sh installs it)";
    dir_ = fresh_dir("redis");
    data_ = write_corpus(dir_);
  }
  void TearDown() override {
    if (server_ > 0) {
      ::kill(server_, SIGKILL);
      ::waitpid(server_, nullptr, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // Starts a Redis server on a free port; returns once it accepts connections.
  int start_server() {
    const int port = free_port();
    server_ = ::fork();
    if (server_ == 0) {
      const std::string log = (dir_ / "redis.log").string();
      const std::string cmd = fmt::format(
          "exec redis-server --bind 127.0.0.1 --port {} --save '' --appendonly no > {} 2>&1", port,
          log);
      ::execlp("sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (!accepts(port)) {
      EXPECT_LT(Clock::now(), end) << read_text(dir_ / "redis.log");
      if (Clock::now() >= end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return port;
  }
  // Rank 0 of a job of 2 whose rank 1 never comes, meeting in `store`; its exit code and the
  // seconds it took. With kill_server_on, the server on that port is killed once the rank waits
  // in it (its key is there), and the seconds count from the kill.
  std::pair<int, double> lone_rank(const std::string& store, int kill_server_on = 0) {
    const std::string cmd = "FITGRAD_STORE=" + store +
                            " RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 "
                            "MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 exec " +
                            kCli + " train " + train_flags(data_, 2, 1, 2) +
                            " --ddp_timeout 60 --output_dir " + (dir_ / "out").string() + " > " +
                            (dir_ / "rank0.log").string() + " 2>&1";
    auto start = Clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (kill_server_on > 0) {
      const std::string waiting = fmt::format(
          "redis-cli -p {} --raw exists fitgrad.rank.0 2> /dev/null | grep -qx 1", kill_server_on);
      while (shell(waiting) != 0 && Clock::now() - start < std::chrono::seconds(30))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      start = Clock::now();
      ::kill(server_, SIGKILL);
      ::waitpid(server_, nullptr, 0);
      server_ = -1;
    }
    int code = wait_for(pid, std::chrono::seconds(40));
    if (code == -1) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    return {code, std::chrono::duration<double>(Clock::now() - start).count()};
  }
  fs::path dir_, data_;
  pid_t server_ = -1;
};

TEST_F(DdpRedis, TwoLaunchersMeetingInRedisTrainAsOneLauncherOfFour) {
  const std::string flags = train_flags(data_, 2, 1, 3);
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node 4 train " + flags + " --output_dir " +
                  (dir_ / "one").string() + " > " + (dir_ / "one.log").string() + " 2>&1"),
            0)
      << read_text(dir_ / "one.log");
  const int port = start_server();
  auto host = [&](int k) {
    return fmt::format(
        "FITGRAD_GLOO_HOSTNAME=127.0.0.1 {} launch --nnodes 2 --node_rank {} --nproc_per_node 2 "
        "--rdzv_endpoint 127.0.0.1:{} train {} --output_dir {} > {} 2>&1",
        kCli, k, port, flags, (dir_ / "two").string(),
        (dir_ / fmt::format("host{}.log", k)).string());
  };
  ASSERT_EQ(shell(fmt::format("({}) & other=$!; {}; mine=$?; wait $other; exit $((mine | $?))",
                              host(1), host(0))),
            0)
      << read_text(dir_ / "host0.log") << read_text(dir_ / "host1.log");
  const auto a = losses(dir_ / "one"), b = losses(dir_ / "two");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b);  // the same 4 ranks reduce in the same order: equal bit for bit
  // The job removed its keys (Note [A job removes its keys]): a second job on the same
  // server trains, as torchrun's users reuse a port.
  fs::remove_all(dir_ / "two");
  ASSERT_EQ(shell(fmt::format("({}) & other=$!; {}; mine=$?; wait $other; exit $((mine | $?))",
                              host(1), host(0))),
            0)
      << read_text(dir_ / "host0.log") << read_text(dir_ / "host1.log");
  EXPECT_EQ(losses(dir_ / "two"), a);
}

// A rank killed in the rendezvous leaves its key: the next job there is refused, naming the
// store and the command that clears it.
TEST_F(DdpRedis, AKilledJobsKeysAreRefusedWithTheFix) {
  const int port = start_server();
  const std::string store = fmt::format("redis:127.0.0.1:{}", port);
  const std::string env = fmt::format(
      "FITGRAD_STORE={} RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT=29500 ",
      store);
  const std::string train =
      kCli + " train " + train_flags(data_, 2, 1, 2) + " --ddp_timeout 20 --output_dir ";
  // The first job's rank is killed once it waits in the store (its key is there).
  EXPECT_EQ(shell(fmt::format("env {}{}{} > {} 2>&1 & rank=$!; for i in $(seq 600); do "
                              "redis-cli -p {} --raw exists fitgrad.rank.0 | grep -qx 1 && break; "
                              "sleep 0.05; done; kill -9 $rank; wait $rank",
                              env, train, (dir_ / "a").string(), (dir_ / "a.log").string(), port)),
            128 + SIGKILL);
  EXPECT_EQ(shell("env " + env + train + (dir_ / "b").string() + " > " + (dir_ / "b.log").string() +
                  " 2>&1"),
            1);
  const std::string log = read_text(dir_ / "b.log");
  EXPECT_NE(log.find("holds an earlier job's keys"), std::string::npos) << log;
  EXPECT_NE(log.find(fmt::format("redis-cli -h 127.0.0.1 -p {} flushdb", port)), std::string::npos)
      << log;
}

TEST_F(DdpRedis, AnAbsentServerIsNamedAtOnce) {
  const auto [code, seconds] = lone_rank(fmt::format("redis:127.0.0.1:{}", free_port()));
  EXPECT_EQ(code, 1);
  EXPECT_LT(seconds, 10);
  const std::string log = read_text(dir_ / "rank0.log");
  EXPECT_NE(log.find("failed a connection"), std::string::npos) << log;
  EXPECT_NE(log.find("Connection refused"), std::string::npos) << log;
}

TEST_F(DdpRedis, AServerKilledWhileTheRanksWaitIsNamedAtOnce) {
  const int port = start_server();
  const auto [code, seconds] = lone_rank(fmt::format("redis:127.0.0.1:{}", port), port);
  EXPECT_EQ(code, 1);
  EXPECT_LT(seconds, 5);  // from the kill; not the --ddp_timeout of 60 s
  const std::string log = read_text(dir_ / "rank0.log");
  // Gloo says "Server closed the connection" or "Connection reset by peer", as it finds out.
  EXPECT_NE(log.find("failed a wait"), std::string::npos) << log;
  EXPECT_NE(log.find("is its server up"), std::string::npos) << log;
}

// A server that accepts connections and never answers (the kernel completes the handshake
// of a socket that listens and never accepts): each request is abandoned after 10 s.
TEST_F(DdpRedis, AServerThatNeverAnswersIsNamedWithinTheRequestBound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t n = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  const auto [code, seconds] = lone_rank(fmt::format("redis:127.0.0.1:{}", ntohs(a.sin_port)));
  ::close(fd);
  EXPECT_EQ(code, 1);
  EXPECT_GE(seconds, 9);
  EXPECT_LT(seconds, 25);
  const std::string log = read_text(dir_ / "rank0.log");
  EXPECT_NE(log.find("did not answer a"), std::string::npos) << log;
  EXPECT_NE(log.find("within 10 s"), std::string::npos) << log;
}

}  // namespace
