// The TF32 matmul mode (see math_mode.h).
#include "tensor/backend/math_mode.h"

#include <atomic>

namespace fitgrad::backend {
namespace {
std::atomic<bool> g_tf32{false};
}  // namespace

void set_matmul_tf32(bool on) { g_tf32.store(on); }
bool matmul_tf32() { return g_tf32.load(std::memory_order_relaxed); }

}  // namespace fitgrad::backend
