// The environment of a launched process and its group (rendezvous.h).
#include "dist/rendezvous.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dist/gloo_group.h"
#include "dist/local_process.h"
#include "dist/nccl_group.h"
#include "tensor/error.h"

namespace fitgrad::dist {
namespace {

const char* variable(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The launcher whose variables give a process its place in the job (Note [Launchers'
// variables] in rendezvous.h): the names of its rank, world size, local rank and local world
// size; local_size empty where it is read another way (Slurm's tasks per node).
struct Launcher {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_size;
  const char* sets;  // what its message says it sets
};

constexpr Launcher kTorchrun = {"torchrun",
                                "RANK",
                                "WORLD_SIZE",
                                "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE",
                                "a launcher sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, "
                                "MASTER_ADDR and MASTER_PORT"};
constexpr Launcher kOpenMpi = {"Open MPI",
                               "OMPI_COMM_WORLD_RANK",
                               "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK",
                               "OMPI_COMM_WORLD_LOCAL_SIZE",
                               "mpirun sets the OMPI_COMM_WORLD_* variables"};
constexpr Launcher kSlurm = {"Slurm",
                             "SLURM_PROCID",
                             "SLURM_STEP_NUM_TASKS",
                             "SLURM_LOCALID",
                             "",
                             "srun sets SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, "
                             "SLURM_NODEID and SLURM_STEP_TASKS_PER_NODE"};

int int_variable(const Launcher& l, const char* name, int lo, int hi) {
  const char* v = variable(name);
  FG_CHECK(v, "[dist] {} is set but {} is not: {}", l.world_size, name, l.sets);
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  FG_CHECK(*end == '\0' && x >= lo && x <= hi, "[dist] {}={} must be an integer in [{}, {}]", name,
           v, lo, hi);
  return int(x);
}

// Slurm's tasks on node `node` of a step from SLURM_STEP_TASKS_PER_NODE, written "2(x3),1":
// two tasks on each of the first three nodes, one on the fourth.
int slurm_tasks_on_node(const std::string& spec, int node) {
  const auto bad = [&] {
    return Error(fmt::format(
        "[dist] SLURM_STEP_TASKS_PER_NODE={} is not a list such as 2(x3),1, or has no node {} "
        "(SLURM_NODEID)",
        spec, node));
  };
  size_t at = 0;
  int first = 0, found = 0;
  while (at < spec.size()) {
    size_t used = 0;
    int tasks = 0, times = 1;
    try {
      tasks = std::stoi(spec.substr(at), &used);
    } catch (const std::exception&) {
      throw bad();
    }
    at += used;
    if (spec.compare(at, 2, "(x") == 0) {
      try {
        times = std::stoi(spec.substr(at + 2), &used);
      } catch (const std::exception&) {
        throw bad();
      }
      at += 2 + used;
      if (at >= spec.size() || spec[at] != ')') throw bad();
      ++at;
    }
    if (tasks < 1 || times < 1) throw bad();
    if (at < spec.size() && (spec[at++] != ',' || at == spec.size())) throw bad();
    if (node >= first && node < first + times) found = tasks;
    first += times;
  }
  if (found == 0) throw bad();
  return found;
}

// The first host of a Slurm host list: "gpu[07-09,12],login1" -> "gpu07".
std::string first_slurm_host(const std::string& list) {
  const size_t bracket = list.find('[');
  const size_t comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return list.substr(0, comma);
  const size_t end = list.find_first_of(",-]", bracket + 1);
  return list.substr(0, bracket) + list.substr(bracket + 1, end - bracket - 1);
}

// The IPv4 address of the network interface `name` (GLOO_SOCKET_IFNAME, PyTorch's variable).
std::string interface_address(const std::string& name) {
  FG_CHECK(name.find(',') == std::string::npos,
           "[dist] GLOO_SOCKET_IFNAME={}: fitgrad's transport binds one interface; name one", name);
  ifaddrs* list = nullptr;
  FG_CHECK(::getifaddrs(&list) == 0, "[dist] cannot list the network interfaces");
  std::string address, names;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", i->ifa_name);
    if (name != i->ifa_name || !address.empty()) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof(text));
    address = text;
  }
  ::freeifaddrs(list);
  FG_CHECK(!address.empty(),
           "[dist] GLOO_SOCKET_IFNAME={}: no such interface with an IPv4 address here (those "
           "that have one: {}); name one of them, or give FITGRAD_GLOO_HOSTNAME the address",
           name, names);
  return address;
}

}  // namespace

std::optional<DistEnv> dist_env_from_environment() {
  // Note [Launchers' variables]: torchrun's first, then Open MPI's, then Slurm's.
  const Launcher* l = variable(kTorchrun.world_size)  ? &kTorchrun
                      : variable(kOpenMpi.world_size) ? &kOpenMpi
                      : variable(kSlurm.world_size)   ? &kSlurm
                                                      : nullptr;
  if (!l) return std::nullopt;
  DistEnv env;
  env.launcher = l->name;
  env.world_size = int_variable(*l, l->world_size, 1, 1 << 20);
  env.rank = int_variable(*l, l->rank, 0, env.world_size - 1);
  if (l == &kSlurm) {
    const char* per_node = variable("SLURM_STEP_TASKS_PER_NODE");
    FG_CHECK(per_node, "[dist] {} is set but SLURM_STEP_TASKS_PER_NODE is not: {}", l->world_size,
             l->sets);
    env.local_world_size =
        slurm_tasks_on_node(per_node, int_variable(*l, "SLURM_NODEID", 0, env.world_size - 1));
    FG_CHECK(env.local_world_size <= env.world_size,
             "[dist] SLURM_STEP_TASKS_PER_NODE={} gives this node more tasks than the step's {}",
             per_node, env.world_size);
  } else {
    env.local_world_size = int_variable(*l, l->local_size, 1, env.world_size);
  }
  env.local_rank = int_variable(*l, l->local_rank, 0, env.local_world_size - 1);
  const char* addr = variable("MASTER_ADDR");
  const char* nodes = variable("SLURM_STEP_NODELIST");
  if (!addr && l == &kSlurm && nodes) {
    env.master_addr = first_slurm_host(nodes);
  } else {
    FG_CHECK(addr,
             "[dist] {} is set but MASTER_ADDR is not: export MASTER_ADDR, the host of rank 0 (and "
             "the Redis server of a job across hosts){}",
             l->world_size,
             l == &kTorchrun ? "" : fmt::format(", to every rank {} starts", l->name));
    env.master_addr = addr;
  }
  // torchrun's default port where a scheduler started the ranks without one.
  env.master_port = l == &kTorchrun || variable("MASTER_PORT")
                        ? int_variable(*l, "MASTER_PORT", 1, 65535)
                        : 29500;
  const bool one_host = env.local_world_size == env.world_size;
  if (const char* store = variable("FITGRAD_STORE")) {
    env.store = store;
  } else if (one_host) {
    const char* tmp = variable("TMPDIR");
    env.store = fmt::format("file:{}/fitgrad-rendezvous-{}", tmp ? tmp : "/tmp", env.master_port);
    env.own_store = true;
  } else {
    env.store = fmt::format("redis:{}:{}", env.master_addr, env.master_port);
  }
  if (env.store.starts_with("file:")) {
    std::error_code ec;
    std::filesystem::create_directories(env.store.substr(5), ec);
    FG_CHECK(!ec,
             "[dist] cannot make the rendezvous store's directory {}: {}; give FITGRAD_STORE=file:"
             "<dir> a directory that every rank can write (or TMPDIR, for the default store)",
             env.store.substr(5), ec.message());
  }
  if (const char* host = variable("FITGRAD_GLOO_HOSTNAME")) {
    env.hostname = host;
  } else if (const char* ifname = variable("GLOO_SOCKET_IFNAME")) {
    env.hostname = interface_address(ifname);
  } else if (one_host) {
    env.hostname = "127.0.0.1";
  } else {
    env.hostname = host_name();
  }
  return env;
}

std::unique_ptr<ProcessGroup> make_process_group(const DistEnv& env, Device device,
                                                 std::chrono::milliseconds timeout) {
  if (device.type == DeviceType::cuda) return make_nccl_group(env, device, timeout);
  FG_CHECK(device.type == DeviceType::cpu,
           "[dist] data parallelism runs on cpu (Gloo) or cuda (NCCL), not {}", device.str());
  return make_gloo_group({env.rank, env.world_size, env.store, env.hostname, timeout,
                          env.own_store ? env.store.substr(5) : std::string()});
}

}  // namespace fitgrad::dist
