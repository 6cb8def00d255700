// The CPU elementwise kernels (see cpu/elementwise.h). Each op is a scalar lambda applied
// by one of the loops below; the op switch sits outside the loops, and a run whose
// operands all have stride 1 takes a plain indexed loop the compiler can vectorise.
//
// Note [Native low-precision elementwise]
// Operands may be f32, bf16 or f16 in any mix (the front-end promotes the output's dtype).
// When any is not f32, each run is processed in tiles of kTile elements: the inputs are
// converted into f32 tiles on the stack, the op's f32 code runs on the tiles, and the
// outputs are rounded once into their dtype. No f32 copy of a whole tensor exists, and the
// bits are those of converting every input to f32, computing, and casting the result (what
// the front-ends did before), since widening is exact and the one rounding is the same
// convert(). An in-place operand (add_) is read and written tile by tile by one thread.
#include "tensor/cpu/elementwise.h"

#include <algorithm>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu/bf16_rows.h"
#include "tensor/cpu/elementwise_loop.h"
#include "tensor/cpu/vec.h"
#include "tensor/error.h"

namespace fitgrad::cpu {
namespace {

// Note [Vectorised gelu]
// gelu and its gradient run on every element of a GPT-2 MLP's (B T, 4 C) activations in
// both directions, and the scalar formulas (elementwise.h) call libm's expf, which does not
// vectorise. Their kernels therefore evaluate the same formulas a native vector at a time
// with fast_exp (tensor/cpu/vec.h, ~1 ulp), compiled per ISA level (Note [Kernel ISA
// variants]); a strided run gathers its elements into the same vectors, so every element
// gets the same bits whatever the layout. sigmoid(z) is exactly 0 below -87 (where e^-z
// would overflow f32), as 1 / (1 + inf) is in the scalar formula.
template <class V>
[[gnu::always_inline]] inline V sigmoid_vec(const V& z) {
  const V s = 1.0f / (1.0f + fast_exp(-z));
  return z < splat<V>(-87.0f) ? splat<V>(0.0f) : s;
}

template <class V>
[[gnu::always_inline]] inline V gelu_u2(const V& x) {  // 2 u = 2 k (x + c x^3)
  return 2.0f * kGeluK * (x + kGeluC * x * x * x);
}

// Loads n <= kLanes<V> elements of stride s (the rest 0), and stores them back.
template <class V>
[[gnu::always_inline]] inline V gather(const float* p, int64_t s, int64_t n) {
  if (s == 1 && n == kLanes<V>) return load<V>(p);
  V v = splat<V>(0.0f);
  for (int64_t i = 0; i < n; ++i) v[i] = p[i * s];
  return v;
}
template <class V>
[[gnu::always_inline]] inline void scatter(float* p, int64_t s, int64_t n, const V& v) {
  if (s == 1 && n == kLanes<V>) return store(p, v);
  for (int64_t i = 0; i < n; ++i) p[i * s] = v[i];
}

// fn(i, w) for each run of w <= kLanes<V> elements from i, i < n.
template <class V, class Fn>
[[gnu::always_inline]] inline void for_each_vector(int64_t n, Fn&& fn) {
  for (int64_t i = 0; i < n; i += kLanes<V>) fn(i, std::min<int64_t>(kLanes<V>, n - i));
}

// o[i so] = gelu(x[i sx]) for i < n.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void gelu_run_body(float* o, int64_t so, const float* x, int64_t sx,
                                                 int64_t n) {
  using V = typename Native<kIsa>::F;
  for_each_vector<V>(n, [&](int64_t i, int64_t w) {
    const V v = gather<V>(x + i * sx, sx, w);
    scatter(o + i * so, so, w, v * sigmoid_vec(gelu_u2(v)));
  });
}

// o[i so] = dy[i sd] * gelu'(x[i sx]) for i < n.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void gelu_backward_run_body(float* o, int64_t so, const float* dy,
                                                          int64_t sd, const float* x, int64_t sx,
                                                          int64_t n) {
  using V = typename Native<kIsa>::F;
  for_each_vector<V>(n, [&](int64_t i, int64_t w) {
    const V v = gather<V>(x + i * sx, sx, w);
    const V s = sigmoid_vec(gelu_u2(v));
    const V grad = s + 2.0f * v * s * (1.0f - s) * kGeluK * (1.0f + 3.0f * kGeluC * v * v);
    scatter(o + i * so, so, w, gather<V>(dy + i * sd, sd, w) * grad);
  });
}

