// Attention (tensor/ops/attention.h): flash against naive attention across sequence
// lengths, grouped-query heads and T != S (one table row each); forward against an fp64
// reference loop and backward against finite differences of it; bf16/f16; determinism;
// the ledger's view of flash's O(T) against naive's O(T^2) memory; meta and errors.
#include "tensor/ops/attention.h"

#include <cmath>
#include <limits>

#include "tensor/backend/profile.h"
#include "tensor/cpu/attention_amx.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::testing {
namespace {

struct Dims {
  int64_t b, hq, hkv, t, s, d;
  Shape q() const { return {b, hq, t, d}; }
  Shape kv() const { return {b, hkv, s, d}; }
};

struct Inputs {
  Tensor q, k, v;
};

Inputs random_inputs(const Dims& x, uint64_t seed, DType dtype = DType::f32) {
  return {random_tensor(x.q(), seed, dtype, -2, 2), random_tensor(x.kv(), seed + 1, dtype, -2, 2),
          random_tensor(x.kv(), seed + 2, dtype)};
}

double default_scale(const Dims& x) { return 1.0 / std::sqrt(double(x.d)); }

struct Reference {
  std::vector<double> o;    // (B, Hq, T, D)
  std::vector<double> lse;  // (B, Hq, T)
};

// fp64 attention written as plain loops: query i of head h sees keys j <= i + S - T when
// causal, and of those only j > i + S - T - window when window > 0, using kv head
// h / (Hq / Hkv); scores softcap tanh(s / softcap) when softcap > 0; a query that sees no key
// gives o = 0, lse = -inf.
Reference reference(const Dims& x, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, bool causal, double scale, int64_t window = 0,
                    double softcap = 0) {
  Reference r{std::vector<double>(size_t(numel(x.q()))),
              std::vector<double>(size_t(x.b * x.hq * x.t))};
  std::vector<double> p(size_t(x.s));
  for (int64_t b = 0; b < x.b; ++b)
    for (int64_t h = 0; h < x.hq; ++h) {
      const int64_t kv = b * x.hkv + h / (x.hq / x.hkv), bh = b * x.hq + h;
      for (int64_t i = 0; i < x.t; ++i) {
        const int64_t visible = causal ? std::clamp<int64_t>(i + x.s - x.t + 1, 0, x.s) : x.s;
        const int64_t first = window > 0 ? std::clamp<int64_t>(visible - window, 0, x.s) : 0;
        const size_t row = size_t(bh * x.t + i);
        if (visible <= first) {
          r.lse[row] = -INFINITY;
          continue;
        }
        double mx = -INFINITY;
        for (int64_t j = first; j < visible; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < x.d; ++c)
            dot += q[row * size_t(x.d) + size_t(c)] * k[size_t((kv * x.s + j) * x.d + c)];
          p[size_t(j)] = scale * dot;
          if (softcap > 0) p[size_t(j)] = softcap * std::tanh(p[size_t(j)] / softcap);
          mx = std::max(mx, p[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = first; j < visible; ++j) sum += std::exp(p[size_t(j)] - mx);
        r.lse[row] = mx + std::log(sum);
        for (int64_t j = first; j < visible; ++j) {
          const double w = std::exp(p[size_t(j)] - r.lse[row]);
          for (int64_t c = 0; c < x.d; ++c)
            r.o[row * size_t(x.d) + size_t(c)] += w * v[size_t((kv * x.s + j) * x.d + c)];
        }
      }
    }
  return r;
}

std::string dims_name(const Dims& x, bool causal, int64_t window = 0) {
  return fmt::format("B{}_Hq{}_Hkv{}_T{}_S{}_D{}_{}", x.b, x.hq, x.hkv, x.t, x.s, x.d,
                     window > 0 ? fmt::format("window{}", window)
                     : causal   ? "causal"
                                : "full");
}

// The mask of a case: a sliding window when window > 0, else causal or none.
backend::AttentionMask mask_of(bool causal, int64_t window) {
  return window > 0 ? backend::AttentionMask::sliding(window) : backend::AttentionMask(causal);
}

// ---- flash vs naive, fp32, 1e-5 relative ----

struct FlashCase {
  Dims dims;
  bool causal;
  int64_t window = 0;  // > 0: causal within this sliding window
};

std::vector<FlashCase> flash_cases() {
  const Dims dims[] = {
      {1, 2, 2, 1, 1, 16},       // T = 1
      {2, 2, 2, 7, 7, 16},       // T = 7, two batches
      {1, 4, 2, 64, 64, 16},     // T = 64, one tile, GQA
      {1, 2, 1, 257, 257, 16},   // T = 257, a ragged last tile, MQA
      {1, 2, 2, 1024, 1024, 8},  // T = 1024
      {1, 4, 2, 7, 20, 8},       // T < S: a chunk of new tokens against a KV cache
      {1, 4, 1, 1, 257, 32},     // decoding one token, MQA
      {1, 2, 2, 100, 70, 8},     // T > S: causal queries 0..29 see no key
      {1, 4, 4, 65, 130, 64},    // D = 64, tiles straddling the diagonal
      {1, 2, 1, 70, 70, 40},     // D = 40: whole register blocks of the key transpose and a rest
  };
  std::vector<FlashCase> out;
  for (const Dims& d : dims)
    for (bool causal : {false, true}) out.push_back({d, causal});
  // Sliding windows (Note [Sliding-window attention]): narrower than a tile, off the tile
  // grid, across tiles both ways, with a KV cache (T < S) and with T > S.
  for (const int64_t window : {1, 5, 100}) {
    out.push_back({{1, 4, 2, 257, 257, 16}, true, window});
    out.push_back({{1, 4, 1, 7, 200, 8}, true, window});
  }
  out.push_back({{2, 2, 2, 1024, 1024, 8}, true, 300});
  out.push_back({{1, 2, 2, 100, 70, 8}, true, 40});
  out.push_back({{1, 4, 4, 65, 130, 64}, true, 64});
  return out;
}

class FlashVsNaive : public ::testing::TestWithParam<FlashCase> {};

TEST_P(FlashVsNaive, OutputsAndGradientsAgree) {
  const FlashCase& c = GetParam();
  const backend::AttentionMask mask = mask_of(c.causal, c.window);
  const Inputs in = random_inputs(c.dims, 10);
  const ops::AttentionOut flash = ops::flash_attention(in.q, in.k, in.v, mask);
  const Tensor naive = ops::naive_attention(in.q, in.k, in.v, mask);
  EXPECT_EQ(flash.o.shape(), c.dims.q());
  EXPECT_EQ(flash.lse.shape(), (Shape{c.dims.b, c.dims.hq, c.dims.t}));
  EXPECT_TRUE(all_close(to_f64(flash.o), to_f64(naive), 1e-5, 1e-6));

  const Tensor dout = random_tensor(c.dims.q(), 13);
  const ops::AttentionGrads fg =
      ops::flash_attention_backward(dout, in.q, in.k, in.v, flash.o, flash.lse, mask);
  const ops::AttentionGrads ng = ops::naive_attention_backward(dout, in.q, in.k, in.v, mask);
  EXPECT_TRUE(all_close(to_f64(fg.dq), to_f64(ng.dq), 1e-4, 1e-5)) << "dq";
  EXPECT_TRUE(all_close(to_f64(fg.dk), to_f64(ng.dk), 1e-4, 1e-5)) << "dk";
  EXPECT_TRUE(all_close(to_f64(fg.dv), to_f64(ng.dv), 1e-4, 1e-5)) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Attention, FlashVsNaive, ::testing::ValuesIn(flash_cases()),
                         [](const auto& info) {
                           return dims_name(info.param.dims, info.param.causal, info.param.window);
                         });

// ---- against the fp64 reference ----

struct RefCase {
  Dims dims;
  bool causal;
  double scale;        // 0: 1/sqrt(D)
  int64_t window = 0;  // > 0: causal within this sliding window
  double softcap = 0;  // > 0: Gemma 2's soft cap on the scores
};

std::vector<RefCase> ref_cases() {
  return {
      {{1, 2, 1, 3, 5, 4}, false, 0},
      {{1, 2, 1, 3, 5, 4}, true, 0},
      {{2, 4, 2, 6, 4, 3}, true, 0},       // T > S: two queries per head see nothing
      {{1, 2, 2, 70, 75, 3}, true, 0},     // crosses a 64-row tile both ways
      {{1, 3, 3, 66, 66, 2}, false, 0.7},  // explicit scale
      {{1, 2, 1, 70, 75, 3}, true, 0, 9},  // a sliding window across the tiles
      {{1, 2, 2, 3, 40, 2}, true, 0, 4},   // a window over a KV cache
      // Soft caps that bite (scaled scores reach about 3): with a window, and full
      {{1, 2, 1, 70, 75, 3}, true, 1.5, 9, 1.0},
      {{2, 2, 2, 6, 4, 3}, false, 2.0, 0, 0.5},
  };
}

class AttentionReference : public ::testing::TestWithParam<RefCase> {};

TEST_P(AttentionReference, ForwardMatchesFp64) {
  const RefCase& c = GetParam();
  backend::AttentionMask mask = mask_of(c.causal, c.window);
  mask.softcap = c.softcap;
  const Inputs in = random_inputs(c.dims, 20);
  const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, mask, c.scale);
  const double scale = c.scale == 0 ? default_scale(c.dims) : c.scale;
  const Reference want = reference(c.dims, to_f64(in.q), to_f64(in.k), to_f64(in.v), c.causal,
                                   scale, c.window, c.softcap);
  EXPECT_TRUE(all_close(to_f64(out.o), want.o, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(to_f64(out.lse), want.lse, 1e-5, 1e-6));
  if (c.softcap == 0) {  // naive attention has no soft cap
    EXPECT_TRUE(all_close(to_f64(ops::naive_attention(in.q, in.k, in.v, mask, c.scale)), want.o,
                          1e-5, 1e-6));
  }
}

TEST_P(AttentionReference, BackwardMatchesFiniteDifferences) {
  const RefCase& c = GetParam();
  const Inputs in = random_inputs(c.dims, 30);
  const Tensor dout = random_tensor(c.dims.q(), 33);
  const double scale = c.scale == 0 ? default_scale(c.dims) : c.scale;
  backend::AttentionMask mask = mask_of(c.causal, c.window);
  mask.softcap = c.softcap;
  const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, mask, c.scale);
  const ops::AttentionGrads g =
      ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, mask, c.scale);
  std::vector<double> q = to_f64(in.q), k = to_f64(in.k), v = to_f64(in.v);
  const std::vector<double> w = to_f64(dout);
  auto loss = [&] {
    const std::vector<double> o =
        reference(c.dims, q, k, v, c.causal, scale, c.window, c.softcap).o;
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += w[i] * o[i];
    return s;
  };
  // Each input in turn: finite differences with the other two held fixed.
  auto fd = [&](std::vector<double>& x) {
    const std::vector<double> x0 = x;
    return finite_diff(
        [&](const std::vector<double>& xi) {
          x = xi;
          return loss();
        },
        x0);
  };
  EXPECT_TRUE(all_close(to_f64(g.dq), fd(q), 1e-4, 1e-5)) << "dq";
  q = to_f64(in.q);
  EXPECT_TRUE(all_close(to_f64(g.dk), fd(k), 1e-4, 1e-5)) << "dk";
  k = to_f64(in.k);
  EXPECT_TRUE(all_close(to_f64(g.dv), fd(v), 1e-4, 1e-5)) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionReference, ::testing::ValuesIn(ref_cases()),
                         [](const auto& info) {
                           return dims_name(info.param.dims, info.param.causal, info.param.window) +
                                  (info.param.scale != 0 ? "_scaled" : "") +
                                  (info.param.softcap != 0 ? "_softcap" : "");
                         });

