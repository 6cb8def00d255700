// `fitgrad train` in process (train/trainer.h): a tiny model memorizes a sequence with every
// optimizer, a resumed run repeats the uninterrupted run bit for bit, and the precisions and
// gradient checkpointing change the numbers and the peak as they should; what a run refuses
// and keeps is in train_refusals_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "io/safetensors.h"
#include "tensor/backend/math_mode.h"
#include "tensor/error.h"
#include "tests/train/train_fixture.h"
#include "train/trainer.h"

namespace fitgrad::apps {

using train::TrainArgs;
namespace {
namespace fs = std::filesystem;

using TrainTest = test_train::TrainFixture;

TEST_F(TrainTest, TinyModelMemorizesAShortSequence) {
  // 32 random letters repeated: with --seq_len 32 every window is the same 33 tokens, a
  // sequence the model can only predict by memorizing it position by position.
  TrainArgs a = args(write_text("cycle.txt", 32, 40), "run");
  a.max_steps = 100;
  a.logging_steps = 10;
  a.eval_steps = 100;
  a.lr_scheduler_type = "constant";
  a.save_steps = 0;
  ASSERT_EQ(train(a), 0);
  auto rows = metrics(a.output_dir);
  double first = -1, last = -1, eval = -1;
  for (const auto& r : rows) {
    if (r.contains("loss")) (first < 0 ? first : last) = r["loss"].get<double>();
    if (r.contains("eval_loss")) eval = r["eval_loss"].get<double>();
  }
  EXPECT_GT(first, 2.0);  // near ln(26) = 3.26 at the start
  EXPECT_LT(last, 0.05);
  EXPECT_LT(eval, 0.05);  // the held-out tail repeats the same letters
  for (const char* f :
       {"loss_curve.svg", "memory.json", "memory_trace.json", "memory.html", "peak_report.txt",
        "memory_summary.txt", "checkpoint-100/model.safetensors", "checkpoint-100/config.json",
        "checkpoint-100/fitgrad_tokenizer.json", "checkpoint-100/optimizer.safetensors",
        "checkpoint-100/trainer_state.json"})
    EXPECT_TRUE(fs::exists(fs::path(a.output_dir) / f)) << f;
}

// APOLLO and APOLLO-Mini (optim/apollo.h) train the same memorization task, with their
// published defaults (rank 256 and 1, scale 1 and 128) and the reference's lr 1e-2: the loss
// falls from near ln(26) to well below it, with the optimizer state only the low-rank moments
// of the blocks' weights and AdamW's for the rest.
TEST_F(TrainTest, ApolloAndApolloMiniLowerTheLoss) {
  const std::string data = write_text("cycle.txt", 32, 40);
  for (const char* optim : {"apollo", "apollo_mini"}) {
    TrainArgs a = args(data, optim);
    a.optim = optim;
    a.max_steps = 30;
    a.logging_steps = 5;
    a.eval_steps = 30;
    a.lr_scheduler_type = "constant";
    a.save_steps = 0;
    ASSERT_EQ(train(a), 0) << optim;
    // APOLLO's default rank 256 is above the tiny model's 64-wide sides (as the reference
    // allows), which the run says; APOLLO-Mini's rank 1 is not.
    EXPECT_EQ(
        last_out_.find("note: apollo's rank 256 is above the smaller side of") != std::string::npos,
        std::string(optim) == "apollo")
        << last_out_;
    double first = -1, last = -1;
    for (const auto& r : metrics(a.output_dir))
      if (r.contains("loss")) (first < 0 ? first : last) = r["loss"].get<double>();
    EXPECT_GT(first, 2.0) << optim;
    EXPECT_LT(last, 0.5 * first) << optim;
  }
}

// GaLore (optim/galore.h) on every attention and MLP matrix of gpt2-tiny (--optim_target_modules
// attn,mlp) at rank 8, its projection refreshed every 10 steps (--optim_args): the memorizing
// run's loss falls as AdamW's does.
TEST_F(TrainTest, GaloreTrainsATinyModel) {
  for (const char* optim : {"galore_adamw", "galore_adamw_8bit"}) {
    TrainArgs a = args(write_text("cycle.txt", 32, 40), std::string("galore-") + optim);
    a.optim = optim;
    a.optim_args = "rank=8,update_proj_gap=10,scale=1";
    a.optim_target_modules = "attn,mlp";
    a.learning_rate = 1e-2;
    a.max_steps = 60;
    a.logging_steps = 10;
    a.eval_strategy = "no";
    a.lr_scheduler_type = "constant";
    a.save_strategy = "no";
    ASSERT_EQ(train(a), 0) << optim;
    // APOLLO's default rank 256 is above the tiny model's 64-wide sides (as the reference
    // allows), which the run says; APOLLO-Mini's rank 1 is not.
    EXPECT_EQ(
        last_out_.find("note: apollo's rank 256 is above the smaller side of") != std::string::npos,
        std::string(optim) == "apollo")
        << last_out_;
    double first = -1, last = -1;
    for (const auto& r : metrics(a.output_dir))
      if (r.contains("loss")) (first < 0 ? first : last) = r["loss"].get<double>();
    EXPECT_GT(first, 2.0) << optim;
    EXPECT_LT(last, 0.5 * first) << optim;
  }
}

TEST_F(TrainTest, ResumeRepeatsTheUninterruptedRunBitForBit) {
  std::string data = write_text("text.txt", 997, 3);
  TrainArgs full = args(data, "full");
  full.dataloader_num_workers = 2;  // the loader's order does not depend on its workers
  full.gradient_accumulation_steps = 2;
  full.weight_decay = 0.1;
  full.warmup_steps = 2;
  ASSERT_EQ(train(full), 0);

  TrainArgs resumed = args(data, "resumed");
  resumed.gradient_accumulation_steps = 2;
  resumed.weight_decay = 0.1;
  resumed.warmup_steps = 2;
  resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
  ASSERT_EQ(train(resumed), 0);

  auto a = metrics(full.output_dir), b = metrics(resumed.output_dir);
  ASSERT_EQ(a.size(), b.size());
  int compared = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]["step"], b[i]["step"]);
    if (!a[i].contains("loss")) continue;
    // Parsed from shortest round-trip text: equal doubles are equal bits.
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << "step " << a[i]["step"];
    EXPECT_EQ(a[i]["grad_norm"].get<double>(), b[i]["grad_norm"].get<double>());
    ++compared;
  }
  EXPECT_EQ(compared, 6);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_bytes(fs::path(full.output_dir) / "checkpoint-6" / f),
              read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / f))
        << f;
}

