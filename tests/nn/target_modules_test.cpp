// PEFT's target_modules (Note [Target modules] in nn/target_modules.h): the matching rules
// (a list by name or dotted suffix, a full-match pattern, all-linear without lm_head), a
// model built through targeted_factory that replaces exactly the targeted projections,
// errors that name a target the model does not have, and parameters created frozen in their
// own dtype.
#include "nn/target_modules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/nn/lora_shaped.h"
#include "tests/tensor/memory/events_since.h"

namespace fitgrad::nn {
namespace {

using ::testing::HasSubstr;

TEST(TargetModules, MatchesAsPeftDoes) {
  const TargetModules list = TargetModules::parse("q_proj,self_attn.v_proj");
  EXPECT_TRUE(list.matches("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(list.matches("q_proj"));
  EXPECT_TRUE(list.matches("model.layers.1.self_attn.v_proj"));
  EXPECT_FALSE(list.matches("model.layers.0.self_attn.qq_proj"));  // a suffix, not a name
  EXPECT_FALSE(list.matches("model.layers.0.mlp.v_proj"));
  EXPECT_FALSE(list.matches("model.layers.0.self_attn.q_proj.lora_A"));

  const TargetModules pattern =
      TargetModules::regex(R"(model\.layers\.[01]\.self_attn\.(q|v)_proj)");
  EXPECT_TRUE(pattern.matches("model.layers.1.self_attn.v_proj"));
  EXPECT_FALSE(pattern.matches("model.layers.2.self_attn.v_proj"));
  EXPECT_FALSE(pattern.matches("x.model.layers.1.self_attn.v_proj"));  // the whole key

  const TargetModules all = TargetModules::parse("all-linear");
  EXPECT_TRUE(all.matches("transformer.h.0.attn.c_attn"));
  EXPECT_TRUE(all.matches("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(all.matches("lm_head"));

  EXPECT_THROW(TargetModules::parse("q_proj,,v_proj"), Error);
  EXPECT_THROW(TargetModules::regex("(unclosed"), Error);
}

// Builds `preset_name` with the LoRA-shaped layer on the targets; returns the wrapped paths.
std::vector<std::string> wrapped(const std::string& preset_name, const TargetModules& targets) {
  auto shared = std::make_shared<TargetModules>(targets);
  auto inner = [](const LinearSpec& spec, BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    return std::make_unique<test_layers::LoraShaped>(spec, 2, ctx);
  };
  const auto model =
      build_model(preset(preset_name), {.linear_factory = targeted_factory(shared, inner)});
  check_targets_found(*shared);
  std::vector<std::string> out;
  for (const auto& [name, t] : model->named_parameters())
    if (name.ends_with(".lora_A")) out.push_back(name.substr(0, name.size() - 7));
  return out;
}

TEST(TargetModules, TheFactoryReplacesExactlyTheTargets) {
  const std::vector<std::string> peft_llama =
      wrapped("llama-tiny",
              TargetModules::parse("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"));
  EXPECT_EQ(peft_llama.size(), 2u * 7u);
  EXPECT_EQ(peft_llama.front(), "model.layers.0.self_attn.q_proj");
  // all-linear is the same seven per layer: lm_head (llama-tiny's is untied) stays dense.
  EXPECT_EQ(wrapped("llama-tiny", TargetModules::all_linear()), peft_llama);
  EXPECT_EQ(wrapped("gpt2-tiny", TargetModules::all_linear()).size(), 2u * 4u);
  EXPECT_EQ(
      wrapped("gpt2-tiny", TargetModules::parse("c_attn")),
      (std::vector<std::string>{"transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_attn"}));
}

TEST(TargetModules, ATargetTheModelLacksIsAnError) {
  try {
    wrapped("llama-tiny", TargetModules::parse("q_proj,qkv_proj"));
    ADD_FAILURE() << "qkv_proj was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not found in the model: qkv_proj"));
  }
  try {
    wrapped("gpt2-tiny", TargetModules::regex(R"(.*\.q_proj)"));
    ADD_FAILURE() << "a pattern matching nothing was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("matched no linear layer"));
  }
}

// A module with a frozen bf16 parameter in an f32 build.
class Mixed : public Module {
 public:
  explicit Mixed(BuildContext& ctx) : Module("", "") {
    frozen_ = register_parameter("frozen", {64, 32}, Init::normal(0.02), ctx,
                                 {.dtype = DType::bf16, .requires_grad = false});
    trained_ = register_parameter("trained", {32}, Init::zeros(), ctx);
  }
  Tensor frozen_, trained_;
};

TEST(ParamOptions, AParameterIsCreatedInItsDtypeAndFrozen) {
  BuildContext ctx(BuildOptions{});
  const uint64_t first = allocator_for(Device::cpu()).total_events();
  const Mixed m(ctx);
  EXPECT_EQ(m.frozen_.dtype(), DType::bf16);
  EXPECT_FALSE(autograd::requires_grad(m.frozen_));
  EXPECT_EQ(m.trained_.dtype(), DType::f32);
  EXPECT_TRUE(autograd::requires_grad(m.trained_));
  // One allocation each, at its own size: nothing made in f32 first.
  EXPECT_EQ(testing::requested_since(first), (std::vector<uint64_t>{64 * 32 * 2, 32 * 4}));
  EXPECT_EQ(m.trainable_parameters().size(), 1u);
}

}  // namespace
}  // namespace fitgrad::nn
