// GRPO on a real model against TRL 1.16.0 (tests/golden/grpo/model_steps.gtb,
// gen_grpo_model_golden.py): the tiny Llama of tests/golden/peft_tiny with its adapter, four
// completions of one prompt, and for dapo with token ratios and beta > 0, grpo with GSPO's
// sequence ratio, and bnpo on-policy: the per-token log-probabilities at TRL's temperature
// (CausalLM::token_logprobs, the fused head), the reference's with the adapter off, the loss
// (train::grpo_loss), its statistics and the gradient of every LoRA factor; and the same
// through train::TrainStep running the GRPO objective on rows laid out by grpo_rows.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/lora.h"
#include "optim/schedule.h"
#include "tests/golden/golden_compare.h"
#include "tests/golden/peft_tiny_model.h"
#include "train/objectives/grpo.h"
#include "train/objectives/grpo_loss.h"
#include "train/objectives/grpo_rows.h"
#include "train/train_step.h"

namespace fitgrad {
namespace {

namespace ag = fitgrad::autograd;
using testing::golden_path;
using testing::GoldenFile;

const GoldenFile& golden() {
  static const GoldenFile f(golden_path("grpo/model_steps.gtb"));
  return f;
}

// ids (B, P + T) and the targets of the completion tokens: position P + k - 1 predicts
// completion token k where its mask is 1; -100 elsewhere.
Tensor completion_targets(int64_t p, int64_t t) {
  const Tensor ids = golden().tensor("ids");
  const int64_t b = ids.size(0), l = ids.size(1);
  const std::vector<int64_t> id = ids.to_vector<int64_t>(),
                             mask = golden().tensor("completion_mask").to_vector<int64_t>();
  std::vector<int64_t> targets(size_t(b * l), -100);
  for (int64_t r = 0; r < b; ++r)
    for (int64_t k = 0; k < t; ++k)
      if (mask[size_t(r * t + k)]) targets[size_t(r * l + p + k - 1)] = id[size_t(r * l + p + k)];
  return Tensor::from_vector(targets, {b, l}, DType::i64);
}

// The completion positions' (B, T) of per-position values (B, P + T).
Tensor completion_columns(const Tensor& full, int64_t p, int64_t t) {
  return ag::contiguous(ag::narrow(full, 1, p - 1, t));
}

// A case's configuration, with the generator's clipping bounds and completion length.
train::GrpoConfig config_of(const nlohmann::json& c) {
  const nlohmann::json& meta = golden().meta();
  train::GrpoConfig cfg;
  cfg.loss_type = train::parse_grpo_loss_type(c.at("loss_type").get<std::string>());
  cfg.importance_sampling_level =
      train::parse_importance_sampling(c.at("importance_sampling_level").get<std::string>());
  cfg.beta = c.at("beta").get<double>();
  cfg.epsilon = meta.at("epsilon").get<double>();
  cfg.epsilon_high = meta.at("epsilon_high").get<double>();
  cfg.max_completion_length = meta.at("T").get<int64_t>();
  return cfg;
}

TEST(GoldenGrpoModel, LogProbabilitiesLossAndLoraGradientsEqualTrl) {
  const nlohmann::json& meta = golden().meta();
  const int64_t p = meta.at("P").get<int64_t>(), t = meta.at("T").get<int64_t>();
  const double temperature = meta.at("temperature").get<double>();
  const auto model = testing::peft_tiny_adapted_model();
  model->eval();
  const Tensor ids = golden().tensor("ids"), targets = completion_targets(p, t);
  const int64_t b = ids.size(0);
  const std::vector<double> mask = golden().tensor("completion_mask").to_vector<double>(),
                            old = golden().tensor("old_logp").to_vector<double>(),
                            advantages = golden().tensor("advantages").to_vector<double>();
  // The reference: the adapter off, no gradient.
  std::vector<double> ref;
  {
    ag::NoGradGuard no_grad;
    const nn::AdaptersOff off;
    ref = completion_columns(model->token_logprobs(ids, targets, temperature), p, t)
              .to_vector<double>();
  }
  testing::expect_matches_golden(golden(), "reference log-probabilities",
                                 Tensor::from_vector(ref, {b, t}, DType::f32), "ref_logp");
  for (const auto& [name, c] : meta.at("cases").items()) {
    SCOPED_TRACE(name);
    const train::GrpoConfig cfg = config_of(c);
    train::GrpoInputs in;
    in.rows = b;
    in.cols = t;
    if (c.at("off_policy").get<bool>()) in.old_logp = old;
    in.ref_logp = ref;
    in.mask = mask;
    in.advantages = advantages;
    for (double m : mask) in.num_items_in_batch += m;
    Tensor entropy;
    const Tensor logp =
        completion_columns(model->token_logprobs(ids, targets, temperature, &entropy), p, t);
    testing::expect_matches_golden(golden(), name + " log-probabilities", ag::detach(logp),
                                   name + ".logp");
    const std::vector<double> entropies = completion_columns(entropy, p, t).to_vector<double>();
    in.entropy = entropies;
    train::GrpoStats stats;
    const Tensor loss = train::grpo_loss(logp, in, cfg, &stats);
    ag::backward(loss);
    const double want = c.at("loss").get<double>();
    EXPECT_NEAR(loss.item(), want, 1e-5 * std::max(1.0, std::fabs(want)));
    const nlohmann::json& m = c.at("metrics");
    EXPECT_NEAR(stats.clip_region_mean, m.at("clip_ratio/region_mean").get<double>(), 1e-6);
    EXPECT_NEAR(stats.clip_low_mean, m.at("clip_ratio/low_mean").get<double>(), 1e-6);
    EXPECT_NEAR(stats.entropy, m.at("entropy").get<double>(), 1e-4);
    if (cfg.beta != 0) {
      EXPECT_NEAR(stats.kl, m.at("kl").get<double>(), 1e-6);
    }
    int64_t compared = 0;
    for (const auto& [param, value] : model->trainable_parameters()) {
      testing::expect_matches_golden(golden(), name + " " + param, ag::grad(value),
                                     name + ".grad." + param);
      ag::clear_grad(value);
      ++compared;
    }
    EXPECT_EQ(compared, 28);
  }
}

// The objective in a training step: the golden batch as GRPO rows (Note [GRPO rows]), the old
// log-probabilities moved onto them, the reference's computed by grpo_host_logprobs.
TEST(GoldenGrpoModel, TheObjectiveInATrainStepEqualsTrl) {
  const nlohmann::json& meta = golden().meta();
  const int64_t p = meta.at("P").get<int64_t>(), t = meta.at("T").get<int64_t>();
  const double temperature = meta.at("temperature").get<double>();
  const auto model = testing::peft_tiny_adapted_model();
  const Tensor ids = golden().tensor("ids");
  const int64_t b = ids.size(0), l = ids.size(1);
  const std::vector<int64_t> id = ids.to_vector<int64_t>(),
                             mask = golden().tensor("completion_mask").to_vector<int64_t>();
  const std::vector<double> old = golden().tensor("old_logp").to_vector<double>();
  std::vector<std::vector<int32_t>> prompts, completions;
  for (int64_t r = 0; r < b; ++r) {
    prompts.emplace_back(id.begin() + r * l, id.begin() + r * l + p);
    completions.emplace_back();
    for (int64_t k = 0; k < t && mask[size_t(r * t + k)]; ++k)
      completions.back().push_back(int32_t(id[size_t(r * l + p + k)]));
  }
  for (const char* name : {"dapo_token_beta", "grpo_sequence"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& c = meta.at("cases").at(name);
    const train::GrpoConfig cfg = config_of(c);
    const train::GrpoRows rows =
        train::grpo_rows(prompts, completions, std::vector<bool>(size_t(b), false), cfg, 0);
    auto g = std::make_shared<train::GrpoMicroBatch>();
    g->advantages = golden().tensor("advantages").to_vector<double>();
    g->mask = rows.mask;
    g->old_logp.assign(rows.mask.size(), 0.0);
    for (int64_t r = 0; r < b; ++r)
      for (int64_t k = 0; k < t; ++k)
        if (mask[size_t(r * t + k)])
          g->old_logp[size_t(r * rows.length + p - 1 + k)] = old[size_t(r * t + k)];
    if (cfg.beta != 0) g->ref_logp = train::grpo_host_logprobs(*model, rows, temperature, true);
    for (double m : rows.mask) g->num_items_in_batch += m;
    train::MicroBatch batch{rows.ids, rows.targets, int64_t(g->num_items_in_batch)};
    batch.grpo = g;
    testing::Recorder recorder({{model->trainable_parameters(), 0.0}});
    const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 0.0, 0, 1);
    train::TrainStep step(*model, recorder, schedule,
                          {.objective = std::make_shared<train::GrpoObjective>(cfg, temperature)});
    step.run(0, [&](int64_t) { return batch; });
    const double want = c.at("loss").get<double>();
    EXPECT_NEAR(step.take_log().mean_loss, want, 1e-5 * std::max(1.0, std::fabs(want)));
    const train::ObjectiveMetrics metrics = step.take_metrics();
    EXPECT_NEAR(metrics.means().at("clip_ratio/region_mean"),
                c.at("metrics").at("clip_ratio/region_mean").get<double>(), 1e-6);
    EXPECT_NEAR(metrics.means().at("entropy"), c.at("metrics").at("entropy").get<double>(), 1e-4);
    ASSERT_EQ(recorder.grads.size(), 28u);
    for (const auto& [param, grad] : recorder.grads)
      testing::expect_matches_golden(golden(), std::string(name) + " " + param, grad,
                                     std::string(name) + ".grad." + param);
  }
}

}  // namespace
}  // namespace fitgrad
