// `fitgrad eval` (apps/eval.h): the windows of Note [Eval windows] (every token after the
// first scored once, a short last window), the mean NLL equal to the model's own loss over
// those windows, an untrained byte model near ln 256 nats per byte, --batch_size,
// --max_windows, bad input named; a PEFT adapter scores as its merged model, a 4-bit base
// near its dense self; and the command's JSON line.
#include "apps/eval.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/export.h"
#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::load_model;
using train::LoadedModel;
namespace {

namespace fs = std::filesystem;

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("fitgrad_eval_" + std::to_string(::getpid()) + ".txt");
    std::string text;
    for (int i = 0; i < 150; ++i) text += char('a' + (i * 7) % 26);  // 150 bytes
    std::ofstream(path_, std::ios::binary) << text;
    text_ = text;
  }
  void TearDown() override { fs::remove(path_); }
  EvalOptions options() const {
    EvalOptions o;
    o.model = "llama-tiny";  // byte tokenizer, context 64
    o.data = path_.string();
    o.seq_len = 64;
    return o;
  }
  fs::path path_;
  std::string text_;
};

TEST_F(EvalTest, ScoresEveryTokenOnceAsTheModelsOwnLoss) {
  std::ostringstream out;
  const EvalStats s = evaluate(options(), out);
  EXPECT_EQ(s.windows, 3);  // 64 + 64 + 21 predictions of 150 bytes
  EXPECT_EQ(s.scored_tokens, 149);
  // The same model (the same spec and seed) scored window by window.
  const LoadedModel m = load_model("llama-tiny", "", {});
  autograd::NoGradGuard no_grad;
  double sum = 0;
  for (int64_t start : {0, 64, 128}) {
    const int64_t n = std::min<int64_t>(64, 149 - start);
    std::vector<int32_t> x, y;
    for (int64_t i = 0; i < n; ++i) {
      x.push_back(uint8_t(text_[start + i]));
      y.push_back(uint8_t(text_[start + i + 1]));
    }
    sum += m.model
               ->loss(Tensor::from_vector(x, {1, n}, DType::i32),
                      Tensor::from_vector(y, {1, n}, DType::i32))
               .item() *
           double(n);
  }
  EXPECT_DOUBLE_EQ(s.mean_nll, sum / 149);
  // An untrained byte model predicts nearly uniformly: about ln 256 nats per byte.
  EXPECT_NEAR(s.mean_nll, std::log(256.0), 0.5);
  EXPECT_NE(out.str().find("window 2: 21 tokens"), std::string::npos) << out.str();
}

// Windows of one length share a forward under --batch_size; the result is the same (up to
// the products' rounding), and the short last window goes alone.
TEST_F(EvalTest, BatchedWindowsScoreTheSame) {
  std::ostringstream one_out, two_out;
  const EvalStats one = evaluate(options(), one_out);
  EvalOptions o = options();
  o.batch_size = 2;
  const EvalStats two = evaluate(o, two_out);
  EXPECT_EQ(two.windows, 3);
  EXPECT_EQ(two.scored_tokens, 149);
  EXPECT_NEAR(two.mean_nll, one.mean_nll, 1e-5 * one.mean_nll);
  EXPECT_NE(two_out.str().find("windows 0-1: 2 x 64 tokens"), std::string::npos) << two_out.str();
  EXPECT_NE(two_out.str().find("window 2: 21 tokens"), std::string::npos) << two_out.str();
}

TEST_F(EvalTest, MaxWindowsStopsEarly) {
  EvalOptions o = options();
  o.max_windows = 1;
  std::ostringstream out;
  const EvalStats s = evaluate(o, out);
  EXPECT_EQ(s.windows, 1);
  EXPECT_EQ(s.scored_tokens, 64);
}

// The committed PEFT fixture (tests/golden/peft_tiny): its base, its adapter over it, and the
// adapter merged by `fitgrad export` into one file; the adapter's NLL is the merged model's.
TEST_F(EvalTest, AnAdapterScoresAsItsMergedModelAndNf4NearItsBase) {
  const std::string fixture = std::string(FITGRAD_GOLDEN_DIR) + "/peft_tiny";
  EvalOptions o = options();
  o.model = fixture + "/base";
  o.seq_len = 64;
  std::ostringstream sink;
  const double base = evaluate(o, sink).mean_nll;
  o.adapter = fixture + "/adapter";
  const double adapted = evaluate(o, sink).mean_nll;
  EXPECT_GT(std::fabs(adapted - base), 1e-4);  // the adapter changes the model
  const fs::path merged = fs::temp_directory_path() /
                          ("fitgrad_eval_merged_" + std::to_string(::getpid()) + ".safetensors");
  ExportArgs args;
  args.merge = fixture + "/adapter";
  args.base = fixture + "/base";
  args.out = merged.string();
  args.dtype = "f32";
  export_merged(args, sink);
  EvalOptions m = options();
  m.model = fixture + "/base/config.json";
  m.init = merged.string();
  EXPECT_NEAR(evaluate(m, sink).mean_nll, adapted, 1e-5);
  fs::remove(merged);
  o.adapter.clear();
  o.quantize = "nf4";
  const EvalStats nf4 = evaluate(o, sink);
  EXPECT_NEAR(nf4.mean_nll, base, 0.05);
  EXPECT_NE(nf4.mean_nll, base);
}

TEST_F(EvalTest, TheCommandEndsWithAJsonLine) {
  const fs::path log =
      fs::temp_directory_path() / ("fitgrad_eval_cli_" + std::to_string(::getpid()) + ".log");
  const std::string command = std::string(FITGRAD_CLI) + " eval --model llama-tiny --data " +
                              path_.string() + " --seq_len 64 > " + log.string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  fs::remove(log);
  const nlohmann::json j = nlohmann::json::parse(last);
  std::ostringstream sink;
  const EvalStats s = evaluate(options(), sink);
  EXPECT_EQ(j.at("tokens").get<int64_t>(), s.scored_tokens);
  EXPECT_DOUBLE_EQ(j.at("nll").get<double>(), s.mean_nll);
  EXPECT_DOUBLE_EQ(j.at("ppl").get<double>(), std::exp(s.mean_nll));
}

TEST_F(EvalTest, BadInputIsNamed) {
  auto message = [](const EvalOptions& o) {
    std::ostringstream out;
    try {
      evaluate(o, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EvalOptions o = options();
  o.data = (fs::temp_directory_path() / "fitgrad_no_such_file.txt").string();
  EXPECT_NE(message(o).find("cannot open the data file"), std::string::npos) << message(o);
  o = options();
  o.seq_len = 65;
  EXPECT_NE(message(o).find("--seq_len must be in [1, 64]"), std::string::npos) << message(o);
  o = options();
  o.batch_size = 0;
  EXPECT_NE(message(o).find("--batch_size must be positive"), std::string::npos) << message(o);
  o = options();
  o.dtype = "f16";
  EXPECT_NE(message(o).find("--dtype must be f32 or bf16"), std::string::npos) << message(o);
  std::ofstream(path_, std::ios::binary) << "a";
  EXPECT_NE(message(options()).find("at least 2 are needed"), std::string::npos)
      << message(options());
}

}  // namespace
}  // namespace fitgrad::apps