FITGRAD_ISA_KERNEL(void, gelu_run, (float* o, int64_t so, const float* x, int64_t sx, int64_t n),
                   (o, so, x, sx, n))
FITGRAD_ISA_KERNEL(void, gelu_backward_run,
                   (float* o, int64_t so, const float* dy, int64_t sd, const float* x, int64_t sx,
                    int64_t n),
                   (o, so, dy, sd, x, sx, n))

// Note [Vectorised SwiGLU]
// The Llama-family MLP's silu(gate) * up, its gradients, and silu alone, on the same
// sigmoid_vec as gelu (Note [Vectorised gelu]): libm's expf, called per element, took 7% of a
// bf16 SmolLM2 evaluation on the AMX Xeon (bench/RESULTS.md, issue 45). Strided runs gather
// into the same vectors, so an element's bits do not depend on the layout.
// o[i so] = silu(g[i sg]) * u[i su] for i < n, or silu(g) alone when u is null.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void swiglu_run_body(float* o, int64_t so, const float* g, int64_t sg,
                                                   const float* u, int64_t su, int64_t n) {
  using V = typename Native<kIsa>::F;
  for_each_vector<V>(n, [&](int64_t i, int64_t w) {
    const V v = gather<V>(g + i * sg, sg, w);
    const V silu_v = v * sigmoid_vec(v);
    scatter(o + i * so, so, w, u ? silu_v * gather<V>(u + i * su, su, w) : silu_v);
  });
}

// dg = dy * u * silu'(g), du = dy * silu(g), silu'(g) = s (1 + g (1 - s)), s = sigmoid(g);
// the five operands' strides in s[] (dg, du, dy, g, u).
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void swiglu_backward_run_body(float* dg, float* du, const float* dy,
                                                            const float* g, const float* u,
                                                            const int64_t* s, int64_t n) {
  using V = typename Native<kIsa>::F;
  for_each_vector<V>(n, [&](int64_t i, int64_t w) {
    const V d = gather<V>(dy + i * s[2], s[2], w);
    const V v = gather<V>(g + i * s[3], s[3], w);
    const V sig = sigmoid_vec(v);
    scatter(dg + i * s[0], s[0], w,
            d * gather<V>(u + i * s[4], s[4], w) * sig * (1.0f + v * (1.0f - sig)));
    scatter(du + i * s[1], s[1], w, d * v * sig);
  });
}

FITGRAD_ISA_KERNEL(void, swiglu_run,
                   (float* o, int64_t so, const float* g, int64_t sg, const float* u, int64_t su,
                    int64_t n),
                   (o, so, g, sg, u, su, n))
FITGRAD_ISA_KERNEL(void, swiglu_backward_run,
                   (float* dg, float* du, const float* dy, const float* g, const float* u,
                    const int64_t* s, int64_t n),
                   (dg, du, dy, g, u, s, n))

constexpr int64_t kTile = 256;

template <class T>
T* typed(const StridedOperand& t) {
  return static_cast<T*>(t.data) + t.offset;
}

// n elements of t from element `off`, stride s, converted into the f32 tile dst, and back.
// A unit-stride bf16 or f32 tile is one vector conversion or copy (bf16_rows.h: the same
// values as convert()).
void load_tile(const StridedOperand& t, int64_t off, int64_t s, int64_t n, float* dst) {
  dispatch_floating(t.dtype, "elementwise operand", [&](auto e) {
    using T = decltype(e);
    const T* p = typed<T>(t) + off;
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (s == 1) return widen_bf16(p, n, dst);
    } else if constexpr (std::is_same_v<T, float>) {
      if (s == 1) return void(std::copy_n(p, n, dst));
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = convert<float>(p[i * s]);
  });
}
void store_tile(const StridedOperand& t, int64_t off, int64_t s, int64_t n, const float* src) {
  dispatch_floating(t.dtype, "elementwise operand", [&](auto e) {
    using T = decltype(e);
    T* p = typed<T>(t) + off;
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (s == 1) return round_to_bf16(src, n, p);
    } else if constexpr (std::is_same_v<T, float>) {
      if (s == 1) return void(std::copy_n(src, n, p));
    }
    for (int64_t i = 0; i < n; ++i) p[i * s] = convert<T>(src[i]);
  });
}

bool all_f32(std::initializer_list<const StridedOperand*> ops) {
  for (const StridedOperand* t : ops)
    if (t->dtype != DType::f32) return false;
  return true;
}

