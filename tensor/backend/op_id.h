// The identity of every op that reaches a backend (DESIGN.md, Ops): the front-ends dispatch
// by it, each backend's kernel table is indexed by it, and errors, tests and the
// cross-backend harness name ops through op_name(). One list, FITGRAD_OPS below, generates
// the enum and the names, so they cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace fitgrad::backend {

// X(name): one entry per op. Forward and backward are separate ops, as each backend
// implements them separately.
// clang-format off
#define FITGRAD_OPS(X) \
  X(copy) X(fill) \
  X(add) X(sub) X(mul) X(div) X(add_) \
  X(neg) X(exp) X(tanh) X(log) X(sqrt) X(rsqrt) X(pow) X(scale) X(add_scalar) \
  X(gelu) X(silu) X(gelu_backward) X(silu_backward) X(swiglu) X(swiglu_backward) \
  X(sum) X(max) X(max_backward) \
  X(matmul) X(linear) \
  X(layer_norm) X(layer_norm_backward) X(rms_norm) X(rms_norm_backward) \
  X(softmax) X(softmax_backward) X(log_softmax) X(log_softmax_backward) \
  X(flash_attention) X(flash_attention_backward) X(naive_attention) X(naive_attention_backward) \
  X(embedding) X(embedding_backward) X(rope) X(rope_backward) \
  X(dropout) X(dropout_backward) X(uniform) X(normal_) \
  X(cross_entropy) X(cross_entropy_backward) \
  X(adamw_update) X(sgd_update) X(sum_squares) X(scale_) X(adam8bit_update) X(adafactor_update) \
  X(apollo_update) \
  X(svd_basis) \
  X(quantize_4bit) X(dequantize_4bit) X(embedding_4bit) X(linear_4bit) \
  X(quantize_int8) X(dequantize_int8)
// clang-format on

enum class OpId : uint16_t {
#define FITGRAD_OP_ENUM(name) name,
  FITGRAD_OPS(FITGRAD_OP_ENUM)
#undef FITGRAD_OP_ENUM
};

inline constexpr size_t kOpCount = 0
#define FITGRAD_OP_COUNT(name) +1
    FITGRAD_OPS(FITGRAD_OP_COUNT)
#undef FITGRAD_OP_COUNT
    ;

// "matmul", "layer_norm_backward", ...: the name the front-end's errors use.
const char* op_name(OpId op);

// Every op, in enum order.
const std::array<OpId, kOpCount>& all_ops();

}  // namespace fitgrad::backend
