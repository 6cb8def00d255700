// The bf16 flash attention forward on AMX tiles (tensor/cpu/attention_amx.h, Note [AMX
// attention tiles]) against the f32 kernel on the widened inputs (itself held to an fp64
// loop in tests/tensor/ops/attention_test.cpp): query tiles that are not whole 16-row tiles,
// key tiles shorter than 64, head dims 32, 64 and 128, causal and not, grouped-query heads.
// o within bf16's tolerance (p is rounded to bf16 before its product with v), lse within f32
// rounding (the same exact products, summed in another order). Which head dims take the
// tiles is checked on every machine; the comparison skips, with a line that says so, below
// the `amx` level (IsaPaths.avx512_bf16 runs the suite there on AMX machines).
#include "tensor/cpu/attention_amx.h"

#include <gtest/gtest.h>

#include "tensor/cpu_isa.h"
#include "tensor/ops/attention.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

TEST(AttentionAmx, HeadDimsOfWholeTilesOnlyAndOnlyOnAmx) {
  EXPECT_FALSE(cpu::amx_attention_usable(24));
  EXPECT_FALSE(cpu::amx_attention_usable(48));
  EXPECT_EQ(cpu::amx_attention_usable(64), cpu_isa() >= CpuIsa::amx);
}

struct Case {
  int64_t t, s, d;
  bool causal;
};

TEST(AttentionAmx, ForwardMatchesTheF32KernelOnTheWidenedInputs) {
  if (!cpu::amx_attention_usable(64))
    GTEST_SKIP() << "no AMX tiles at ISA level " << cpu_isa_name(cpu_isa())
                 << " (the bf16 forward stays on the f32 tiles there)";
  for (const Case& c : {Case{77, 93, 64, true}, Case{77, 93, 64, false}, Case{130, 257, 128, false},
                        Case{40, 40, 32, true}, Case{200, 130, 64, true}}) {
    const Tensor q = random_tensor({2, 4, c.t, c.d}, uint64_t(c.t + c.d), DType::bf16);
    const Tensor k = random_tensor({2, 2, c.s, c.d}, uint64_t(c.s + c.d + 1), DType::bf16);
    const Tensor v = random_tensor({2, 2, c.s, c.d}, uint64_t(c.s + c.d + 2), DType::bf16);
    const ops::AttentionOut amx = ops::flash_attention(q, k, v, c.causal);
    const ops::AttentionOut f32 =
        ops::flash_attention(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), c.causal);
    const std::string what = "T " + std::to_string(c.t) + " S " + std::to_string(c.s) + " D " +
                             std::to_string(c.d) + (c.causal ? " causal" : " full");
    EXPECT_TRUE(close_for(DType::bf16, to_f64(amx.o), to_f64(f32.o), 2.0)) << what;
    EXPECT_TRUE(all_close(to_f64(amx.lse), to_f64(f32.lse), 1e-6, 1e-6)) << what;
  }
}

}  // namespace
}  // namespace fitgrad::testing
