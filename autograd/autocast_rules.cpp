// The autocast op table and autocast_operands (autocast_rules.h, Note [Autocast op table]).
#include "autograd/autocast_rules.h"

#include "autograd/autocast.h"
#include "autograd/autocast_cache.h"
#include "autograd/functions.h"
#include "tensor/error.h"

namespace fitgrad::autograd {
namespace {

using backend::OpId;
using P = AutocastPolicy;

// clang-format off
constexpr AutocastRule kRules[] = {
    {OpId::copy, P::as_is}, {OpId::fill, P::as_is},
    {OpId::add, P::promote}, {OpId::sub, P::promote}, {OpId::mul, P::promote},
    {OpId::div, P::promote}, {OpId::add_, P::as_is},  // in place: dst keeps its dtype
    {OpId::neg, P::as_is}, {OpId::exp, P::fp32_internal},
    {OpId::tanh, P::fp32_internal}, {OpId::log, P::fp32_internal},
    {OpId::sqrt, P::as_is}, {OpId::rsqrt, P::fp32_internal}, {OpId::pow, P::fp32_internal},
    {OpId::scale, P::as_is}, {OpId::add_scalar, P::as_is},
    {OpId::gelu, P::as_is}, {OpId::silu, P::as_is}, {OpId::gelu_backward, P::as_is},
    {OpId::silu_backward, P::as_is}, {OpId::swiglu, P::as_is}, {OpId::swiglu_backward, P::as_is},
    {OpId::sum, P::fp32_internal}, {OpId::max, P::as_is},  // a max is exact in any dtype
    {OpId::max_backward, P::as_is},
    {OpId::matmul, P::lower}, {OpId::linear, P::lower},
    {OpId::layer_norm, P::fp32_internal}, {OpId::layer_norm_backward, P::as_is},
    {OpId::rms_norm, P::fp32_internal}, {OpId::rms_norm_backward, P::as_is},
    {OpId::softmax, P::fp32_internal}, {OpId::softmax_backward, P::as_is},
    {OpId::log_softmax, P::fp32_internal}, {OpId::log_softmax_backward, P::as_is},
    {OpId::flash_attention, P::lower}, {OpId::flash_attention_backward, P::as_is},
    {OpId::naive_attention, P::lower}, {OpId::naive_attention_backward, P::as_is},
    {OpId::embedding, P::as_is}, {OpId::embedding_backward, P::as_is},
    {OpId::rope, P::as_is}, {OpId::rope_backward, P::as_is},
    {OpId::dropout, P::as_is}, {OpId::dropout_backward, P::as_is},
    {OpId::uniform, P::as_is}, {OpId::normal_, P::as_is},
    {OpId::cross_entropy, P::fp32_internal}, {OpId::cross_entropy_backward, P::as_is},
    {OpId::adamw_update, P::as_is}, {OpId::sgd_update, P::as_is},
    {OpId::sum_squares, P::fp32_internal}, {OpId::scale_, P::as_is},
    {OpId::adam8bit_update, P::as_is}, {OpId::adafactor_update, P::as_is},
    {OpId::apollo_update, P::as_is},
    {OpId::svd_basis, P::as_is},
    {OpId::quantize_4bit, P::as_is}, {OpId::dequantize_4bit, P::as_is},
    {OpId::embedding_4bit, P::as_is}, {OpId::linear_4bit, P::as_is},
    {OpId::quantize_int8, P::as_is}, {OpId::dequantize_int8, P::as_is},
};
// clang-format on

// x in the compute dtype dt: through the step's cache for a weight, else a plain cast.
Tensor lower(const Tensor& x, DType dt) {
  if (!x.defined() || !is_floating(x.dtype()) || x.dtype() == dt) return x;
  if (Tensor cached = cached_cast(x, dt); cached.defined()) return cached;
  return cast(x, dt);
}

}  // namespace

std::span<const AutocastRule> autocast_rules() { return kRules; }

AutocastPolicy autocast_policy(backend::OpId op) {
  for (const AutocastRule& r : kRules)
    if (r.op == op) return r.policy;
  FG_ASSERT(false, "[autocast] {} has no row in the autocast table", backend::op_name(op));
  return P::as_is;
}

const char* policy_name(AutocastPolicy policy) {
  switch (policy) {
    case P::lower: return "lower";
    case P::fp32_internal: return "fp32_internal";
    case P::promote: return "promote";
    case P::as_is: return "as_is";
  }
  return "?";
}

std::vector<Tensor> autocast_operands(backend::OpId op, std::vector<Tensor> operands) {
  const DType dt = autocast_dtype();
  if (dt == DType::f32 || autocast_policy(op) != P::lower) return operands;
  for (Tensor& t : operands) t = lower(t, dt);
  return operands;
}

Tensor autocast_operand(backend::OpId op, const Tensor& operand) {
  return autocast_operands(op, {operand})[0];
}

}  // namespace fitgrad::autograd
