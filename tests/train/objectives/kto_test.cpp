// KTO's loss (train/objectives/kto.h) against TRL 1.16's KTOTrainer._compute_loss itself
// (tests/golden/kto, gen_kto_golden.py): the loss of loss_type kto (its KL estimate positive,
// clamped at 0, with desirable and undesirable weights, with only one kind of example) and
// apo_zero_unpaired, its gradient with respect to each row's summed NLL (0 for the mismatched
// rows, whose KL estimate is detached) and TRL's logged statistics; the same through autograd
// (train::host_loss_of_nll); and the refusals of what KTO cannot run.
#include "train/objectives/kto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/error.h"
#include "train/preference_loss.h"

namespace fitgrad::train {
namespace {

nlohmann::json golden_cases() {
  std::ifstream in(FITGRAD_GOLDEN_DIR "/kto/cases.json");
  EXPECT_TRUE(in) << "tests/golden/kto/cases.json is missing";
  return nlohmann::json::parse(in).at("cases");
}

KtoConfig config_of(const nlohmann::json& c) {
  return {parse_kto_loss(c.at("loss_type").get<std::string>()), c.at("beta").get<double>(),
          c.at("desirable_weight").get<double>(), c.at("undesirable_weight").get<double>()};
}

std::vector<uint8_t> labels_of(const nlohmann::json& c) {
  std::vector<uint8_t> labels;
  for (const bool l : c.at("labels").get<std::vector<bool>>()) labels.push_back(l ? 1 : 0);
  return labels;
}

TEST(KtoLoss, EqualsTrlsKtoTrainer) {
  const nlohmann::json cases = golden_cases();
  ASSERT_EQ(cases.size(), 7u);
  for (const nlohmann::json& c : cases) {
    SCOPED_TRACE(c.dump().substr(0, 120));
    const auto nll = c.at("nll").get<std::vector<double>>();
    const auto ref = c.at("ref_nll").get<std::vector<double>>();
    const std::vector<uint8_t> labels = labels_of(c);
    const KtoTerms t = kto_terms(config_of(c), nll, ref, labels);
    const auto near = [](double got, double want) {
      EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want)));
    };
    near(t.loss, c.at("loss").get<double>());
    const auto grad = c.at("grad").get<std::vector<double>>();
    ASSERT_EQ(t.grad.size(), grad.size());
    for (size_t i = 0; i < grad.size(); ++i) near(t.grad[i], grad[i]);
    // TRL logs a statistic only where the batch has such examples, as the means here hold.
    const std::map<std::string, double> means = t.metrics.means();
    const nlohmann::json& want = c.at("metrics");
    EXPECT_EQ(means.size(), want.size());
    for (const auto& [name, value] : want.items()) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(means.contains(name));
      near(means.at(name), value.get<double>());
    }
    near(t.kl, want.at("kl").get<double>());

    // Through autograd: the loss on a tensor of NLLs and the gradient its backward gives them.
    const Tensor x = Tensor::from_vector(nll, {int64_t(nll.size())}, DType::f32);
    autograd::set_requires_grad(x);
    std::vector<double> rounded(nll.size());
    for (size_t i = 0; i < nll.size(); ++i) rounded[i] = double(float(nll[i]));
    const KtoTerms at_f32 = kto_terms(config_of(c), rounded, ref, labels);
    const Tensor loss = host_loss_of_nll(x, "kto_loss", [&](const std::vector<double>& v) {
      KtoTerms k = kto_terms(config_of(c), v, ref, labels);
      return std::pair{k.loss, std::move(k.grad)};
    });
    EXPECT_NEAR(loss.item(), at_f32.loss, 1e-6 * std::max(1.0, std::fabs(at_f32.loss)));
    autograd::backward(autograd::scale(loss, 2.0));
    const std::vector<float> g = autograd::grad(x).to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(g[i], 2 * at_f32.grad[i], 1e-6 * std::max(1.0, std::fabs(2 * at_f32.grad[i])));
  }
}

// The KL estimate is detached: moving a mismatched row's NLL moves the loss (through kl) but
// no gradient reaches it; at the policy equal to the reference every loss is w (1 - sigmoid(0)).
TEST(KtoLoss, TheKlEstimateIsDetachedAndClampedAtZero) {
  const KtoConfig cfg{KtoLoss::kto, 0.5, 1.0, 2.0};
  const std::vector<double> nll = {3, 4, 5, 6}, labels_ref = nll;
  const std::vector<uint8_t> labels = {1, 0};
  const KtoTerms same = kto_terms(cfg, nll, labels_ref, labels);
  EXPECT_DOUBLE_EQ(same.loss, (1.0 * 0.5 + 2.0 * 0.5) / 2);
  EXPECT_EQ(same.kl, 0.0);
  // The policy's mismatched rows more likely than the reference's: kl > 0, rows 2, 3 no grad.
  const KtoTerms above = kto_terms(cfg, std::vector<double>{3, 4, 4, 5}, labels_ref, labels);
  EXPECT_DOUBLE_EQ(above.kl, 1.0);
  EXPECT_NE(above.loss, same.loss);
  EXPECT_EQ(above.grad[2], 0.0);
  EXPECT_EQ(above.grad[3], 0.0);
  // Less likely: the mean of pi' - ref' is -1, clamped at 0.
  EXPECT_EQ(kto_terms(cfg, std::vector<double>{3, 4, 6, 7}, labels_ref, labels).kl, 0.0);
}

TEST(KtoLoss, RefusesWhatItCannotRun) {
  EXPECT_THROW(parse_kto_loss("sigmoid"), Error);
  const KtoConfig cfg;
  EXPECT_THROW(kto_terms(cfg, std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 3},
                         std::vector<uint8_t>{1}),
               Error);
  TrainArgs a;
  a.objective = "kto";
  a.per_device_train_batch_size = 1;
  try {
    make_kto(a);
    ADD_FAILURE() << "a KL estimate from a batch of one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--per_device_train_batch_size 1 leaves none"),
              std::string::npos)
        << e.what();
  }
  a.loss_type = "apo_zero_unpaired";  // no KL term: a batch of one is fine
  EXPECT_NO_THROW(make_kto(a));
  a.loss_type = "ipo";
  EXPECT_THROW(make_kto(a), Error);
}

}  // namespace
}  // namespace fitgrad::train