// ---- half precision ----

class AttentionHalf : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionHalf, ForwardAndBackwardWithinDtypeTolerance) {
  const DType dtype = GetParam();
  const Dims x{1, 4, 2, 70, 80, 16};
  const Inputs in = random_inputs(x, 40, dtype);
  const Tensor dout = random_tensor(x.q(), 43, dtype);
  // causal, a sliding window, and a soft-capped window (the AMX tiles' too)
  for (const auto& [window, softcap] : {std::pair<int64_t, double>{0, 0}, {13, 0}, {13, 0.7}}) {
    SCOPED_TRACE(softcap);
    backend::AttentionMask mask = mask_of(true, window);
    mask.softcap = softcap;
    const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, mask);
    EXPECT_EQ(out.o.dtype(), dtype);
    EXPECT_EQ(out.lse.dtype(), DType::f32);
    const Reference want = reference(x, to_f64(in.q), to_f64(in.k), to_f64(in.v), true,
                                     default_scale(x), window, softcap);
    EXPECT_TRUE(close_for(dtype, to_f64(out.o), want.o));
    EXPECT_TRUE(all_close(to_f64(out.lse), want.lse, 1e-5, 1e-5));
    // Gradients: against the f32 computation on the same (exactly representable) values.
    const ops::AttentionGrads g =
        ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, mask);
    // (naive attention has no soft cap: f32 flash on the same values, held to fp64 above)
    const Tensor q32 = in.q.to(DType::f32), k32 = in.k.to(DType::f32), v32 = in.v.to(DType::f32);
    const ops::AttentionOut o32 = ops::flash_attention(q32, k32, v32, mask);
    const ops::AttentionGrads g32 =
        softcap > 0 ? ops::flash_attention_backward(dout.to(DType::f32), q32, k32, v32, o32.o,
                                                    o32.lse, mask)
                    : ops::naive_attention_backward(dout.to(DType::f32), q32, k32, v32, mask);
    for (const Tensor* t : {&g.dq, &g.dk, &g.dv}) EXPECT_EQ(t->dtype(), dtype);
    EXPECT_TRUE(close_for(dtype, to_f64(g.dq), to_f64(g32.dq))) << "dq";
    EXPECT_TRUE(close_for(dtype, to_f64(g.dk), to_f64(g32.dk))) << "dk";
    EXPECT_TRUE(close_for(dtype, to_f64(g.dv), to_f64(g32.dv))) << "dv";
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionHalf, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- determinism ----

