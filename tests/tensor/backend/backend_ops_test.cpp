// The cross-backend op harness (in the manner of ggml's test-backend-ops): one row per op of
// backend::FITGRAD_OPS, each run in f32, bf16 and f16 through the public front-end.
//   - Coverage: every op has a row, and the cpu and meta tables have a kernel for it.
//   - meta against cpu: the same output shapes and dtypes, and the same allocations and
//     frees during the op (sizes, requested bytes, categories), event for event.
//   - cuda against cpu: each output within the dtype's tolerance (op_harness.h), when a
//     GPU is usable and the cuda table has the op; otherwise the row says why it skips.
// The cpu kernels themselves are checked against fp64 references and finite differences
// row by row in tests/tensor/ops/; this harness holds every other backend to the cpu.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tensor/backend/kernel_table.h"
#include "tensor/device_registry.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/activation.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cross_entropy.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/embedding.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/optim_update.h"
#include "tensor/ops/quantize.h"
#include "tensor/ops/quantize_int8.h"
#include "tensor/ops/random.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/rope.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/svd.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

using backend::OpId;
using Tensors = std::vector<Tensor>;

// One op: inputs made on a device (before the allocations are watched), then the op.
struct OpRow {
  OpId op;
  std::function<Tensors(Device, DType)> inputs;
  std::function<Tensors(Tensors&)> run;  // the outputs (in-place ops: the updated inputs)
};

// Seeded inputs in [lo, hi), made on the CPU and moved to `device`.
Tensor input(const Shape& shape, uint64_t seed, Device device, DType dtype, double lo = -1,
             double hi = 1) {
  return random_tensor(shape, seed, dtype, lo, hi).to(device);
}
Tensor ids(std::vector<int64_t> v, Device device) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n}, DType::i64).to(device);
}

const Shape kX{3, 5};         // elementwise, softmax, norms (rows 3, C 5)
const Shape kQ{1, 2, 6, 8};   // attention q / rope (B, H, T, D)
const Shape kKv{1, 1, 6, 8};  // attention k, v (GQA: one kv head)

OpRow unary(OpId op, std::function<Tensor(const Tensor&)> fn, double lo = -1) {
  return {op, [lo](Device d, DType t) { return Tensors{input(kX, 1, d, t, lo, 2)}; },
          [fn](Tensors& in) { return Tensors{fn(in[0])}; }};
}
OpRow binary(OpId op, std::function<Tensor(const Tensor&, const Tensor&)> fn) {
  return {op,
          [](Device d, DType t) {
            return Tensors{input(kX, 2, d, t), input({5}, 3, d, t, 0.5, 2)};
          },
          [fn](Tensors& in) { return Tensors{fn(in[0], in[1])}; }};
}
OpRow same_shape(OpId op, std::function<Tensor(const Tensor&, const Tensor&)> fn) {
  return {op,
          [](Device d, DType t) {
            return Tensors{input(kX, 4, d, t), input(kX, 5, d, t)};
          },
          [fn](Tensors& in) { return Tensors{fn(in[0], in[1])}; }};
}

