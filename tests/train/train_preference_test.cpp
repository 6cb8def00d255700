// `fitgrad train --objective dpo|orpo` on preference pairs (Note [Preference runs] in
// train/train_sft.cpp) with the tiny model folder of tests/train/sft_model_folder.h: a fresh
// LoRA adapter leaves the policy equal to its reference, so the first DPO step's loss is
// log 2 with zero rewards; training raises the margin; ORPO trains without a reference; the
// dry run allocates as the real run; and the combinations that cannot work are refused by name.
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

class TrainPreference : public TrainFixture {
 protected:
  // 12 pairs: plain strings and conversations, the chosen answer a sentence of the prompt's
  // book, the rejected one its words reversed.
  std::string pairs() {
    const fs::path path = root_ / "pairs.jsonl";
    std::ofstream f(path);
    const std::vector<std::string> lines = {
        "It is a truth universally acknowledged", "that a single man in possession",
        "of a good fortune must be in want",      "of a wife. However little known the",
        "feelings or views of such a man",        "may be on his first entering a neighbourhood"};
    for (size_t i = 0; i < 12; ++i) {
      const std::string& s = lines[i % lines.size()];
      std::string reversed;
      std::istringstream words(s);
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      for (size_t k = w.size(); k-- > 0;) reversed += (reversed.empty() ? "" : " ") + w[k];
      nlohmann::json rec;
      if (i % 2 == 0) {
        rec = {{"prompt", "Quote the book:"}, {"chosen", " " + s}, {"rejected", " " + reversed}};
      } else {
        rec = {{"prompt", {{{"role", "user"}, {"content", "Quote the book."}}}},
               {"chosen", {{{"role", "assistant"}, {"content", s}}}},
               {"rejected", {{{"role", "assistant"}, {"content", reversed}}}}};
      }
      f << rec.dump() << "\n";
    }
    return path.string();
  }

  TrainArgs preference_args(const std::string& out, const std::string& objective) {
    TrainArgs a = args(pairs(), out);
    a.model = fitgrad::testing::write_sft_model_folder(root_ / "model");
    a.objective = objective;
    a.lora_r = 4;
    a.lora_alpha = 8;
    a.seq_len = 256;
    a.per_device_train_batch_size = 2;
    a.per_device_eval_batch_size = 2;
    a.val_fraction = 0.25;  // 3 pairs
    a.max_steps = 8;
    a.eval_steps = 8;
    a.save_steps = 0;
    return a;
  }
};

TEST_F(TrainPreference, DpoStartsAtLogTwoAndLearnsThePreference) {
  TrainArgs a = preference_args("dpo", "dpo");
  a.learning_rate = 5e-3;
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("12 examples (12 preference; 9 train, 3 validation"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("9 training pairs in 18 rows of 256"), std::string::npos) << out.str();
  std::vector<nlohmann::json> steps, evals;
  for (const nlohmann::json& r : metrics(a.output_dir))
    (r.contains("loss") ? steps : evals).push_back(r);
  ASSERT_EQ(steps.size(), 8u);
  // A fresh adapter (lora_B = 0): the policy is its reference, d = 0, -log sigmoid(0) = log 2.
  EXPECT_NEAR(steps[0].at("loss").get<double>(), std::log(2.0), 1e-6);
  EXPECT_EQ(steps[0].at("rewards/chosen").get<double>(), 0.0);
  EXPECT_EQ(steps[0].at("rewards/margins").get<double>(), 0.0);
  EXPECT_EQ(steps[0].at("rewards/accuracies").get<double>(), 0.0);
  EXPECT_LT(steps[0].at("logps/chosen").get<double>(), 0.0);
  EXPECT_GT(steps.back().at("rewards/margins").get<double>(), 0.0);
  EXPECT_LT(steps.back().at("loss").get<double>(), std::log(2.0));
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_TRUE(evals[0].contains("eval_rewards/accuracies")) << evals[0].dump();
  EXPECT_FALSE(evals[0].contains("eval_perplexity"));
}

