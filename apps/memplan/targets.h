// What memplan plans for (apps/memplan/): a named card, a bare memory size on a CUDA card,
// or this machine's CPU. A target gives meta its workspace profile (tensor/backend/profile.h),
// the allocator's capacity, and the rates the cost model (cost_model.h) divides by.
//
// Note [Card capacities]
// A card's capacity for the plan is its memory as nvidia-smi reports it, less a stated
// reserve for the CUDA context (the driver's and the kernels' own memory, which the caching
// allocator never sees): kCudaContextReserve, 512 MiB, for every card. PyTorch's context
// takes 300-600 MiB depending on the card and the CUDA version; --context_reserve sets the
// figure for another one. A bare --device_memory (24GiB) is a card of that memory with an
// H100's multiprocessors and rates; the plan's bytes do not depend on the rates, and on
// multiprocessors only through the reduction and norm partials (a few MiB at most).
//
// The rates are the vendors' dense datasheet figures (TFLOP/s with fp32 accumulation, and
// memory bandwidth); the cost model uses them only in ratios, to rank settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/backend/profile.h"

namespace fitgrad::apps {

inline constexpr int64_t kCudaContextReserve = int64_t(512) << 20;

struct Rates {
  double fp32_tflops = 0;
  double tf32_tflops = 0;
  double bf16_tflops = 0;  // 0: the card has no bf16 arithmetic
  double fp16_tflops = 0;
  double bandwidth_gbs = 0;  // memory bandwidth, GB/s
};

struct Card {
  std::string name;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
  int64_t gemm_workspace_bytes = 0;  // the cuBLASLt workspace (Note [CUDA workspace rules])
  Rates rates;
};

// The cards memplan knows by name, smallest memory first.
const std::vector<Card>& known_cards();

struct PlanTarget {
  std::string name;  // "rtx4090 (24564 MiB, 512 MiB context reserve)", "cpu (2 threads)"
  backend::TargetProfile profile;
  int64_t capacity = 0;  // the allocator's limit for the plan
  Rates rates;
};

// --device cuda|cpu, --device_memory (a card name, a size such as 24GiB, or "" for the
// default: h100 on cuda, this machine's physical memory on cpu) and --context_reserve ("":
// kCudaContextReserve). Throws fitgrad::Error naming the flag for anything else.
PlanTarget plan_target(const std::string& device, const std::string& device_memory,
                       const std::string& context_reserve);

}  // namespace fitgrad::apps