std::vector<OpRow> rows() {
  std::vector<OpRow> r;
  r.push_back({OpId::copy,
               [](Device d, DType t) {
                 return Tensors{Tensor::zeros({5, 3}, t, d), input(kX, 6, d, DType::f32)};
               },
               [](Tensors& in) {
                 in[0].copy_(in[1].transpose(0, 1));
                 return Tensors{in[0]};
               }});
  r.push_back({OpId::fill,
               [](Device d, DType t) {
                 return Tensors{Tensor::zeros({4, 6}, t, d)};
               },
               [](Tensors& in) {
                 Tensor v = in[0].slice(1, 0, 6, 2);
                 v.fill_(1.5);
                 return Tensors{in[0]};
               }});
  r.push_back(binary(OpId::add, ops::add));
  r.push_back(binary(OpId::sub, ops::sub));
  r.push_back(binary(OpId::mul, ops::mul));
  r.push_back(binary(OpId::div, ops::div));
  r.push_back({OpId::add_,
               [](Device d, DType t) {
                 return Tensors{input(kX, 7, d, t), input({5}, 8, d, t)};
               },
               [](Tensors& in) {
                 ops::add_(in[0], in[1]);
                 return Tensors{in[0]};
               }});
  r.push_back(unary(OpId::neg, ops::neg));
  r.push_back(unary(OpId::exp, ops::exp));
  r.push_back(unary(OpId::tanh, ops::tanh));
  r.push_back(unary(OpId::log, ops::log, 0.5));
  r.push_back(unary(OpId::sqrt, ops::sqrt, 0.5));
  r.push_back(unary(OpId::rsqrt, ops::rsqrt, 0.5));
  r.push_back(unary(
      OpId::pow, [](const Tensor& x) { return ops::pow(x, 1.5); }, 0.5));
  r.push_back(unary(OpId::scale, [](const Tensor& x) { return ops::scale(x, -0.3); }));
  r.push_back(unary(OpId::add_scalar, [](const Tensor& x) { return ops::add_scalar(x, 0.25); }));
  r.push_back(unary(OpId::gelu, ops::gelu));
  r.push_back(unary(OpId::silu, ops::silu));
  r.push_back(same_shape(OpId::gelu_backward, ops::gelu_backward));
  r.push_back(same_shape(OpId::silu_backward, ops::silu_backward));
  r.push_back(same_shape(OpId::swiglu, ops::swiglu));
  r.push_back({OpId::swiglu_backward,
               [](Device d, DType t) {
                 return Tensors{input(kX, 9, d, t), input(kX, 10, d, t), input(kX, 11, d, t)};
               },
               [](Tensors& in) {
                 auto [dg, du] = ops::swiglu_backward(in[0], in[1], in[2]);
                 return Tensors{dg, du};
               }});
  r.push_back({OpId::sum,
               [](Device d, DType t) {
                 return Tensors{input({3, 4, 5}, 12, d, t)};
               },
               [](Tensors& in) {
                 return Tensors{ops::sum(in[0], {0, 2}), ops::mean(in[0], {1}, true)};
               }});
  r.push_back({OpId::max, [](Device d, DType t) { return Tensors{input(kX, 13, d, t)}; },
               [](Tensors& in) {
                 const ops::MaxOut m = ops::max(in[0], 1);
                 return Tensors{m.values, m.indices};
               }});
  r.push_back({OpId::max_backward,
               [](Device d, DType t) {
                 return Tensors{input({3}, 14, d, t), ids({4, 0, 2}, d)};
               },
               [](Tensors& in) { return Tensors{ops::max_backward(in[0], in[1], kX, 1, false)}; }});
  r.push_back({OpId::matmul,
               [](Device d, DType t) {
                 return Tensors{input({2, 3, 4}, 15, d, t), input({4, 5}, 16, d, t)};
               },
               [](Tensors& in) {
                 return Tensors{ops::matmul(in[0], in[1]), ops::matmul(in[0], in[0], false, true)};
               }});
  r.push_back({OpId::linear,
               [](Device d, DType t) {
                 return Tensors{input(kX, 17, d, t), input({4, 5}, 18, d, t), input({4}, 19, d, t)};
               },
               [](Tensors& in) { return Tensors{ops::linear(in[0], in[1], in[2])}; }});
  r.push_back({OpId::layer_norm,
               [](Device d, DType t) {
                 return Tensors{input(kX, 20, d, t), input({5}, 21, d, t), input({5}, 22, d, t)};
               },
               [](Tensors& in) {
                 const ops::LayerNormOut o = ops::layer_norm(in[0], in[1], in[2], 1e-5);
                 return Tensors{o.y, o.mean, o.rstd};
               }});
  r.push_back({OpId::layer_norm_backward,
               [](Device d, DType t) {
                 return Tensors{input(kX, 23, d, t), input(kX, 24, d, t), input({5}, 25, d, t)};
               },
               [](Tensors& in) {
                 const ops::LayerNormOut o = ops::layer_norm(in[1], in[2], Tensor(), 1e-5);
                 const ops::LayerNormGrads g =
                     ops::layer_norm_backward(in[0], in[1], in[2], o.mean, o.rstd, true);
                 return Tensors{g.dx, g.dweight, g.dbias};
               }});
  r.push_back({OpId::rms_norm,
               [](Device d, DType t) {
                 return Tensors{input(kX, 26, d, t), input({5}, 27, d, t)};
               },
               [](Tensors& in) {
                 const ops::RmsNormOut o = ops::rms_norm(in[0], in[1], 1e-6);
                 return Tensors{o.y, o.rstd};
               }});
  r.push_back({OpId::rms_norm_backward,
               [](Device d, DType t) {
                 return Tensors{input(kX, 28, d, t), input(kX, 29, d, t), input({5}, 30, d, t)};
               },
               [](Tensors& in) {
                 const ops::RmsNormOut o = ops::rms_norm(in[1], in[2], 1e-6);
                 const ops::RmsNormGrads g = ops::rms_norm_backward(in[0], in[1], in[2], o.rstd);
                 return Tensors{g.dx, g.dweight};
               }});
  r.push_back({OpId::softmax,  // causal (Note [Causal softmax]): (B, H, T 4, S 6)
               [](Device d, DType t) {
                 return Tensors{input({2, 2, 4, 6}, 34, d, t, -3, 3)};
               },
               [](Tensors& in) { return Tensors{ops::causal_softmax(in[0])}; }});
  for (bool log : {false, true}) {
    r.push_back({log ? OpId::log_softmax : OpId::softmax,
                 [](Device d, DType t) { return Tensors{input(kX, 31, d, t, -3, 3)}; },
                 [log](Tensors& in) {
                   return Tensors{log ? ops::log_softmax(in[0], 0) : ops::softmax(in[0], 1)};
                 }});
    r.push_back({log ? OpId::log_softmax_backward : OpId::softmax_backward,
                 [](Device d, DType t) {
                   return Tensors{input(kX, 32, d, t), input(kX, 33, d, t)};
                 },
                 [log](Tensors& in) {
                   const Tensor y = log ? ops::log_softmax(in[1], 1) : ops::softmax(in[1], 1);
                   return Tensors{log ? ops::log_softmax_backward(in[0], y, 1)
                                      : ops::softmax_backward(in[0], y, 1)};
                 }});
  }
  auto qkv = [](Device d, DType t) {
    return Tensors{input(kQ, 34, d, t), input(kKv, 35, d, t), input(kKv, 36, d, t),
                   input(kQ, 37, d, t)};
  };
  r.push_back({OpId::flash_attention, qkv, [](Tensors& in) {
                 const ops::AttentionOut o = ops::flash_attention(in[0], in[1], in[2], true);
                 return Tensors{o.o, o.lse};
               }});
  r.push_back({OpId::flash_attention_backward, qkv, [](Tensors& in) {
                 const ops::AttentionOut o = ops::flash_attention(in[0], in[1], in[2], true);
                 const ops::AttentionGrads g =
                     ops::flash_attention_backward(in[3], in[0], in[1], in[2], o.o, o.lse, true);
                 return Tensors{g.dq, g.dk, g.dv};
               }});
  r.push_back({OpId::naive_attention, qkv, [](Tensors& in) {
                 return Tensors{ops::naive_attention(in[0], in[1], in[2], true)};
               }});
  r.push_back({OpId::naive_attention_backward, qkv, [](Tensors& in) {
                 const ops::AttentionGrads g =
                     ops::naive_attention_backward(in[3], in[0], in[1], in[2], true);
                 return Tensors{g.dq, g.dk, g.dv};
               }});
  r.push_back({OpId::embedding,
               [](Device d, DType t) {
                 return Tensors{input({7, 4}, 38, d, t), ids({3, 0, 6, 3}, d)};
               },
               [](Tensors& in) { return Tensors{ops::embedding(in[0], in[1])}; }});
  r.push_back({OpId::embedding_backward,
               [](Device d, DType t) {
                 return Tensors{input({4, 4}, 39, d, t), ids({3, 0, 6, 3}, d)};
               },
               [](Tensors& in) { return Tensors{ops::embedding_backward(in[0], in[1], 7)}; }});
  r.push_back({OpId::rope, [](Device d, DType t) { return Tensors{input(kQ, 40, d, t)}; },
               [](Tensors& in) { return Tensors{ops::rope(in[0], 3, 1e4)}; }});
  r.push_back({OpId::rope_backward, [](Device d, DType t) { return Tensors{input(kQ, 41, d, t)}; },
               [](Tensors& in) { return Tensors{ops::rope_backward(in[0], 3, 1e4)}; }});
  r.push_back({OpId::dropout, [](Device d, DType t) { return Tensors{input(kX, 42, d, t)}; },
               [](Tensors& in) {
                 Generator gen(5);
                 return Tensors{ops::dropout(in[0], 0.3, gen).y};
               }});
  r.push_back({OpId::dropout_backward,
               [](Device d, DType t) { return Tensors{input(kX, 43, d, t)}; },
               [](Tensors& in) {
                 return Tensors{ops::dropout_backward(in[0], 0.3, {5, 16})};
               }});
  r.push_back({OpId::uniform, [](Device d, DType t) { return Tensors{Tensor::zeros({}, t, d)}; },
               [](Tensors& in) {
                 Generator gen(6);
                 return Tensors{gen.uniform({4, 5}, -2, 3, in[0].dtype(), in[0].device())};
               }});
  r.push_back({OpId::normal_,
               [](Device d, DType t) {
                 return Tensors{Tensor::zeros({3, 7}, t, d)};
               },
               [](Tensors& in) {
                 ops::normal_(in[0], {9, 4}, 0.02);
                 return Tensors{in[0]};
               }});
  auto logits = [](Device d, DType t) {
    return Tensors{input({6, 9}, 44, d, t, -3, 3), ids({1, -100, 8, 0, 4, 4}, d)};
  };
  r.push_back({OpId::cross_entropy, logits, [](Tensors& in) {
                 const ops::CrossEntropyOut o = ops::cross_entropy(in[0], in[1], -100, 4);
                 return Tensors{o.loss, o.lse};
               }});
  r.push_back({OpId::cross_entropy_backward, logits, [](Tensors& in) {
                 const ops::CrossEntropyOut o = ops::cross_entropy(in[0], in[1], -100, 4);
                 const Tensor one = Tensor::full({}, 1.0).to(in[0].device());
                 return Tensors{ops::cross_entropy_backward(one, in[0], in[1], o.lse, o.stats, -100,
                                                            false, 4)};
               }});
  auto param_grad_states = [](Device d, DType t) {
    return Tensors{input({70}, 45, d, t), input({70}, 46, d, t), input({70}, 47, d, DType::f32),
                   input({70}, 48, d, DType::f32, 0, 1)};
  };
  r.push_back({OpId::adamw_update, param_grad_states, [](Tensors& in) {
                 ops::adamw_update_(in[0], in[1], in[2], in[3],
                                    {0.999f, 0.9f, 0.1f, 0.999f, 0.001f, 0.05f, 1e-8f, -1e-3f});
                 return Tensors{in[0], in[2], in[3]};
               }});
  r.push_back({OpId::sgd_update, param_grad_states, [](Tensors& in) {
                 ops::sgd_update_(in[0], in[1], in[2], {0.1f, 0.01f, 0.9f, 1.0f, true, false});
                 return Tensors{in[0], in[2]};
               }});
  // 300 elements: two 8-bit blocks, the second partial; codes from a fixed pattern.
  auto param_grad_codes = [](Device d, DType t) {
    std::vector<int64_t> codes(300);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = int64_t((i * 37 + 11) % 256);
    const Tensor c = Tensor::from_vector(codes, {300}, DType::i64).to(DType::u8);
    return Tensors{input({300}, 51, d, t),
                   input({300}, 52, d, t),
                   c.to(d),
                   c.to(DType::f32).to(DType::u8).to(d),
                   input({2}, 53, d, DType::f32, 0, 1),
                   input({2}, 54, d, DType::f32, 0, 1)};
  };
  r.push_back({OpId::adam8bit_update, param_grad_codes, [](Tensors& in) {
                 ops::adam8bit_update_(in[0], in[1], in[2], in[3], in[4], in[5],
                                       {0.9f, 0.1f, 0.999f, 0.001f, -1e-3f, 1e-8f, 0.999f, true});
                 return Tensors{in[0], in[2], in[3], in[4], in[5]};
               }});
  auto param_grad_factors = [](Device d, DType t) {
    return Tensors{input({2, 5, 7}, 55, d, t), input({2, 5, 7}, 56, d, t),
                   input({2, 5, 1}, 57, d, DType::f32, 0, 1),
                   input({2, 1, 7}, 58, d, DType::f32, 0, 1)};
  };
  r.push_back({OpId::adafactor_update, param_grad_factors, [](Tensors& in) {
                 backend::AdafactorScalars k;
                 k.rho = 1e-2;
                 k.eps1 = 1e-7f;
                 k.eps2 = 1e-3;
                 k.decay = 0.999f;
                 k.one_minus_beta2 = 0.3f;
                 ops::adafactor_update_(in[0], in[1], in[2], in[3], Tensor(), Tensor(), k);
                 return Tensors{in[0], in[2], in[3]};
               }});
  // A (9, 5) matrix projected on the left, rank 3: the channels are its 5 columns.
  auto param_grad_low = [](Device d, DType t) {
    return Tensors{input({9, 5}, 62, d, t),
                   input({9, 5}, 63, d, t),
                   input({3, 5}, 64, d, t),
                   input({3, 5}, 65, d, DType::f32),
                   input({3, 5}, 66, d, DType::f32, 0, 1),
                   input({1}, 67, d, DType::f32, 0.5, 1)};
  };
  r.push_back({OpId::apollo_update, param_grad_low, [](Tensors& in) {
                 backend::ApolloScalars k{0.9f, 0.1f,   0.999f, 0.001f, 1e-6f, 1e-2,
                                          1.01, 0.999f, true,   false,  false, false};
                 ops::apollo_update_(in[0], in[1], in[2], in[3], in[4], in[5], k);
                 return Tensors{in[0], in[3], in[4], in[5]};
               }});
  // A (6, 4) matrix's first two right singular vectors (written in place; no allocation).
  r.push_back({OpId::svd_basis,
               [](Device d, DType t) {
                 return Tensors{input({6, 4}, 62, d, t), Tensor::zeros({2, 4}, t, d)};
               },
               [](Tensors& in) {
                 ops::svd_basis_(in[0], in[1], false);
                 return Tensors{in[1]};
               }});
  // 333 values: six 64-blocks, the last partial, and an odd count.
  auto four_bit_input = [](Device d, DType t) { return Tensors{input({333}, 59, d, t, -2, 2)}; };
  r.push_back({OpId::quantize_4bit, four_bit_input, [](Tensors& in) {
                 const ops::FourBit q = ops::quantize_4bit(in[0], {});
                 return Tensors{q.packed, q.nested, q.absmax2, q.offset};
               }});
  r.push_back(
      {OpId::dequantize_4bit, four_bit_input, [](Tensors& in) {
         const ops::FourBit q = ops::quantize_4bit(in[0], {quant::FourBitType::fp4, 64, false});
         return Tensors{ops::dequantize_4bit(q, in[0].dtype())};
       }});
  // A (9, 96) weight in groups of 32 (three per row), rounded stochastically from draw 5.
  auto int8_input = [](Device d, DType t) { return Tensors{input({9, 96}, 68, d, t, -2, 2)}; };
  r.push_back({OpId::quantize_int8, int8_input, [](Tensors& in) {
                 ops::Int8 q = ops::quantize_int8(in[0], 32);
                 const Tensor nearest = q.codes.clone();
                 ops::requantize_int8_(q, in[0], {true, 17, 5});
                 return Tensors{nearest, q.codes, q.scales, q.zeros};
               }});
  r.push_back({OpId::dequantize_int8, int8_input, [](Tensors& in) {
                 const ops::Int8 q = ops::quantize_int8(in[0], 32);
                 return Tensors{ops::dequantize_int8(q, in[0].dtype())};
               }});
  // A (9, 96) weight: 96 is no multiple of the blocksize 64, so blocks straddle rows.
  auto four_bit_rows = [](Device d, DType t) {
    return Tensors{input({9, 96}, 60, d, t, -2, 2), ids({3, 0, 8, 3}, d), input({2, 96}, 61, d, t)};
  };
  r.push_back({OpId::embedding_4bit, four_bit_rows, [](Tensors& in) {
                 const ops::FourBit q = ops::quantize_4bit(in[0], {});
                 return Tensors{ops::embedding_4bit(q, in[1], in[0].dtype())};
               }});
  r.push_back({OpId::linear_4bit, four_bit_rows, [](Tensors& in) {
                 const ops::FourBit q = ops::quantize_4bit(in[0], {quant::FourBitType::nf4, 32});
                 return Tensors{ops::linear_4bit(in[2], q)};
               }});
  r.push_back({OpId::sum_squares, [](Device d, DType t) { return Tensors{input({70}, 49, d, t)}; },
               [](Tensors& in) {
                 const double s = ops::sum_squares(in[0]);
                 const bool real = in[0].device().has_bytes();
                 return Tensors{Tensor::full({}, real ? s : 0.0).to(in[0].device())};
               }});
  r.push_back({OpId::scale_, [](Device d, DType t) { return Tensors{input({70}, 50, d, t)}; },
               [](Tensors& in) {
                 ops::scale_(in[0], 0.37f);
                 return Tensors{in[0]};
               }});
  return r;
}

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