int64_t inner_stride(const StridedOperand& t) { return t.strides.empty() ? 0 : t.strides.back(); }

// Note [Native low-precision elementwise]: fn(tiles, n) computes outputs tiles[0..NOut)
// from inputs tiles[NOut..), all f32 and contiguous, n <= kTile elements each.
template <size_t NOut, size_t NIn, class TileFn>
void tiled(const Shape& shape, const std::array<const StridedOperand*, NOut + NIn>& ops,
           TileFn fn) {
  constexpr size_t N = NOut + NIn;
  std::array<const Strides*, N> strides{};
  std::array<int64_t, N> s{}, zero{};
  for (size_t k = 0; k < N; ++k) {
    strides[k] = &ops[k]->strides;
    s[k] = inner_stride(*ops[k]);
  }
  parallel_runs<N>(shape, strides, zero, [&](const std::array<int64_t, N>& off, int64_t count) {
    float buf[N][kTile];
    std::array<float*, N> tiles{};
    for (size_t k = 0; k < N; ++k) tiles[k] = buf[k];
    for (int64_t t0 = 0; t0 < count; t0 += kTile) {
      const int64_t n = std::min(kTile, count - t0);
      for (size_t k = NOut; k < N; ++k) load_tile(*ops[k], off[k] + t0 * s[k], s[k], n, buf[k]);
      fn(tiles, n);
      for (size_t k = 0; k < NOut; ++k) store_tile(*ops[k], off[k] + t0 * s[k], s[k], n, buf[k]);
    }
  });
}

float* f32_data(const StridedOperand& t) {
  FG_ASSERT(t.dtype == DType::f32);
  return static_cast<float*>(t.data) + t.offset;
}

// An elementwise op as a run kernel k(o, so, x, sx, n), or k(o, so, x, sx, y, sy, n) for two
// inputs, each pointer with its stride: over the operands in place when all are f32, else
// over f32 tiles of them (Note [Native low-precision elementwise]). The vectorised activations
// (Note [Vectorised gelu], Note [Vectorised SwiGLU]) are such kernels, and so are the scalar
// ops' loops below.
template <class RunKernel>
void unary_runs(const Shape& shape, const StridedOperand& out, const StridedOperand& x,
                RunKernel k) {
  if (!all_f32({&out, &x}))
    return tiled<1, 1>(shape, {&out, &x},
                       [&](const auto& t, int64_t n) { k(t[0], 1, t[1], 1, n); });
  float* o = f32_data(out);
  const float* a = f32_data(x);
  const int64_t so = inner_stride(out), sa = inner_stride(x);
  parallel_runs<2>(shape, {&out.strides, &x.strides}, {0, 0},
                   [&](const std::array<int64_t, 2>& off, int64_t count) {
                     k(o + off[0], so, a + off[1], sa, count);
                   });
}
template <class RunKernel>
void binary_runs(const Shape& shape, const StridedOperand& out, const StridedOperand& x,
                 const StridedOperand& y, RunKernel k) {
  if (!all_f32({&out, &x, &y}))
    return tiled<1, 2>(shape, {&out, &x, &y},
                       [&](const auto& t, int64_t n) { k(t[0], 1, t[1], 1, t[2], 1, n); });
  float* o = f32_data(out);
  const float* a = f32_data(x);
  const float* b = f32_data(y);
  const int64_t so = inner_stride(out), sa = inner_stride(x), sb = inner_stride(y);
  parallel_runs<3>(shape, {&out.strides, &x.strides, &y.strides}, {0, 0, 0},
                   [&](const std::array<int64_t, 3>& off, int64_t count) {
                     k(o + off[0], so, a + off[1], sa, b + off[2], sb, count);
                   });
}

// A scalar op f over every element: unit-stride runs take a plain indexed loop the compiler
// can vectorise.
template <class F>
void unary_loop(const Shape& shape, const StridedOperand& out, const StridedOperand& x, F f) {
  unary_runs(shape, out, x, [&](float* o, int64_t so, const float* a, int64_t sa, int64_t n) {
    if (so == 1 && sa == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa]);
    }
  });
}

