// The bf16 training step on AMX against the same step with its products staged through the
// fp32 GEMM (issue 45): two `fitgrad train --bf16` runs of the built binary (FITGRAD_CLI), one
// at the machine's own level and one under FITGRAD_CPU_ISA=avx512_bf16, which caps oneDNN
// below AMX so that an Intel CPU stages its bf16 products (Note [AMX level] in
// tensor/cpu_isa.cpp, Note [When oneDNN's bf16 matmul pays] in tensor/cpu/gemm_bf16.cpp).
// The two paths round differently (AMX sums bf16 products in its own order, the staged GEMM
// widens the operands and runs the fp32 kernel), so their losses may differ, by no more than
// the bf16 tolerance that TrainTest.Bf16AutocastTrainsCloseToFp32 states against fp32:
// 5e-2 nats on a loss of about 5.5 over six steps. Skipped, with a line that says so, on a
// machine without AMX.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/cpu_isa.h"
#include "tests/train/train_fixture.h"

namespace fitgrad::apps::test_train {
namespace {

class AmxPath : public TrainFixture {
 protected:
  // A byte-level Llama whose products (256 rows, k 128 to 344) oneDNN runs on AMX.
  void SetUp() override {
    TrainFixture::SetUp();
    model_ = write_file("model.json", R"({"model_type": "llama", "vocab_size": 256,
      "hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true})");
  }

  // `fitgrad train --bf16` of a small Llama over `data` into root_/<out>, with `env` before
  // the command; its exit code.
  int train_cli(const std::string& env, const std::string& data, const std::string& out) {
    const std::string command =
        env + " " + FITGRAD_CLI + " train --model " + model_ + " --data " + data +
        " --output_dir " + (root_ / out).string() +
        " --seq_len 64 --per_device_train_batch_size 4 --learning_rate 1e-2 --max_steps 6" +
        " --logging_steps 1 --save_strategy no --eval_strategy no --bf16 --progress plain" + " > " +
        (root_ / (out + ".log")).string() + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string model_;
};

TEST_F(AmxPath, Bf16LossesMatchTheStagedPath) {
  if (cpu_isa() < CpuIsa::amx)
    GTEST_SKIP() << "no AMX here (ISA level " << cpu_isa_name(cpu_isa())
                 << "): the AMX bf16 path is tested on machines with amx_bf16 and amx_tile";
  ASSERT_TRUE(cpu::dnnl_bf16_matmul_on_amx());
  ASSERT_TRUE(cpu::gemm_bf16_preferred());
  const std::string data = write_text("text.txt", 4001, 3);
  ASSERT_EQ(train_cli("env", data, "amx"), 0) << read_bytes(root_ / "amx.log");
  ASSERT_EQ(train_cli("env FITGRAD_CPU_ISA=avx512_bf16", data, "staged"), 0)
      << read_bytes(root_ / "staged.log");
  const double max_diff =
      max_loss_difference((root_ / "amx").string(), (root_ / "staged").string());
  EXPECT_GT(max_diff, 0.0);  // the two paths ran: their roundings differ (4.6e-3 here)
  EXPECT_LT(max_diff, 5e-2);
}

}  // namespace
}  // namespace fitgrad::apps::test_train