TEST(AttentionDeterminism, BitwiseEqualAcrossRunsAndThreadCounts) {
  const Dims x{2, 4, 2, 130, 130, 16};
  const Inputs in = random_inputs(x, 50);
  const Tensor dout = random_tensor(x.q(), 53);
  auto run = [&] {
    const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, true);
    const ops::AttentionGrads g =
        ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, true);
    return std::vector<std::vector<float>>{out.o.to_vector<float>(), out.lse.to_vector<float>(),
                                           g.dq.to_vector<float>(), g.dk.to_vector<float>(),
                                           g.dv.to_vector<float>()};
  };
  const auto first = run();
  EXPECT_EQ(run(), first);
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto single = run();
  omp_set_num_threads(saved);
  EXPECT_EQ(single, first);  // every tile is computed by one thread in a fixed order
#endif
}

// ---- memory: the ledger shows O(T) for flash and O(T^2) for naive ----

int64_t allocated_now() {
  return allocator_for(Device::cpu()).stats().allocated_bytes[kAllPools].current;
}

// Bytes above the starting level at the peak of fn(), and bytes fn's result still holds.
struct Measured {
  int64_t peak, held;
};
template <class Fn>
Measured measure(Fn&& fn) {
  CachingAllocator& alloc = allocator_for(Device::cpu());
  alloc.empty_cache();  // large blocks come from fresh segments, so they split exactly
  const int64_t base = allocated_now();
  alloc.reset_peak_stats();
  const auto result = fn();
  const int64_t peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  return {peak, allocated_now() - base};
}