// Issue 12's optimizers and precisions resume bit for bit too: the 8-bit codes and absmaxes,
// the factored moments and the stochastic-rounding stream all come back from the checkpoint,
// and so do APOLLO's low-rank moments, its limiter's norm and its projections' seed, and
// GaLore's low-rank moments and projections.
TEST_F(TrainTest, EveryOptimizerAndPrecisionResumesBitForBit) {
  const std::string data = write_text("text.txt", 997, 3);
  const std::vector<std::pair<const char*, std::function<void(TrainArgs&)>>> variants = {
      {"adamw_8bit", [](TrainArgs& a) { a.optim = "adamw_8bit"; }},
      {"adafactor", [](TrainArgs& a) { a.optim = "adafactor"; }},
      {"adafactor_hf", [](TrainArgs& a) { a.optim = "adafactor_hf"; }},
      // Projections redrawn at steps 1, 3, 5: the resumed run draws them from the saved seed.
      {"apollo",
       [](TrainArgs& a) {
         a.optim = "apollo";
         a.optim_args = "rank=8,update_proj_gap=2";
       }},
      {"apollo_mini_pure_bf16_sr",
       [](TrainArgs& a) {
         a.optim = "apollo_mini";
         a.optim_args = "update_proj_gap=2";
         a.pure_bf16 = a.stochastic_rounding = true;
       }},
      {"pure_bf16_sr", [](TrainArgs& a) { a.pure_bf16 = a.stochastic_rounding = true; }},
      {"optim_in_backward",
       [](TrainArgs& a) {
         a.optim_in_backward = true;
         a.max_grad_norm = 0;
       }},
      // Refreshes at steps 0, 2 and 4: the resumed run from checkpoint-3 makes the third.
      {"galore_adamw",
       [](TrainArgs& a) {
         a.optim = "galore_adamw";
         a.optim_args = "rank=4,update_proj_gap=2";
         a.optim_target_modules = "attn,mlp";
       }},
      {"galore_adamw_8bit_in_backward",
       [](TrainArgs& a) {
         a.optim = "galore_adamw_8bit";
         a.optim_args = "rank=4,update_proj_gap=2";
         a.optim_target_modules = "attn,mlp";
         a.optim_in_backward = true;
         a.max_grad_norm = 0;
       }},
  };
  for (const auto& [name, change] : variants) {
    TrainArgs full = args(data, std::string(name) + "-full");
    change(full);
    ASSERT_EQ(train(full), 0) << name;
    TrainArgs resumed = args(data, std::string(name) + "-resumed");
    change(resumed);
    resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
    ASSERT_EQ(train(resumed), 0) << name;
    EXPECT_EQ(max_loss_difference(full.output_dir, resumed.output_dir), 0.0) << name;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(read_bytes(fs::path(full.output_dir) / "checkpoint-6" / f),
                read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / f))
          << name << " " << f;
  }
  TrainArgs other = args(data, "other-optimizer");
  other.resume_from_checkpoint = (fs::path(root_) / "adamw_8bit-full" / "checkpoint-3").string();
  try {
    train(other);
    ADD_FAILURE() << "an adamw_8bit checkpoint resumed with adamw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the optimizer was adamw_8bit there and is adamw now"),
              std::string::npos)
        << e.what();
  }
}

