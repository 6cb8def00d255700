// make_nccl_group in a build without NCCL (nccl_group.h): an error that says so.
#include <fmt/format.h>

#include "dist/nccl_group.h"
#include "tensor/error.h"

namespace fitgrad::dist {

std::unique_ptr<ProcessGroup> make_nccl_group(const DistEnv&, Device device,
                                              std::chrono::milliseconds) {
  throw Error(
      fmt::format("[dist] {}: this build has no NCCL (it needs the CUDA backend and the "
                  "toolkit's NCCL); data parallelism on cpu runs over Gloo",
                  device.str()));
}

}  // namespace fitgrad::dist