struct Seen {
  EventKind kind;
  uint64_t size, requested;
  Category category;
  bool operator==(const Seen&) const = default;
};

// The row's outputs on `device`, and the allocations and frees it made there.
std::pair<Tensors, std::vector<Seen>> run_on(const OpRow& row, Device device, DType dtype) {
  Tensors in = row.inputs(device, dtype);
  CachingAllocator& alloc = allocator_for(device);
  const uint64_t first = alloc.total_events();
  Tensors out = row.run(in);
  std::vector<Seen> seen;
  for (const MemoryEvent& e : alloc.events())
    if (e.seq >= first && (e.kind == EventKind::alloc || e.kind == EventKind::free))
      seen.push_back({e.kind, e.size, e.requested, e.category});
  return {out, seen};
}

TEST(BackendOps, EveryOpHasARowAndACpuAndMetaKernel) {
  std::set<OpId> covered;
  for (const OpRow& row : rows()) covered.insert(row.op);
  for (OpId op : backend::all_ops()) {
    EXPECT_TRUE(covered.count(op)) << "no harness row for " << backend::op_name(op);
    EXPECT_TRUE(backend::has_kernel(DeviceType::cpu, op)) << backend::op_name(op) << " on cpu";
    EXPECT_TRUE(backend::has_kernel(DeviceType::meta, op)) << backend::op_name(op) << " on meta";
  }
}

