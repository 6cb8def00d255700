// Note [Launchers' variables] in dist/rendezvous.h: a process finds its place in the job from
// torchrun's variables, else Open MPI's, else Slurm's step variables, with the values each
// scheduler documents; a batch script's own variables start no job, and a missing or bad
// variable is named with what sets it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dist/rendezvous.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::dist {
namespace {

using Vars = std::map<std::string, std::string>;

// Sets exactly `vars` among every launcher variable for the test's span, then restores them.
class LauncherEnv {
 public:
  explicit LauncherEnv(const Vars& vars) {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : vars) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~LauncherEnv() {
    for (const char* name : kNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static constexpr const char* kNames[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "FITGRAD_STORE",
                                           "FITGRAD_GLOO_HOSTNAME",
                                           "OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "SLURM_PROCID",
                                           "SLURM_NTASKS",
                                           "SLURM_STEP_NUM_TASKS",
                                           "SLURM_LOCALID",
                                           "SLURM_NODEID",
                                           "SLURM_STEP_TASKS_PER_NODE",
                                           "SLURM_STEP_NODELIST",
                                           "GLOO_SOCKET_IFNAME"};
  std::map<std::string, std::string> saved_;
};

TEST(LauncherEnv, NoLauncherIsOneProcess) {
  LauncherEnv env(Vars{});
  EXPECT_FALSE(dist_env_from_environment());
}

TEST(LauncherEnv, OpenMpisVariablesPlaceTheRank) {
  LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "5"},
                   {"OMPI_COMM_WORLD_SIZE", "8"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                   {"MASTER_ADDR", "10.0.0.1"},
                   {"FITGRAD_GLOO_HOSTNAME", "10.0.0.2"}});
  const std::optional<DistEnv> e = dist_env_from_environment();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "Open MPI");
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->master_port, 29500);             // torchrun's default
  EXPECT_EQ(e->store, "redis:10.0.0.1:29500");  // two hosts meet in Redis
  EXPECT_EQ(e->hostname, "10.0.0.2");
}

TEST(LauncherEnv, TorchrunsVariablesComeFirst) {
  LauncherEnv env({{"RANK", "1"},
                   {"WORLD_SIZE", "2"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "29611"},
                   {"FITGRAD_STORE", "redis:127.0.0.1:6379"},
                   {"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "1"},
                   {"SLURM_STEP_NUM_TASKS", "1"},
                   {"SLURM_PROCID", "0"}});
  const std::optional<DistEnv> e = dist_env_from_environment();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "torchrun");
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 2);
  EXPECT_EQ(e->master_port, 29611);
}

// srun -N 3 --ntasks-per-node ... with 2, 2 and 1 tasks: the third node's task.
TEST(LauncherEnv, SlurmsStepVariablesPlaceTheRankAndFindTheMaster) {
  LauncherEnv env({{"SLURM_PROCID", "4"},
                   {"SLURM_STEP_NUM_TASKS", "5"},
                   {"SLURM_NTASKS", "5"},
                   {"SLURM_LOCALID", "0"},
                   {"SLURM_NODEID", "2"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
                   {"SLURM_STEP_NODELIST", "gpu[07-08,12]"},
                   {"MASTER_PORT", "6379"},
                   {"FITGRAD_GLOO_HOSTNAME", "gpu12"}});
  const std::optional<DistEnv> e = dist_env_from_environment();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "Slurm");
  EXPECT_EQ(e->rank, 4);
  EXPECT_EQ(e->world_size, 5);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_EQ(e->local_world_size, 1);
  EXPECT_EQ(e->master_addr, "gpu07");
  EXPECT_EQ(e->store, "redis:gpu07:6379");
}

TEST(LauncherEnv, SlurmsTasksPerNodeAndHostListsAreReadAsSlurmWritesThem) {
  const std::vector<std::tuple<std::string, int, int>> counts = {
      {"4", 0, 4}, {"2(x3)", 2, 2}, {"2(x3),1", 3, 1}, {"1,3(x2),2", 2, 3}, {"1,3(x2),2", 3, 2}};
  for (const auto& [spec, node, want] : counts) {
    LauncherEnv env({{"SLURM_PROCID", "0"},
                     {"SLURM_STEP_NUM_TASKS", "16"},
                     {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", std::to_string(node)},
                     {"SLURM_STEP_TASKS_PER_NODE", spec},
                     {"SLURM_STEP_NODELIST", "node1,node2"},
                     {"FITGRAD_STORE", "redis:h:1"}});
    const std::optional<DistEnv> e = dist_env_from_environment();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->local_world_size, want) << spec << " node " << node;
    EXPECT_EQ(e->master_addr, "node1");
  }
  for (const char* bad : {"2(x3", "x", "2(x3),", "0", "2(x2)"}) {
    LauncherEnv env({{"SLURM_PROCID", "0"},
                     {"SLURM_STEP_NUM_TASKS", "4"},
                     {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "2"},
                     {"SLURM_STEP_TASKS_PER_NODE", bad},
                     {"SLURM_STEP_NODELIST", "n1"}});
    fitgrad::testing::expect_error([] { dist_env_from_environment(); }, "[dist]",
                                   "SLURM_STEP_TASKS_PER_NODE=" + std::string(bad));
  }
}

// GLOO_SOCKET_IFNAME names the interface whose address the transport binds; a name that is
// no interface is refused with the ones there are.
TEST(LauncherEnv, TheTransportBindsTheInterfaceNamed) {
  const Vars two_hosts = {{"RANK", "0"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "0"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.1"},
                          {"MASTER_PORT", "6379"}};
  {
    Vars v = two_hosts;
    v["GLOO_SOCKET_IFNAME"] = "lo";
    LauncherEnv env(v);
    EXPECT_EQ(dist_env_from_environment()->hostname, "127.0.0.1");
  }
  {
    Vars v = two_hosts;
    v["GLOO_SOCKET_IFNAME"] = "nosuch9";
    LauncherEnv env(v);
    fitgrad::testing::expect_error([] { dist_env_from_environment(); },
                                   "[dist] GLOO_SOCKET_IFNAME=nosuch9: no such interface", "lo");
  }
}

// sbatch's script has SLURM_PROCID 0 and SLURM_NTASKS 4 but no step: it is one process.
TEST(LauncherEnv, ABatchScriptIsNoRank) {
  LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
  EXPECT_FALSE(dist_env_from_environment());
}

TEST(LauncherEnv, AMissingOrBadVariableIsNamedWithWhatSetsIt) {
  {
    LauncherEnv env({{"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    fitgrad::testing::expect_error([] { dist_env_from_environment(); },
                                   "[dist] OMPI_COMM_WORLD_SIZE is set but MASTER_ADDR is not",
                                   "to every rank Open MPI starts");
  }
  {
    LauncherEnv env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}});
    fitgrad::testing::expect_error([] { dist_env_from_environment(); },
                                   "[dist] OMPI_COMM_WORLD_RANK=2 must be an integer in [0, 1]");
  }
  {
    LauncherEnv env({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}});
    fitgrad::testing::expect_error(
        [] { dist_env_from_environment(); },
        "[dist] SLURM_STEP_NUM_TASKS is set but SLURM_STEP_TASKS_PER_NODE "
        "is not",
        "srun sets");
  }
  {
    LauncherEnv env(Vars{{"WORLD_SIZE", "2"}});
    fitgrad::testing::expect_error([] { dist_env_from_environment(); },
                                   "[dist] WORLD_SIZE is set but RANK is not");
  }
}

}  // namespace
}  // namespace fitgrad::dist