int64_t bytes(int64_t floats) { return int64_t(round_request(size_t(floats) * 4)); }

TEST(AttentionMemory, FlashIsLinearAndNaiveQuadraticInT) {
  const backend::TargetProfile profile = backend::host_cpu_profile();
  const int64_t threads = backend::attention_threads(profile);
  Measured flash_fwd[2], flash_bwd[2], naive_fwd[2], naive_bwd[2];
  const int64_t ts[2] = {256, 1024};
  for (int i = 0; i < 2; ++i) {
    const Dims x{1, 2, 2, ts[i], ts[i], 16};
    const Inputs in = random_inputs(x, 60);
    const Tensor dout = random_tensor(x.q(), 63);
    const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, true);
    const int64_t q_floats = numel(x.q()), kv_floats = numel(x.kv()), rows = x.b * x.hq * x.t;
    const int64_t scores = rows * x.s;
    // Note [Attention memory] in tensor/ops/attention.cpp, byte for byte.
    flash_fwd[i] = measure([&] { return ops::flash_attention(in.q, in.k, in.v, true); });
    EXPECT_EQ(flash_fwd[i].held, bytes(q_floats) + bytes(rows));  // o + lse: what is saved
    EXPECT_EQ(flash_fwd[i].peak,
              flash_fwd[i].held + bytes(threads * backend::flash_workspace_floats(
                                                      profile, x.d, false, DType::f32)));
    flash_bwd[i] = measure([&] {
      return ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, true);
    });
    EXPECT_EQ(flash_bwd[i].held, bytes(q_floats) + 2 * bytes(kv_floats));
    EXPECT_EQ(flash_bwd[i].peak,
              flash_bwd[i].held + bytes(rows) +
                  bytes(threads * backend::flash_workspace_floats(profile, x.d, true, DType::f32)));
    naive_fwd[i] = measure([&] { return ops::naive_attention(in.q, in.k, in.v, true); });
    EXPECT_EQ(naive_fwd[i].peak, bytes(q_floats) + bytes(scores));
    naive_bwd[i] =
        measure([&] { return ops::naive_attention_backward(dout, in.q, in.k, in.v, true); });
    EXPECT_EQ(naive_bwd[i].peak, bytes(q_floats) + 2 * bytes(kv_floats) + 2 * bytes(scores));
  }
  // 4x the sequence: flash's peak grows at most 4x, naive's about 16x.
  EXPECT_LT(double(flash_fwd[1].peak) / double(flash_fwd[0].peak), 5.0);
  EXPECT_LT(double(flash_bwd[1].peak) / double(flash_bwd[0].peak), 5.0);
  EXPECT_GT(double(naive_fwd[1].peak) / double(naive_fwd[0].peak), 10.0);
  EXPECT_GT(double(naive_bwd[1].peak) / double(naive_bwd[0].peak), 10.0);
}

