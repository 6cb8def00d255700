// Preference steps (train/preference_loss.h, Note [Preference steps]) on a real model against
// transformers + PEFT (tests/golden/preference/model_steps.gtb, gen_preference_model_golden.py):
// the tiny Llama of tests/golden/peft_tiny with its adapter (random lora_B, so the policy is not
// the reference), a batch of two pairs, and through train::TrainStep the loss and the gradient
// of every LoRA factor for DPO's sigmoid (also with label smoothing and in two accumulated
// micro-batches), hinge and IPO losses and ORPO, each with an answer a row and with the answers
// packed into one row (Note [Packed pairs]). The DPO reference is the model with its
// adapter off (nn::AdaptersOff), as PEFT's disable_adapter(). Without LoRA, a full fine-tune's
// DPO (its reference a frozen copy) and ORPO, on some of the base's parameters.
#include <gtest/gtest.h>

#include <map>

#include "autograd/grad_mode.h"
#include "nn/lora.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tests/golden/golden_compare.h"
#include "tests/golden/peft_tiny_model.h"
#include "train/model_source.h"
#include "train/train_step.h"

namespace fitgrad {
namespace {

using testing::golden_path;
using testing::GoldenFile;

const GoldenFile& golden() {
  static const GoldenFile f(golden_path("preference/model_steps.gtb"));
  return f;
}

using testing::Recorder;

std::unique_ptr<nn::CausalLM> adapted_model() { return testing::peft_tiny_adapted_model(); }

// Rows `rows` of the golden batch as a micro-batch of pairs.
train::MicroBatch micro_batch(const std::vector<int64_t>& rows) {
  const Tensor ids = golden().tensor("ids"), targets = golden().tensor("targets");
  const int64_t T = ids.size(1);
  std::vector<int64_t> id_rows, target_rows, counts;
  const std::vector<int64_t> all_ids = ids.to_vector<int64_t>(),
                             all_targets = targets.to_vector<int64_t>();
  int64_t trained = 0;
  for (const int64_t r : rows) {
    id_rows.insert(id_rows.end(), all_ids.begin() + r * T, all_ids.begin() + (r + 1) * T);
    target_rows.insert(target_rows.end(), all_targets.begin() + r * T,
                       all_targets.begin() + (r + 1) * T);
    counts.push_back(std::count_if(all_targets.begin() + r * T, all_targets.begin() + (r + 1) * T,
                                   [](int64_t x) { return x != -100; }));
    trained += counts.back();
  }
  const auto n = int64_t(rows.size());
  return {Tensor::from_vector(id_rows, {n, T}, DType::i64),
          Tensor::from_vector(target_rows, {n, T}, DType::i64),
          trained,
          {},
          counts};
}

// The same answers packed end to end into one row (Note [Packed pairs] in data/loader.cpp):
// each answer's positions from 0, its own segment, its span; a row's padding left out (an
// answer ends after its last target's token).
train::MicroBatch packed_micro_batch(const std::vector<int64_t>& rows) {
  const train::MicroBatch unpacked = micro_batch(rows);
  const int64_t T = unpacked.ids.size(1);
  const std::vector<int64_t> ids = unpacked.ids.to_vector<int64_t>(),
                             targets = unpacked.targets.to_vector<int64_t>();
  std::vector<int64_t> packed_ids, packed_targets;
  std::vector<int32_t> positions, begin, end;
  train::MicroBatch b;
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t length = 0;
    for (int64_t t = 0; t < T; ++t)
      if (targets[r * size_t(T) + size_t(t)] != -100) length = t + 2;
    const auto at = int64_t(packed_ids.size());
    for (int64_t t = 0; t < length; ++t) {
      packed_ids.push_back(ids[r * size_t(T) + size_t(t)]);
      packed_targets.push_back(targets[r * size_t(T) + size_t(t)]);
      positions.push_back(int32_t(t));
      begin.push_back(int32_t(at));
      end.push_back(int32_t(at + length));
    }
    b.spans.push_back({0, at, at + length});
  }
  const auto n = int64_t(packed_ids.size());
  b.ids = Tensor::from_vector(packed_ids, {1, n}, DType::i64);
  b.targets = Tensor::from_vector(packed_targets, {1, n}, DType::i64);
  b.trained_targets = unpacked.trained_targets;
  b.row_targets = unpacked.row_targets;
  begin.insert(begin.end(), end.begin(), end.end());
  b.packed.segments = Tensor::from_vector(begin, {2, 1, n}, DType::i32);
  b.packed.positions = {Tensor::from_vector(positions, {1, n}, DType::i32), T};
  return b;
}

TEST(GoldenPreference, StepsEqualTransformersAndPeft) {
  const nlohmann::json& cases = golden().meta().at("cases");
  ASSERT_EQ(cases.size(), 8u);
  const auto model = adapted_model();
  for (const auto& [name, c] : cases.items()) {
    if (c.value("full", false)) continue;
    SCOPED_TRACE(name);
    const train::PreferenceConfig cfg{train::parse_objective(c.at("objective").get<std::string>()),
                                      train::parse_dpo_loss(c.at("loss_type").get<std::string>()),
                                      c.at("beta").get<double>(),
                                      c.at("label_smoothing").get<double>()};
    const bool accum = name.ends_with("_accum");
    for (const bool packed : {false, true}) {
      SCOPED_TRACE(packed ? "answers packed into one row" : "an answer a row");
      Recorder recorder({{model->trainable_parameters(), 0.0}});
      const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 0.0, 0, 1);
      train::TrainStep step(*model, recorder, schedule,
                            {.gradient_accumulation_steps = accum ? 2 : 1, .preference = &cfg});
      step.run(0, [&](int64_t m) {
        const std::vector<int64_t> rows =
            accum ? (m == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{1, 3})
                  : std::vector<int64_t>{0, 1, 2, 3};
        return packed ? packed_micro_batch(rows) : micro_batch(rows);
      });
      const double loss = step.take_log().mean_loss;
      const double want = c.at("loss").get<double>();
      EXPECT_NEAR(loss, want, 1e-5 * std::max(1.0, std::fabs(want)));
      const train::PreferenceStats stats = step.take_preference_stats();
      EXPECT_EQ(stats.pairs, 2);
      ASSERT_EQ(recorder.grads.size(), 28u);
      for (const auto& [param, grad] : recorder.grads)
        testing::expect_matches_golden(golden(), name + " " + param, grad, name + ".grad." + param);
    }
  }
}

