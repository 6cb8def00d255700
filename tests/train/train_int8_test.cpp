// `fitgrad train --weights_int8` (Note [Int8 weight training] in train/train_args.h):
// a tiny Llama whose block weights are int8 memorizes a sequence as its bf16 twin does and
// starts from nearly the same losses; its checkpoints hold the u8 codes, f32 scales and u8
// zeros, and a resume from one repeats the uninterrupted run bit for bit (under --bf16, and
// under --pure_bf16 with adafactor and --optim_in_backward); a dense model (generate, export)
// loads such a checkpoint dequantized and an int8 one quantizes it back; bad combinations
// are errors that name the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/safetensors.h"
#include "nn/int8_linear.h"
#include "tensor/error.h"
#include "tensor/ops/quantize_int8.h"
#include "tests/train/train_fixture.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::load_model;
using train::LoadedModel;
using train::TrainArgs;
namespace {
namespace fs = std::filesystem;

using TrainInt8 = test_train::TrainFixture;

std::vector<double> losses(const std::vector<nlohmann::json>& rows) {
  std::vector<double> out;
  for (const auto& r : rows)
    if (r.contains("loss")) out.push_back(r["loss"].get<double>());
  return out;
}

TEST_F(TrainInt8, LowersTheLossCloseToBf16) {
  TrainArgs a = args(write_text("cycle.txt", 32, 40), "bf16");
  a.max_steps = 40;
  a.logging_steps = 1;
  a.eval_steps = 40;
  a.lr_scheduler_type = "constant";
  a.save_steps = 0;
  a.bf16 = true;
  TrainArgs q = a;
  q.output_dir = (root_ / "int8").string();
  q.weights_int8 = true;
  q.weight_group_size = 64;
  ASSERT_EQ(train(a), 0);
  ASSERT_EQ(train(q), 0) << last_err_;
  const auto dense = losses(metrics(a.output_dir)), int8 = losses(metrics(q.output_dir));
  ASSERT_EQ(dense.size(), 40u);
  ASSERT_EQ(int8.size(), 40u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(int8[size_t(i)], dense[size_t(i)], 0.05) << i;
  EXPECT_GT(int8.front(), 2.0);
  EXPECT_LT(int8.back(), 0.5 * int8.front());
  EXPECT_LT(int8.back(), dense.back() + 0.5);
}

TEST_F(TrainInt8, CheckpointsHoldTheCodesAndResumeBitForBit) {
  const std::string data = write_text("text.txt", 997, 3);
  const std::vector<std::pair<const char*, std::function<void(TrainArgs&)>>> variants = {
      {"bf16", [](TrainArgs& a) { a.bf16 = true; }},
      {"pure_bf16_adafactor_in_backward",
       [](TrainArgs& a) {
         a.pure_bf16 = a.stochastic_rounding = a.optim_in_backward = true;
         a.optim = "adafactor";
         a.max_grad_norm = 0;
       }},
  };
  for (const auto& [name, change] : variants) {
    TrainArgs full = args(data, std::string(name) + "-full");
    full.weights_int8 = true;
    change(full);
    ASSERT_EQ(train(full), 0) << name << last_err_;
    TrainArgs resumed = args(data, std::string(name) + "-resumed");
    resumed.weights_int8 = true;
    change(resumed);
    resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-3").string();
    ASSERT_EQ(train(resumed), 0) << name << last_err_;
    EXPECT_EQ(max_loss_difference(full.output_dir, resumed.output_dir), 0.0) << name;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(read_bytes(fs::path(full.output_dir) / "checkpoint-6" / f),
                read_bytes(fs::path(resumed.output_dir) / "checkpoint-6" / f))
          << name << " " << f;
    const auto file = io::SafetensorsFile::open(
        (fs::path(full.output_dir) / "checkpoint-6" / "model.safetensors").string());
    const auto tensors = file.tensors();
    const std::string w = "model.layers.0.mlp.up_proj.weight";
    ASSERT_TRUE(tensors.count(w)) << name;
    EXPECT_EQ(tensors.at(w).dtype(), DType::u8);
    EXPECT_EQ(tensors.at(w + "_scales").dtype(), DType::f32);
    EXPECT_EQ(tensors.at(w + "_zeros").dtype(), DType::u8);
    EXPECT_EQ(tensors.at(w + "_scales").numel(), tensors.at(w).numel() / 256);
    EXPECT_NE(tensors.at("lm_head.weight").dtype(), DType::u8);  // the head stays dense
  }
  // A dense build (generate, export, --init) reads an int8 checkpoint dequantized, and an
  // int8 build quantizes that back to nearest: within half its own scale, at most the saved's.
  const std::string dir = (root_ / "bf16-full" / "checkpoint-6").string();
  const LoadedModel dense = load_model(dir, "", {});
  const auto file = io::SafetensorsFile::open(dir + "/model.safetensors");
  const std::string w = "model.layers.1.self_attn.o_proj.weight";
  const ops::Int8 saved{256, file.tensor(w), file.tensor(w + "_scales"), file.tensor(w + "_zeros")};
  const Tensor want = ops::dequantize_int8(saved, DType::f32);
  const Tensor got = dense.model->parameter(w);
  ASSERT_EQ(got.dtype(), DType::f32);
  EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), size_t(want.nbytes())), 0);
  nn::BuildOptions int8_build;
  int8_build.linear_factory = nn::int8_factory(256);
  const LoadedModel requantized = load_model(dir, "", int8_build);
  const nn::Module& m = *requantized.model;
  const ops::Int8 back{256, m.parameter(w), m.parameter(w + "_scales"), m.parameter(w + "_zeros")};
  ASSERT_EQ(back.codes.dtype(), DType::u8);
  const Tensor again = ops::dequantize_int8(back, DType::f32);
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_LE(std::abs(again.data<float>()[i] - want.data<float>()[i]),
              0.5f * saved.scales.data<float>()[i / 256] * 1.0001f)
        << i;
}

TEST_F(TrainInt8, BadCombinationsNameTheFlag) {
  const std::string data = write_text("text.txt", 997, 3);
  auto refusal = [&](const std::function<void(TrainArgs&)>& change) {
    TrainArgs a = args(data, "bad");
    a.weights_int8 = true;
    change(a);
    try {
      train(a);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto has = [](const std::string& text, const char* part) {
    EXPECT_NE(text.find(part), std::string::npos) << text;
  };
  has(refusal([](TrainArgs& a) {
        a.quantize = "nf4";
        a.lora_r = 8;
      }),
      "--weights_int8 and --lora_r conflict");
  has(refusal([](TrainArgs& a) { a.lora_r = 8; }), "--weights_int8 and --lora_r conflict");
  has(refusal([](TrainArgs& a) {
        a.offload_optimizer = true;
        a.device = "meta";
        a.data.clear();
      }),
      "--weights_int8 and --offload_optimizer conflict");
  has(refusal([](TrainArgs& a) { a.weight_group_size = 100; }), "--weight_group_size 100");
  has(refusal([](TrainArgs& a) { a.weight_group_size = 0; }), "--weight_group_size");
}

}  // namespace
}  // namespace fitgrad::apps