// ---- bf16/f16 staged tile by tile (Note [Staged attention tiles]) ----

std::vector<uint16_t> bits16(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint16_t*>(c.data_ptr());
  return std::vector<uint16_t>(p, p + c.numel());
}

// A low-precision result is the f32 kernel's result on the widened inputs, rounded once;
// except the bf16 forward on AMX tiles (Note [AMX attention tiles]), held to bf16's tolerance.
void expect_rounded_f32(const Tensor& got, const Tensor& f32, const char* what) {
  ASSERT_EQ(got.dtype() == DType::f32, false) << what;
  EXPECT_EQ(bits16(got), bits16(f32.to(got.dtype()))) << what;
}

class AttentionStaged : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionStaged, EqualsTheF32KernelOnWidenedInputsRounded) {
  const DType dtype = GetParam();
  // Several query and key tiles, ragged ends, GQA, D = 64 (full panels) and D = 24 (ragged).
  for (const Dims& x : {Dims{2, 4, 2, 130, 150, 64}, Dims{1, 3, 1, 70, 70, 24}}) {
    const Inputs in = random_inputs(x, 80, dtype);
    const Tensor dout = random_tensor(x.q(), 83, dtype);
    const Tensor q32 = in.q.to(DType::f32), k32 = in.k.to(DType::f32), v32 = in.v.to(DType::f32),
                 dout32 = dout.to(DType::f32);
    for (bool causal : {false, true}) {
      const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, causal);
      const ops::AttentionOut out32 = ops::flash_attention(q32, k32, v32, causal);
      if (dtype == DType::bf16 && cpu::amx_attention_usable(x.d)) {
        // Note [AMX attention tiles]: the scores summed in another order, p rounded to bf16.
        EXPECT_TRUE(close_for(dtype, to_f64(out.o), to_f64(out32.o), 2.0)) << "flash o (AMX)";
        EXPECT_TRUE(all_close(to_f64(out.lse), to_f64(out32.lse), 1e-6, 1e-6)) << "flash lse";
      } else {
        expect_rounded_f32(out.o, out32.o, "flash o");
        EXPECT_TRUE(all_close(to_f64(out.lse), to_f64(out32.lse), 0, 0)) << "flash lse";
      }
      const ops::AttentionGrads g =
          ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, causal);
      const ops::AttentionGrads g32 = ops::flash_attention_backward(
          dout32, q32, k32, v32, out.o.to(DType::f32), out.lse, causal);
      expect_rounded_f32(g.dq, g32.dq, "flash dq");
      expect_rounded_f32(g.dk, g32.dk, "flash dk");
      expect_rounded_f32(g.dv, g32.dv, "flash dv");
      expect_rounded_f32(ops::naive_attention(in.q, in.k, in.v, causal),
                         ops::naive_attention(q32, k32, v32, causal), "naive o");
      const ops::AttentionGrads n = ops::naive_attention_backward(dout, in.q, in.k, in.v, causal);
      const ops::AttentionGrads n32 = ops::naive_attention_backward(dout32, q32, k32, v32, causal);
      expect_rounded_f32(n.dq, n32.dq, "naive dq");
      expect_rounded_f32(n.dk, n32.dk, "naive dk");
      expect_rounded_f32(n.dv, n32.dv, "naive dv");
    }
  }
}