// QLoRA through fitgrad train (Note [LoRA runs]): LoRA over an NF4 base on every linear
// layer lowers the loss, the checkpoints hold the adapter in PEFT's format and not the
// model, and a resume from one repeats the uninterrupted run bit for bit.
TEST_F(TrainTest, QloraTrainsTheAdapterAndResumesFromIt) {
  const std::string data = write_text("text.txt", 997, 3);
  auto qlora = [](TrainArgs& a) {
    a.quantize = "nf4";
    a.lora_r = 8;
    a.lora_alpha = 16;
    a.bnb_4bit_use_double_quant = true;
  };
  TrainArgs full = args(data, "qlora-full");
  qlora(full);
  ASSERT_EQ(train(full), 0);
  const auto rows = metrics(full.output_dir);
  double first = NAN, last = NAN;
  for (const auto& row : rows)
    if (row.contains("loss")) (std::isnan(first) ? first : last) = row["loss"].get<double>();
  EXPECT_LT(last, first);
  const fs::path ckpt = fs::path(full.output_dir) / "checkpoint-6";
  EXPECT_TRUE(fs::exists(ckpt / "adapter_config.json"));
  EXPECT_TRUE(fs::exists(ckpt / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt / "model.safetensors"));

  TrainArgs resumed = args(data, "qlora-resumed");
  qlora(resumed);
  resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
  ASSERT_EQ(train(resumed), 0);
  EXPECT_EQ(max_loss_difference(full.output_dir, resumed.output_dir), 0.0);
  for (const char* f : {"adapter_model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_bytes(ckpt / f), read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / f))
        << f;
}

TEST_F(TrainTest, GradientCheckpointingKeepsTheLossesAndLowersThePeak) {
  auto peak = [](const std::string& dir) {
    std::ifstream in(fs::path(dir) / "memory.json");
    return nlohmann::json::parse(in)["stats"]["allocated_bytes"]["all"]["peak"].get<int64_t>();
  };
  TrainArgs base = args(write_text("text.txt", 997, 3), "");
  base.per_device_train_batch_size = 8;
  auto [plain, ckpt] = train_both(base, [](TrainArgs& a) { a.gradient_checkpointing = true; });
  EXPECT_EQ(max_loss_difference(plain, ckpt), 0.0);  // bitwise the same losses
  EXPECT_LT(peak(ckpt), peak(plain));
}

// A GPT-2 config.json with dropout 0.1 (GPT2Config's default, Note [Dropout as configured]
// in nn/config.h) trains with dropout: its losses differ from the same run at 0.0, two runs
// with one seed are bitwise equal, gradient checkpointing recomputes the same masks, and a
// resume repeats the uninterrupted run bit for bit.
TEST_F(TrainTest, ConfiguredDropoutTrainsReproducibly) {
  auto config = [&](const std::string& name, double p) {
    nlohmann::json j = {{"model_type", "gpt2"}, {"vocab_size", 256}, {"n_positions", 64},
                        {"n_embd", 64},         {"n_layer", 2},      {"n_head", 4},
                        {"embd_pdrop", p},      {"attn_pdrop", p},   {"resid_pdrop", p}};
    return write_file(name, j.dump());
  };
  TrainArgs base = args(write_text("text.txt", 997, 3), "");
  base.model = config("dropout.json", 0.1);
  const std::string none = config("no-dropout.json", 0.0);
  auto [dropped, plain] = train_both(base, [&](TrainArgs& a) { a.model = none; });
  EXPECT_GT(max_loss_difference(dropped, plain), 0.0);

  TrainArgs again = base;
  again.output_dir = (root_ / "again").string();
  again.save_steps = 0;
  ASSERT_EQ(train(again), 0);
  EXPECT_EQ(max_loss_difference(dropped, again.output_dir), 0.0);

  TrainArgs ckpt = again;
  ckpt.output_dir = (root_ / "ckpt").string();
  ckpt.gradient_checkpointing = true;
  ASSERT_EQ(train(ckpt), 0);
  EXPECT_EQ(max_loss_difference(dropped, ckpt.output_dir), 0.0);

  TrainArgs full = base;
  full.output_dir = (root_ / "full").string();
  ASSERT_EQ(train(full), 0);
  TrainArgs resumed = base;
  resumed.output_dir = (root_ / "resumed").string();
  resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
  ASSERT_EQ(train(resumed), 0);
  EXPECT_EQ(max_loss_difference(full.output_dir, resumed.output_dir), 0.0);
  EXPECT_EQ(read_bytes(fs::path(full.output_dir) / "checkpoint-6" / "model.safetensors"),
            read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / "model.safetensors"));
}

TEST_F(TrainTest, Tf32ChangesTheNumericsSlightly) {
  auto [fp32, tf32] =
      train_both(args(write_text("text.txt", 997, 3), ""), [](TrainArgs& a) { a.tf32 = true; });
  EXPECT_FALSE(backend::matmul_tf32());  // the mode is the run's only
  const double max_diff = max_loss_difference(fp32, tf32);
  EXPECT_GT(max_diff, 0.0);   // TF32 rounding reached the matmuls
  EXPECT_LT(max_diff, 1e-2);  // and stayed a rounding effect
}

// --fp16: f16 autocast with the dynamic loss scaler trains close to fp32, logs the scale,
// and a resume restores the scaler and repeats the uninterrupted run bit for bit.
TEST_F(TrainTest, Fp16WithALossScalerTrainsCloseToFp32AndResumesBitwise) {
  const std::string data = write_text("text.txt", 997, 3);
  auto [fp32, fp16] = train_both(args(data, ""), [](TrainArgs& a) { a.fp16 = true; });
  const double max_diff = max_loss_difference(fp32, fp16);
  EXPECT_GT(max_diff, 0.0);   // the matmuls ran in f16
  EXPECT_LT(max_diff, 5e-2);  // f16 rounding, not a bug
  int logged = 0;
  for (const auto& row : metrics(fp16))
    if (row.contains("loss")) {
      EXPECT_EQ(row.at("loss_scale").get<double>(), 65536.0);
      EXPECT_EQ(row.at("skipped_steps").get<int64_t>(), 0);
      ++logged;
    }
  EXPECT_EQ(logged, 6);

  TrainArgs full = args(data, "full");
  full.fp16 = true;
  ASSERT_EQ(train(full), 0);
  TrainArgs resumed = args(data, "resumed");
  resumed.fp16 = true;
  resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
  ASSERT_EQ(train(resumed), 0);
  EXPECT_EQ(max_loss_difference(full.output_dir, resumed.output_dir), 0.0);
  EXPECT_EQ(read_bytes(fs::path(full.output_dir) / "checkpoint-6" / "model.safetensors"),
            read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / "model.safetensors"));
  const auto state = nlohmann::json::parse(
      read_bytes(fs::path(full.output_dir) / "checkpoint-6" / "trainer_state.json"));
  EXPECT_EQ(state.at("scaler").at("scale").get<double>(), 65536.0);
  EXPECT_EQ(state.at("scaler").at("growth_tracker").get<int64_t>(), 6);

  TrainArgs mixed = args(data, "mixed");  // a resume keeps the precision
  mixed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
  try {
    train(mixed);
    ADD_FAILURE() << "an fp16 checkpoint resumed in fp32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--fp16 was 1 there and is 0 now"), std::string::npos);
  }
}

TEST_F(TrainTest, Bf16AutocastTrainsCloseToFp32) {
  auto [fp32, bf16] =
      train_both(args(write_text("text.txt", 997, 3), ""), [](TrainArgs& a) { a.bf16 = true; });
  const double max_diff = max_loss_difference(fp32, bf16);
  EXPECT_GT(max_diff, 0.0);   // the matmuls ran in bf16
  EXPECT_LT(max_diff, 5e-2);  // bf16 has 8 significant bits: a rounding effect, not a bug
  // The checkpoint holds fp32 master weights.
  auto st =
      io::SafetensorsFile::open((fs::path(bf16) / "checkpoint-6" / "model.safetensors").string());
  EXPECT_EQ(st.tensor("lm_head.weight").dtype(), DType::f32);
}

}  // namespace
}  // namespace fitgrad::apps
