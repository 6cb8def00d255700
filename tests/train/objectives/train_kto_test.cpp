// `fitgrad train --objective kto` on unpaired examples (train/objectives/kto.h) with the tiny
// model folder of tests/train/sft_model_folder.h: a fresh LoRA adapter leaves the policy equal
// to its reference, so the first step's loss is 1 - sigmoid(0) = 0.5 with a KL estimate and
// rewards of 0; training raises the desirable completions' log-probabilities relative to the
// undesirable ones (rewards/margins, beta times the difference of their log-ratios to the
// reference) on the training and the held-out examples; --precompute_ref_log_probs gives the
// steps' own reference; the dry run allocates as the real run; and records without a label, or
// flags of another objective, are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/error.h"
#include "tests/train/memory_trace.h"
#include "tests/train/sft_model_folder.h"
#include "tests/train/train_fixture.h"
#include "train/train_args.h"

namespace fitgrad::apps::test_train {

using train::run_train;
using train::TrainArgs;
namespace {

class TrainKto : public TrainFixture {
 protected:
  // 24 examples: a sentence of the prompt's book (desirable) or its words reversed
  // (undesirable), as plain strings and as conversations; `label` false leaves the key out.
  std::string examples(bool label = true) {
    const fs::path path = root_ / (label ? "kto.jsonl" : "unlabelled.jsonl");
    std::ofstream f(path);
    const std::vector<std::string> lines = {
        "It is a truth universally acknowledged", "that a single man in possession",
        "of a good fortune must be in want",      "of a wife. However little known the",
        "feelings or views of such a man",        "may be on his first entering a neighbourhood"};
    for (size_t i = 0; i < 24; ++i) {
      const std::string& s = lines[(i / 2) % lines.size()];
      std::string reversed;
      std::istringstream words(s);
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      for (size_t k = w.size(); k-- > 0;) reversed += (reversed.empty() ? "" : " ") + w[k];
      const bool desirable = i % 2 == 0;
      nlohmann::json rec = {{"prompt", "Quote the book:"},
                            {"completion", " " + (desirable ? s : reversed)}};
      if (label) rec["label"] = desirable;
      f << rec.dump() << "\n";
    }
    return path.string();
  }

  TrainArgs kto_args(const std::string& out) {
    TrainArgs a = args(examples(), out);
    a.model = fitgrad::testing::write_sft_model_folder(root_ / "model");
    a.objective = "kto";
    a.lora_r = 4;
    a.lora_alpha = 8;
    a.seq_len = 256;
    a.per_device_train_batch_size = 4;
    a.per_device_eval_batch_size = 4;
    a.val_fraction = 0.25;  // 6 examples
    a.data_order = "sequential";
    a.learning_rate = 5e-3;
    a.max_steps = 10;
    a.eval_steps = 10;
    a.save_steps = 0;
    return a;
  }
};

TEST_F(TrainKto, StartsAtOneHalfAndRaisesTheDesirableCompletions) {
  const TrainArgs a = kto_args("kto");
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("24 unpaired_preference; 18 train, 6 validation"), std::string::npos)
      << out.str();
  std::vector<nlohmann::json> steps, evals;
  for (const nlohmann::json& r : metrics(a.output_dir))
    (r.contains("loss") ? steps : evals).push_back(r);
  ASSERT_EQ(steps.size(), 10u);
  // A fresh adapter (lora_B = 0): the policy is its reference, every loss 1 - sigmoid(0).
  EXPECT_NEAR(steps[0].at("loss").get<double>(), 0.5, 1e-6);
  EXPECT_EQ(steps[0].at("kl").get<double>(), 0.0);
  EXPECT_EQ(steps[0].at("rewards/chosen").get<double>(), 0.0);
  EXPECT_EQ(steps[0].at("rewards/margins").get<double>(), 0.0);
  EXPECT_LT(steps[0].at("logps/chosen").get<double>(), 0.0);
  EXPECT_GT(steps.back().at("rewards/margins").get<double>(), 0.0);
  EXPECT_GT(steps.back().at("rewards/chosen").get<double>(),
            steps.back().at("rewards/rejected").get<double>());
  EXPECT_LT(steps.back().at("loss").get<double>(), 0.5);
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_GT(evals[0].at("eval_rewards/margins").get<double>(), 0.0) << evals[0].dump();
  EXPECT_FALSE(evals[0].contains("eval_perplexity"));
}

TEST_F(TrainKto, PrecomputedReferenceAndTheDryRunAreTheRunsOwn) {
  TrainArgs a = kto_args("in-step");
  a.max_steps = 3;
  a.eval_steps = 3;
  a.save_strategy = "no";
  TrainArgs pre = a;
  pre.output_dir = (root_ / "precomputed").string();
  pre.precompute_ref_log_probs = true;
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  ASSERT_EQ(run_train(pre, out, err), 0) << err.str();
  const std::vector<nlohmann::json> x = metrics(a.output_dir), y = metrics(pre.output_dir);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i)
    for (const char* key : {"loss", "kl", "rewards/margins", "eval_loss"}) {
      if (!x[i].contains(key)) continue;
      EXPECT_NEAR(x[i].at(key).get<double>(), y[i].at(key).get<double>(), 1e-5) << key << i;
    }
  for (const TrainArgs& real : {a, pre}) {
    TrainArgs meta = real;
    meta.output_dir = real.output_dir + "-meta";
    meta.device = "meta";
    ASSERT_EQ(run_train(meta, out, err), 0) << err.str();
    expect_dry_run_is_the_run(real.output_dir, meta.output_dir);
  }
}

TEST_F(TrainKto, WhatCannotWorkIsRefusedByName) {
  TrainArgs unlabelled = kto_args("unlabelled");
  unlabelled.data = examples(false);
  expect_refused(unlabelled, "is a prompt_completion record: give it a boolean \"label\"");
  TrainArgs forced = unlabelled;
  forced.dataset_format = "unpaired_preference";
  expect_refused(forced, "field 'label': is missing");
  TrainArgs sft = kto_args("sft");
  sft.objective = "sft";
  expect_refused(sft,
                 "is an unpaired preference record (prompt, completion, label): train on it with "
                 "--objective kto");
  TrainArgs dpo = kto_args("dpo");
  dpo.objective = "dpo";
  dpo.desirable_weight = 2.0;
  expect_refused(dpo, "--desirable_weight is --objective kto's; --objective dpo does not read it");
}

}  // namespace
}  // namespace fitgrad::apps::test_train