// No f32 copy of an input or output: beyond the results, only the f32 lse/delta/probs and
// the bounded workspaces, whose staging part does not grow with T.
TEST_P(AttentionStaged, AllocatesOnlyTheResultsAndBoundedWorkspaces) {
  const DType dtype = GetParam();
  const backend::TargetProfile profile = backend::host_cpu_profile();
  const int64_t threads = backend::attention_threads(profile);
  const Dims x{1, 4, 2, 512, 512, 32};
  const Inputs in = random_inputs(x, 90, dtype);
  const Tensor dout = random_tensor(x.q(), 93, dtype);
  const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, true);
  const auto half_bytes = [](int64_t n) { return int64_t(round_request(size_t(n) * 2)); };
  const int64_t q_n = numel(x.q()), kv_n = numel(x.kv()), rows = x.b * x.hq * x.t;
  const int64_t fwd_ws = threads * backend::flash_workspace_floats(profile, x.d, false, dtype);
  const int64_t bwd_ws = threads * backend::flash_workspace_floats(profile, x.d, true, dtype);
  const Measured fwd = measure([&] { return ops::flash_attention(in.q, in.k, in.v, true); });
  EXPECT_EQ(fwd.held, half_bytes(q_n) + bytes(rows));
  EXPECT_EQ(fwd.peak, fwd.held + bytes(fwd_ws));
  const Measured bwd = measure(
      [&] { return ops::flash_attention_backward(dout, in.q, in.k, in.v, out.o, out.lse, true); });
  EXPECT_EQ(bwd.held, half_bytes(q_n) + 2 * half_bytes(kv_n));
  EXPECT_EQ(bwd.peak, bwd.held + bytes(rows) + bytes(bwd_ws));
  const int64_t group = x.hq / x.hkv;
  const Measured naive = measure([&] { return ops::naive_attention(in.q, in.k, in.v, true); });
  EXPECT_EQ(naive.peak, half_bytes(q_n) + bytes(rows * x.s) +
                            bytes(backend::naive_workspace_floats(profile, group, x.t, x.s, x.d,
                                                                  false, dtype)));
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionStaged, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- meta and errors ----

TEST(AttentionMeta, AllocatesOutputsOnly) {
  const Dims x{2, 4, 2, 5, 9, 8};
  const Tensor q = Tensor::empty(x.q(), DType::bf16, Device::meta());
  const Tensor kv = Tensor::empty(x.kv(), DType::bf16, Device::meta());
  const ops::AttentionOut out = ops::flash_attention(q, kv, kv, true);
  EXPECT_EQ(out.o.shape(), x.q());
  EXPECT_EQ(out.o.dtype(), DType::bf16);
  EXPECT_EQ(out.lse.shape(), (Shape{2, 4, 5}));
  EXPECT_EQ(out.lse.dtype(), DType::f32);
  EXPECT_EQ(out.lse.device(), Device::meta());
  const ops::AttentionGrads g = ops::flash_attention_backward(q, q, kv, kv, out.o, out.lse, true);
  EXPECT_EQ(g.dq.shape(), x.q());
  EXPECT_EQ(g.dk.shape(), x.kv());
  EXPECT_EQ(g.dv.dtype(), DType::bf16);
  EXPECT_EQ(ops::naive_attention(q, kv, kv, false).shape(), x.q());
  EXPECT_EQ(ops::naive_attention_backward(q, q, kv, kv, false).dk.shape(), x.kv());
}