TEST_F(TrainPreference, OrpoTrainsWithoutAReferenceAndLogsItsTerms) {
  TrainArgs a = preference_args("orpo", "orpo");
  a.lora_r = 0;  // no adapter needed: ORPO has no reference
  a.lora_alpha = TrainArgs().lora_alpha;
  a.max_steps = 2;
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  const nlohmann::json first = metrics(a.output_dir).front();
  for (const char* key : {"nll_loss", "log_odds_ratio", "log_odds_chosen", "rewards/margins"})
    EXPECT_TRUE(first.contains(key)) << key << " in " << first.dump();
  // loss = nll_loss - beta * log_odds_ratio (one micro-batch).
  EXPECT_NEAR(first.at("loss").get<double>(),
              first.at("nll_loss").get<double>() - 0.1 * first.at("log_odds_ratio").get<double>(),
              1e-4);
}

// Packed pairs (the default, Note [Packed pairs] in data/loader.cpp) train as an answer a row
// does: the same losses, rewards and evaluation, step after step, in fewer positions.
TEST_F(TrainPreference, PackedPairsTrainAsAnAnswerARow) {
  for (const char* objective : {"dpo", "orpo"}) {
    SCOPED_TRACE(objective);
    TrainArgs a = preference_args(std::string(objective) + "-packed", objective);
    a.learning_rate = 5e-3;
    a.max_steps = 4;
    a.gradient_accumulation_steps = 2;
    a.eval_steps = 2;
    a.save_strategy = "no";
    TrainArgs rows = a;
    rows.output_dir = (root_ / (std::string(objective) + "-rows")).string();
    rows.packing = "none";
    std::ostringstream out, err, out2, err2;
    ASSERT_EQ(run_train(a, out, err), 0) << err.str();
    ASSERT_EQ(run_train(rows, out2, err2), 0) << err2.str();
    EXPECT_NE(out.str().find("each batch's answers packed into rows"), std::string::npos)
        << out.str();
    EXPECT_NE(out2.str().find("pairs, an answer a row"), std::string::npos) << out2.str();
    const std::vector<nlohmann::json> x = metrics(a.output_dir), y = metrics(rows.output_dir);
    ASSERT_EQ(x.size(), y.size());
    size_t compared = 0;
    for (size_t i = 0; i < x.size(); ++i)
      for (const char* key : {"loss", "rewards/margins", "rewards/chosen", "logps/rejected",
                              "eval_loss", "eval_rewards/margins"}) {
        if (!x[i].contains(key)) continue;
        ++compared;
        EXPECT_NEAR(x[i].at(key).get<double>(), y[i].at(key).get<double>(), 2e-5)
            << key << " at record " << i;
      }
    EXPECT_GE(compared, 4u * 4u);
  }
}

TEST_F(TrainPreference, MetaAllocatesAsTheRealRun) {
  for (const char* objective : {"dpo", "orpo", "dpo-rows"}) {
    SCOPED_TRACE(objective);
    const bool rows = std::string(objective) == "dpo-rows";
    TrainArgs a = preference_args(std::string(objective) + "-cpu", rows ? "dpo" : objective);
    if (rows) a.packing = "none";
    a.max_steps = 2;
    a.gradient_accumulation_steps = 2;
    a.eval_steps = 2;
    a.save_strategy = "no";
    TrainArgs meta = a;
    meta.output_dir = (root_ / (std::string(objective) + "-meta")).string();
    meta.device = "meta";
    std::ostringstream out, err;
    ASSERT_EQ(run_train(a, out, err), 0) << err.str();
    ASSERT_EQ(run_train(meta, out, err), 0) << err.str();
    expect_dry_run_is_the_run(a.output_dir, meta.output_dir);
  }
}