// Without LoRA: every parameter of the base trains, DPO's reference a frozen copy of it (so the
// first step's d is 0 and its loss log 2), ORPO without one.
TEST(GoldenPreference, FullFineTuningStepsEqualTransformers) {
  const nlohmann::json& cases = golden().meta().at("cases");
  for (const char* name : {"full_dpo_sigmoid", "full_orpo"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& c = cases.at(name);
    const train::PreferenceConfig cfg{train::parse_objective(c.at("objective").get<std::string>()),
                                      train::DpoLoss::sigmoid, c.at("beta").get<double>(), 0.0};
    const auto model = train::load_model(golden_path("peft_tiny/base"), "", {}).model;
    const auto reference = train::load_model(golden_path("peft_tiny/base"), "", {}).model;
    reference->freeze("*");
    Recorder recorder({{model->named_parameters(), 0.0}});
    const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 0.0, 0, 1);
    train::TrainStep step(
        *model, recorder, schedule,
        {.preference = &cfg,
         .reference_model = cfg.objective == train::Objective::dpo ? reference.get() : nullptr});
    step.run(0, [&](int64_t) { return micro_batch({0, 1, 2, 3}); });
    const double want = c.at("loss").get<double>();
    EXPECT_NEAR(step.take_log().mean_loss, want, 1e-5 * std::max(1.0, std::fabs(want)));
    for (const std::string param : golden().meta().at("full_params"))
      testing::expect_matches_golden(golden(), std::string(name) + " " + param,
                                     recorder.grads.at(param),
                                     std::string(name) + ".grad." + param);
  }
}

// With the adapter off the model is its base: the DPO reference of a fresh adapter (lora_B
// zero) is the policy itself, and of this adapter it is not.
TEST(GoldenPreference, AdaptersOffGiveTheBase) {
  const auto model = adapted_model();
  const auto base = train::load_model(golden_path("peft_tiny/base"), "", {}).model;
  const Tensor ids = golden().tensor("ids");
  autograd::NoGradGuard no_grad;
  const std::vector<float> want = base->forward(ids).to_vector<float>();
  std::vector<float> off, on = model->forward(ids).to_vector<float>();
  {
    const nn::AdaptersOff reference;
    EXPECT_TRUE(nn::AdaptersOff::active());
    off = model->forward(ids).to_vector<float>();
  }
  EXPECT_FALSE(nn::AdaptersOff::active());
  EXPECT_EQ(off, want);
  EXPECT_NE(on, want);
}

}  // namespace
}  // namespace fitgrad
