// The cards memplan knows and the targets it plans for (targets.h).
#include "apps/memplan/targets.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "tensor/error.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::apps {
namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
// NVIDIA's recommended cuBLASLt workspace: 32 MiB on Hopper, 4 MiB elsewhere.
constexpr int64_t kHopperWorkspace = 32 * kMiB, kWorkspace = 4 * kMiB;

// This machine's CPU (bench/RESULTS.md: about 0.35 TFLOP/s in fp32 and 0.7 in bf16 on 2
// cores); its bandwidth is a round figure for a two-core share of a server's memory.
Rates cpu_rates() { return {0.35, 0.35, 0.7, 0.35, 20}; }

}  // namespace

const std::vector<Card>& known_cards() {
  //                 name     memory (nvidia-smi)   SMs  workspace   fp32  tf32  bf16   fp16  GB/s
  static const std::vector<Card> cards{
      {"v100-16g", 16160 * kMiB, 80, kWorkspace, {15.7, 15.7, 0, 125, 900}},
      {"rtx3090", 24576 * kMiB, 82, kWorkspace, {35.6, 35.6, 71, 71, 936}},
      {"rtx4090", 24564 * kMiB, 128, kWorkspace, {82.6, 82.6, 165.2, 165.2, 1008}},
      {"a100-40g", 40960 * kMiB, 108, kWorkspace, {19.5, 156, 312, 312, 1555}},
      {"a100-80g", 81920 * kMiB, 108, kWorkspace, {19.5, 156, 312, 312, 2039}},
      {"h100", 81559 * kMiB, 132, kHopperWorkspace, {67, 495, 989, 989, 3350}},
      {"h200", 143771 * kMiB, 132, kHopperWorkspace, {67, 495, 989, 989, 4800}},
  };
  return cards;
}

namespace {

// A size flag's bytes: a fitgrad::Error naming the flag when `text` is not a size, or is 0
// where `positive` asks for more.
int64_t flag_bytes(const char* flag, const std::string& text, bool positive) {
  int64_t bytes = 0;
  try {
    bytes = int64_t(parse_bytes(text));
  } catch (const Error& e) {
    throw Error(
        fmt::format("[memplan] {} '{}' is not a size such as 24GiB ({})", flag, text, e.what()));
  }
  FG_CHECK(!positive || bytes > 0, "[memplan] {} must be more than 0 bytes, got '{}'", flag, text);
  return bytes;
}

}  // namespace

PlanTarget plan_target(const std::string& device, const std::string& device_memory,
                       const std::string& context_reserve) {
  if (device == "cpu") {
    if (!context_reserve.empty())
      throw Error("[memplan] --context_reserve is for a CUDA card, not --device cpu");
    PlanTarget t;
    t.profile = backend::host_cpu_profile();
    t.rates = cpu_rates();
    t.capacity = device_memory.empty()
                     ? int64_t(::sysconf(_SC_PHYS_PAGES)) * int64_t(::sysconf(_SC_PAGESIZE))
                     : flag_bytes("--device_memory", device_memory, /*positive=*/true);
    t.name =
        fmt::format("{}, {} of memory", backend::profile_name(t.profile), format_bytes(t.capacity));
    return t;
  }
  if (device != "cuda")
    throw Error(fmt::format("[memplan] --device must be cuda or cpu, got '{}'", device));
  const std::vector<Card>& cards = known_cards();
  const std::string wanted = device_memory.empty() ? "h100" : device_memory;
  auto named = [&](const std::string& name) {
    return std::find_if(cards.begin(), cards.end(), [&](const Card& c) { return c.name == name; });
  };
  auto it = named(wanted);
  Card card;
  if (it != cards.end()) {
    card = *it;
  } else {
    int64_t bytes = 0;
    try {
      bytes = int64_t(parse_bytes(wanted));
    } catch (const Error&) {
      std::string names;
      for (const Card& c : cards) names += (names.empty() ? "" : ", ") + c.name;
      throw Error(
          fmt::format("[memplan] --device_memory '{}' is neither a size (24GiB) nor a card ({})",
                      wanted, names));
    }
    FG_CHECK(bytes > 0, "[memplan] --device_memory must be more than 0 bytes, got '{}'", wanted);
    card = *named("h100");  // an H100's profile and rates with this much memory
    card.name = format_bytes(bytes);
    card.memory_bytes = bytes;
  }
  const int64_t reserve = context_reserve.empty() ? kCudaContextReserve
                                                  : flag_bytes("--context_reserve", context_reserve,
                                                               /*positive=*/false);
  if (reserve >= card.memory_bytes)
    throw Error(fmt::format("[memplan] the context reserve of {} leaves nothing of {}'s {}",
                            format_bytes(reserve), card.name, format_bytes(card.memory_bytes)));
  PlanTarget t;
  t.profile = backend::cuda_profile(card.multiprocessors, card.gemm_workspace_bytes);
  t.capacity = card.memory_bytes - reserve;
  t.rates = card.rates;
  t.name =
      fmt::format("{} ({} less {} of CUDA context: {} for the allocator)", card.name,
                  format_bytes(card.memory_bytes), format_bytes(reserve), format_bytes(t.capacity));
  return t;
}

}  // namespace fitgrad::apps