// --precompute_ref_log_probs: the same losses as the steps' own reference pass; kept in the
// output directory and read back by a resume; a full fine-tune's DPO starts at log 2 too (its
// reference is its initial weights), cannot resume without the stored values, and without the
// pass keeps a frozen copy with the same losses.
TEST_F(TrainPreference, PrecomputedReferenceIsTheStepsReference) {
  TrainArgs a = preference_args("in-step", "dpo");
  a.learning_rate = 5e-3;
  a.max_steps = 4;
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
    for (const char* key : {"loss", "rewards/margins", "eval_loss"}) {
      if (!x[i].contains(key)) continue;
      EXPECT_NEAR(x[i].at(key).get<double>(), y[i].at(key).get<double>(), 1e-5) << key << i;
    }
  EXPECT_TRUE(fs::exists(root_ / "precomputed" / "reference_log_probs.bin"));

  // Full fine-tuning, stopped at step 2 and resumed: the stored values are read back.
  TrainArgs full = preference_args("full", "dpo");
  full.lora_r = 0;
  full.lora_alpha = TrainArgs().lora_alpha;
  full.precompute_ref_log_probs = true;
  full.learning_rate = 1e-3;
  full.max_steps = 2;
  full.save_steps = 2;
  std::ostringstream out2, err2;
  ASSERT_EQ(run_train(full, out2, err2), 0) << err2.str();
  EXPECT_NEAR(metrics(full.output_dir).front().at("loss").get<double>(), std::log(2.0), 1e-6);
  TrainArgs resumed = full;
  resumed.max_steps = 3;
  resumed.resume_from_checkpoint = "last";
  std::ostringstream out3, err3;
  ASSERT_EQ(run_train(resumed, out3, err3), 0) << err3.str();
  EXPECT_NE(err3.str().find("reference log-probabilities read from"), std::string::npos)
      << err3.str();
  fs::remove(root_ / "full" / "reference_log_probs.bin");
  resumed.max_steps = 4;
  try {
    run_train(resumed, out3, err3);
    ADD_FAILURE() << "a full fine-tune resumed without its reference";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the reference log-probabilities"),
              std::string::npos)
        << e.what();
  }

  // Without the pass, a full fine-tune's reference is a frozen copy of its initial weights:
  // the same losses as the precomputed values, and a second model's parameters in the ledger.
  TrainArgs copy = full;
  copy.output_dir = (root_ / "full-copy").string();
  copy.precompute_ref_log_probs = false;
  copy.save_strategy = "no";
  std::ostringstream out4, err4;
  ASSERT_EQ(run_train(copy, out4, err4), 0) << err4.str();
  const std::vector<nlohmann::json> p = metrics(full.output_dir), q = metrics(copy.output_dir);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(p[i].at("loss").get<double>(), q[i].at("loss").get<double>(), 1e-5) << i;

  // The dry run plans the pass and the reference-free steps as the real run makes them.
  TrainArgs real = pre;
  real.output_dir = (root_ / "pre-cpu").string();
  real.max_steps = 2;
  TrainArgs meta = real;
  meta.output_dir = (root_ / "pre-meta").string();
  meta.device = "meta";
  ASSERT_EQ(run_train(real, out, err), 0) << err.str();
  ASSERT_EQ(run_train(meta, out, err), 0) << err.str();
  expect_dry_run_is_the_run(real.output_dir, meta.output_dir);
}

TEST_F(TrainPreference, WhatCannotWorkIsRefusedByName) {
  TrainArgs orpo_ref = preference_args("orpo-ref", "orpo");
  orpo_ref.precompute_ref_log_probs = true;
  expect_refused(orpo_ref, "--precompute_ref_log_probs computes DPO's reference");
  TrainArgs sft = preference_args("sft", "sft");
  expect_refused(sft,
                 "is a preference record (prompt, chosen, rejected): train on it with --objective");
  TrainArgs packed = preference_args("packed", "dpo");
  packed.packing = "wrapped";
  expect_refused(packed, "--packing wrapped would cut a preference answer in two");
  TrainArgs fused = preference_args("fused", "orpo");
  fused.fused_head_loss = true;
  expect_refused(fused, "--objective orpo needs each answer's log-probability");
  TrainArgs chat = preference_args("chat", "dpo");
  chat.data = (fs::path(FITGRAD_GOLDEN_DIR) / "sft" / "records" / "messages.jsonl").string();
  expect_refused(chat, "trains on preference records (prompt, chosen, rejected)");
}

}  // namespace
}  // namespace fitgrad::apps::test_train