TEST(BackendOps, MetaAllocatesExactlyAsTheCpu) {
  for (const OpRow& row : rows())
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(std::string(backend::op_name(row.op)) + " " + std::string(dtype_name(dtype)));
      const auto [cpu_out, cpu_seen] = run_on(row, Device::cpu(), dtype);
      const auto [meta_out, meta_seen] = run_on(row, Device::meta(), dtype);
      ASSERT_EQ(meta_out.size(), cpu_out.size());
      for (size_t i = 0; i < cpu_out.size(); ++i) {
        EXPECT_EQ(meta_out[i].device(), Device::meta()) << "output " << i;
        EXPECT_EQ(meta_out[i].shape(), cpu_out[i].shape()) << "output " << i;
        EXPECT_EQ(meta_out[i].dtype(), cpu_out[i].dtype()) << "output " << i;
      }
      EXPECT_EQ(meta_seen, cpu_seen)
          << meta_seen.size() << " events on meta, " << cpu_seen.size() << " on cpu";
    }
}

TEST(BackendOps, CudaMatchesTheCpu) {
  FG_SKIP_WITHOUT_CARD();
  if (!backend::has_kernel(DeviceType::cuda, OpId::add))
    GTEST_SKIP() << "the cuda backend has no op kernels yet";
  for (const OpRow& row : rows())
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(std::string(backend::op_name(row.op)) + " " + std::string(dtype_name(dtype)));
      if (!backend::has_kernel(DeviceType::cuda, row.op)) {
        ADD_FAILURE() << "the cuda table lacks " << backend::op_name(row.op);
        continue;
      }
      const Tensors want = run_on(row, Device::cpu(), dtype).first;
      const Tensors got = run_on(row, Device::cuda(0), dtype).first;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(close_for(want[i].dtype() == DType::i64 ? DType::f32 : dtype,
                              to_f64(got[i].to(Device::cpu())), to_f64(want[i])))
            << "output " << i;
    }
}

}  // namespace
}  // namespace fitgrad::testing
