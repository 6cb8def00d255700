// The environment of a launched process and its group (rendezvous.h).
#include "dist/rendezvous.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "dist/gloo_group.h"
#include "dist/nccl_group.h"
#include "tensor/error.h"

namespace fitgrad::dist {
namespace {

const char* variable(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int int_variable(const char* name, int lo, int hi) {
  const char* v = variable(name);
  FG_CHECK(v,
           "[dist] WORLD_SIZE is set but {} is not: a launcher sets RANK, WORLD_SIZE, "
           "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT",
           name);
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  FG_CHECK(*end == '\0' && x >= lo && x <= hi, "[dist] {}={} must be an integer in [{}, {}]", name,
           v, lo, hi);
  return int(x);
}

}  // namespace

std::optional<DistEnv> dist_env_from_environment() {
  if (!variable("WORLD_SIZE")) return std::nullopt;
  DistEnv env;
  env.world_size = int_variable("WORLD_SIZE", 1, 1 << 20);
  env.rank = int_variable("RANK", 0, env.world_size - 1);
  env.local_world_size = int_variable("LOCAL_WORLD_SIZE", 1, env.world_size);
  env.local_rank = int_variable("LOCAL_RANK", 0, env.local_world_size - 1);
  const char* addr = variable("MASTER_ADDR");
  FG_CHECK(addr, "[dist] WORLD_SIZE is set but MASTER_ADDR is not");
  env.master_addr = addr;
  env.master_port = int_variable("MASTER_PORT", 1, 65535);
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
  } else if (one_host) {
    env.hostname = "127.0.0.1";
  } else {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    env.hostname = name;
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
