// The GEMM library a run uses is this machine's default or FITGRAD_GEMM's, printed on the
// run's summary, and a bad choice is one line before anything runs (issue 60; Note [GEMM
// backend per machine] in tensor/cpu/gemm.cpp). Runs the built `fitgrad` (FITGRAD_CLI): the
// choice is made once per process, at its first question.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tensor/cpu/gemm.h"
#include "tensor/cpu/mkl_blas.h"
#include "tensor/cpu_isa.h"
#include "tests/train/train_fixture.h"

namespace fitgrad::apps::test_train {
namespace {

using ::testing::HasSubstr;

class GemmChoice : public TrainFixture {
 protected:
  // `env ... fitgrad ARGS`, output into root_/<log>; its exit code.
  int cli(const std::string& env, const std::string& args, const std::string& log) {
    const std::string command =
        "env " + env + " " + FITGRAD_CLI + " " + args + " > " + (root_ / log).string() + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // A six-step fp32 run of a byte-level Llama into root_/<out> under `env`.
  int train(const std::string& env, const std::string& data, const std::string& out) {
    return cli(env,
               "train --model llama-tiny --data " + data + " --output_dir " +
                   (root_ / out).string() +
                   " --seq_len 64 --per_device_train_batch_size 4 --learning_rate 1e-2"
                   " --max_steps 6 --logging_steps 1 --save_strategy no --eval_strategy no"
                   " --progress plain",
               out + ".log");
  }
};

TEST_F(GemmChoice, AnUnknownOrMissingLibraryIsOneLineNamingTheVariable) {
  ASSERT_EQ(cli("FITGRAD_GEMM=blis", "inspect /nonexistent.gguf", "unknown.log"), 1);
  const std::string unknown = read_bytes(root_ / "unknown.log");
  EXPECT_THAT(unknown, HasSubstr("FITGRAD_GEMM=blis names no GEMM backend"));
  EXPECT_THAT(unknown, HasSubstr("eigen, openblas, dnnl or mkl"));
  ASSERT_EQ(cli("FITGRAD_GEMM=mkl FITGRAD_MKL=" + (root_ / "no-mkl").string(),
                "inspect /nonexistent.gguf", "missing.log"),
            1);
  const std::string missing = read_bytes(root_ / "missing.log");
  EXPECT_THAT(missing, HasSubstr("FITGRAD_GEMM=mkl: oneMKL not found"));
  EXPECT_THAT(missing, HasSubstr("no-mkl"));
  EXPECT_THAT(missing, HasSubstr("tools/install-deps.sh"));
}

TEST_F(GemmChoice, TheRunPrintsItsLibraryAndTheVariableChangesIt) {
  const std::string data = write_text("text.txt", 3001, 2);
  ASSERT_EQ(train("FITGRAD_GEMM=eigen", data, "eigen"), 0) << read_bytes(root_ / "eigen.log");
  EXPECT_THAT(read_bytes(root_ / "eigen.log"), HasSubstr("GEMM eigen (Eigen, FITGRAD_GEMM)"));
  ASSERT_EQ(train("", data, "default"), 0) << read_bytes(root_ / "default.log");
  // The default is oneMKL exactly where it loads and the CPU is Intel's.
  const bool mkl = cpu::mkl_available() && cpu_is_intel();
  EXPECT_THAT(read_bytes(root_ / "default.log"),
              HasSubstr(std::string("GEMM ") + (mkl ? "mkl (oneMKL " : "dnnl (oneDNN ")));
  EXPECT_THAT(read_bytes(root_ / "default.log"), HasSubstr("this machine's default"));
  // Two fp32 libraries may round differently (or, on a small model, not at all): the same run
  // within fp32's tolerance over six steps.
  EXPECT_LT(max_loss_difference((root_ / "eigen").string(), (root_ / "default").string()), 1e-3);
}

}  // namespace
}  // namespace fitgrad::apps::test_train