template <class F>
void binary_loop(const Shape& shape, const StridedOperand& out, const StridedOperand& x,
                 const StridedOperand& y, F f) {
  binary_runs(
      shape, out, x, y,
      [&](float* o, int64_t so, const float* a, int64_t sa, const float* b, int64_t sb, int64_t n) {
        if (so == 1 && sa == 1 && sb == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
        } else if (so == 1 && sa == 1 && sb == 0) {  // a broadcast scalar row
          const float vb = *b;
          for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], vb);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb]);
        }
      });
}

}  // namespace

void unary_f32(UnaryOp op, float param, const Shape& shape, const StridedOperand& out,
               const StridedOperand& x) {
  switch (op) {
    case UnaryOp::neg: return unary_loop(shape, out, x, [](float v) { return -v; });
    case UnaryOp::exp: return unary_loop(shape, out, x, [](float v) { return std::exp(v); });
    case UnaryOp::tanh: return unary_loop(shape, out, x, [](float v) { return std::tanh(v); });
    case UnaryOp::log: return unary_loop(shape, out, x, [](float v) { return std::log(v); });
    case UnaryOp::sqrt: return unary_loop(shape, out, x, [](float v) { return std::sqrt(v); });
    case UnaryOp::rsqrt:
      return unary_loop(shape, out, x, [](float v) { return 1.0f / std::sqrt(v); });
    case UnaryOp::pow:
      return unary_loop(shape, out, x, [param](float v) { return std::pow(v, param); });
    case UnaryOp::scale: return unary_loop(shape, out, x, [param](float v) { return v * param; });
    case UnaryOp::add_scalar:
      return unary_loop(shape, out, x, [param](float v) { return v + param; });
    case UnaryOp::gelu: return unary_runs(shape, out, x, gelu_run);  // Note [Vectorised gelu]
    case UnaryOp::silu:                                              // Note [Vectorised SwiGLU]
      return unary_runs(shape, out, x,
                        [](float* o, int64_t so, const float* v, int64_t sv, int64_t n) {
                          swiglu_run(o, so, v, sv, nullptr, 0, n);
                        });
  }
  FG_ASSERT(false, "unknown unary op {}", int(op));
}

void binary_f32(BinaryOp op, const Shape& shape, const StridedOperand& out, const StridedOperand& a,
                const StridedOperand& b) {
  switch (op) {
    case BinaryOp::add:
      return binary_loop(shape, out, a, b, [](float x, float y) { return x + y; });
    case BinaryOp::sub:
      return binary_loop(shape, out, a, b, [](float x, float y) { return x - y; });
    case BinaryOp::mul:
      return binary_loop(shape, out, a, b, [](float x, float y) { return x * y; });
    case BinaryOp::div:
      return binary_loop(shape, out, a, b, [](float x, float y) { return x / y; });
    case BinaryOp::gelu_backward:  // Note [Vectorised gelu]
      return binary_runs(shape, out, a, b, gelu_backward_run);
    case BinaryOp::silu_backward:
      return binary_loop(shape, out, a, b, [](float dy, float x) { return dy * silu_grad(x); });
    case BinaryOp::swiglu: return binary_runs(shape, out, a, b, swiglu_run);
  }
  FG_ASSERT(false, "unknown binary op {}", int(op));
}

void swiglu_backward_f32(const Shape& shape, const StridedOperand& dgate, const StridedOperand& dup,
                         const StridedOperand& dy, const StridedOperand& gate,
                         const StridedOperand& up) {
  if (!all_f32({&dgate, &dup, &dy, &gate, &up}))
    return tiled<2, 3>(shape, {&dgate, &dup, &dy, &gate, &up}, [](const auto& t, int64_t n) {
      const int64_t unit[5] = {1, 1, 1, 1, 1};  // the tiles are contiguous
      swiglu_backward_run(t[0], t[1], t[2], t[3], t[4], unit, n);
    });
  float* dg = f32_data(dgate);
  float* du = f32_data(dup);
  const float* d = f32_data(dy);
  const float* g = f32_data(gate);
  const float* u = f32_data(up);
  const std::array<int64_t, 5> s = {inner_stride(dgate), inner_stride(dup), inner_stride(dy),
                                    inner_stride(gate), inner_stride(up)};
  parallel_runs<5>(shape, {&dgate.strides, &dup.strides, &dy.strides, &gate.strides, &up.strides},
                   {0, 0, 0, 0, 0}, [&](const std::array<int64_t, 5>& off, int64_t count) {
                     swiglu_backward_run(dg + off[0], du + off[1], d + off[2], g + off[3],
                                         u + off[4], s.data(), count);
                   });
}

}  // namespace fitgrad::cpu