TEST(AttentionEdges, EmptyKeysGiveZeroOutput) {
  const Dims x{1, 2, 1, 3, 0, 4};
  const Inputs in = random_inputs(x, 70);
  const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, false);
  EXPECT_EQ(to_f64(out.o), std::vector<double>(size_t(numel(x.q())), 0.0));
  EXPECT_EQ(to_f64(out.lse), std::vector<double>(6, -INFINITY));
  EXPECT_EQ(to_f64(ops::naive_attention(in.q, in.k, in.v, false)), to_f64(out.o));
  const ops::AttentionGrads g =
      ops::flash_attention_backward(out.o, in.q, in.k, in.v, out.o, out.lse, false);
  EXPECT_EQ(to_f64(g.dq), to_f64(out.o));
  EXPECT_EQ(g.dk.numel(), 0);
}

TEST(AttentionEdges, NanPropagatesToItsRow) {
  const Dims x{1, 1, 1, 70, 70, 8};
  Inputs in = random_inputs(x, 71);
  in.q.set({0, 0, 66, 3}, NAN);  // query 66, in the second tile
  for (bool causal : {false, true}) {
    const ops::AttentionOut out = ops::flash_attention(in.q, in.k, in.v, causal);
    const Tensor naive = ops::naive_attention(in.q, in.k, in.v, causal);
    for (int64_t i : {int64_t(65), int64_t(66)}) {
      EXPECT_EQ(std::isnan(out.o.at({0, 0, i, 0})), i == 66) << i;
      EXPECT_EQ(std::isnan(out.lse.at({0, 0, i})), i == 66) << i;
      EXPECT_EQ(std::isnan(naive.at({0, 0, i, 0})), i == 66) << i;
    }
  }
}

TEST(AttentionErrors, BadShapesDtypesAndHeads) {
  const Tensor q = random_tensor({1, 4, 5, 8}, 80), kv = random_tensor({1, 2, 6, 8}, 81);
  const std::string f = "[flash_attention]";
  expect_error([&] { ops::flash_attention(q.select(0, 0), kv, kv, false); }, f);
  expect_error([&] { ops::flash_attention(q, random_tensor({1, 2, 6, 4}, 82), kv, false); }, f);
  expect_error([&] { ops::flash_attention(q, kv, random_tensor({1, 2, 7, 8}, 83), false); }, f);
  expect_error([&] { ops::flash_attention(q, random_tensor({1, 3, 6, 8}, 84), kv, false); }, f);
  expect_error([&] { ops::flash_attention(q, random_tensor({2, 2, 6, 8}, 85), kv, false); }, f);
  expect_error([&] { ops::flash_attention(q, kv.to(DType::bf16), kv, false); }, f);
  expect_error(
      [&] {
        ops::flash_attention(q, kv, Tensor::zeros({1, 2, 6, 8}, DType::i32), false);
      },
      f);
  expect_error([&] { ops::flash_attention(q, kv, kv, false, NAN); }, f);
  backend::AttentionMask uncausal_window;  // a window needs the causal mask
  uncausal_window.window = 4;
  expect_error([&] { ops::flash_attention(q, kv, kv, uncausal_window); },
               "[flash_attention] a sliding window (4)");
  expect_error([&] { ops::naive_attention(q, kv, kv, backend::AttentionMask::sliding(-1)); },
               "[naive_attention] a sliding window (-1)");
  const ops::AttentionOut out = ops::flash_attention(q, kv, kv, false);
  const std::string b = "[flash_attention_backward]";
  expect_error([&] { ops::flash_attention_backward(kv, q, kv, kv, out.o, out.lse, false); }, b);
  expect_error([&] { ops::flash_attention_backward(q, q, kv, kv, out.o, out.o, false); }, b);
  expect_error(
      [&] { ops::flash_attention_backward(q, q, kv, kv, out.o, out.lse.to(DType::bf16), false); },
      b);
  expect_error([&] { ops::flash_attention_backward(q, q, kv, kv, out.o, Tensor(), false); }, b);
  expect_error([&] { ops::naive_attention(q, kv.select(0, 0), kv, false); }, "[naive_attention]");
  expect_error([&] { ops::naive_attention_backward(kv, q, kv, kv, false); },
               "[naive_attention_backward]");
}

}  // namespace
}  // namespace fitgrad::testing
