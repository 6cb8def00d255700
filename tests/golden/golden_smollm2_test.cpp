// The real SmolLM2-135M-Instruct (Q4_1 GGUF) loaded by nn::load_gguf_model against an
// independent float64 reference on the same dequantized weights (smollm2_logits.gtb,
// written by gen_smollm2_golden.py: ggml's `gguf` package decodes the weights, the Llama
// forward is written in torch, the prompt is tokenized by Hugging Face's `tokenizers`):
//   - fitgrad's GGUF tokenizer turns the prompt into the reference's ids, and decodes the
//     reference continuation to its text;
//   - the f32 logits at the stored prompt positions match (Note [SmolLM2 logit tolerance]);
//   - the greedy continuation of 32 tokens is the reference's, token for token, both from
//     one forward (below) and from apps::generate decoding through the KV cache.
// Every test skips when the model file is absent (tools/fetch-smollm2.sh fetches it).
//
// Note [One forward for the greedy check]
// The suite runs the model once, on the prompt followed by the reference's 32-token
// continuation (T = prompt + 32, no KV cache). Causal attention makes the logits at
// position p depend on tokens 0..p only, so row p is exactly what a forward of that prefix
// alone gives: the prompt rows are the prompt's logits, and row prompt - 1 + s is greedy
// step s given the reference's first s tokens. If every such row's argmax is the
// reference's token, fitgrad's own greedy decoding (each step fed its own previous picks)
// produces the reference continuation by induction over the steps; a differing step is
// reported alone rather than derailing the rest. One forward of 55 tokens instead of 32
// growing ones keeps the suite within seconds on CPU.
//
// Note [SmolLM2 logit tolerance]
// The bound is "at most 1e-3 relative for the same dequantized weights". It is
// applied normwise per position: max_v |got_v - want_v| / max_v |want_v| <= 1e-3 over the
// 49152 logits of one position. Normwise, because logits act through softmax, which sees
// absolute differences, and because a per-element relative error is unbounded for the many
// logits near zero, in any f32 implementation. For scale, the generator records the same
// reference run in torch float32 (meta "torch_f32_err", ~1e-6): a correct f32 forward lands
// far inside the bound, while a wrong RoPE pairing, eps, theta, GQA mapping or Q/K
// unpermutation moves logits by O(1). The reference's top-1/top-2 margins (tensor
// "margins", smallest 0.008 at step 3) show how far each greedy step is from a tie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/generate.h"
#include "autograd/grad_mode.h"
#include "data/gguf_tokenizer.h"
#include "nn/gguf_model.h"
#include "tests/golden/golden_file.h"
#include "tests/io/smollm2_file.h"

namespace fitgrad::testing {
namespace {

constexpr double kLogitTolerance = 1e-3;  // Note [SmolLM2 logit tolerance]

class GoldenSmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::is_regular_file(test::smollm2_path())) return;
    golden_ = std::make_unique<GoldenFile>(golden_path("smollm2_logits.gtb"));
    file_ = std::make_unique<io::GgufFile>(io::GgufFile::open(test::smollm2_path()));
    model_ = nn::load_gguf_model(*file_);
    // Note [One forward for the greedy check]: prompt + reference continuation.
    std::vector<int64_t> ids = golden_->tensor("prompt_ids").to_vector<int64_t>();
    for (int64_t t : golden_->tensor("continuation").to_vector<int64_t>()) ids.push_back(t);
    autograd::NoGradGuard no_grad;
    const Tensor x = Tensor::from_vector(ids, {1, int64_t(ids.size())}, DType::i64);
    logits_ = model_->forward(x).to_vector<float>();  // (T, V) row by row
  }
  static void TearDownTestSuite() {
    model_.reset();
    file_.reset();
    golden_.reset();
    logits_.clear();
  }
  void SetUp() override {
    if (!file_) GTEST_SKIP() << test::smollm2_skip_message();
  }
  static const float* logits_row(int64_t position) {
    return logits_.data() + position * model_->config().vocab_size;
  }

  static std::unique_ptr<GoldenFile> golden_;
  static std::unique_ptr<io::GgufFile> file_;
  static std::unique_ptr<nn::CausalLM> model_;
  static std::vector<float> logits_;
};
std::unique_ptr<GoldenFile> GoldenSmolLM2::golden_;
std::unique_ptr<io::GgufFile> GoldenSmolLM2::file_;
std::unique_ptr<nn::CausalLM> GoldenSmolLM2::model_;
std::vector<float> GoldenSmolLM2::logits_;

std::vector<int32_t> to_i32(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

TEST_F(GoldenSmolLM2, TokenizerGivesTheReferenceIds) {
  const std::unique_ptr<data::Tokenizer> tok_ptr = data::tokenizer_from_gguf(*file_);
  const data::Tokenizer& tok = *tok_ptr;
  const auto prompt_ids = golden_->tensor("prompt_ids").to_vector<int64_t>();
  const std::string prompt = golden_->meta().at("prompt");
  EXPECT_EQ(tok.encode(prompt, /*allow_special=*/true), to_i32(prompt_ids));
  EXPECT_EQ(tok.decode(to_i32(prompt_ids)), prompt);
  EXPECT_EQ(tok.decode(to_i32(golden_->tensor("continuation").to_vector<int64_t>())),
            golden_->meta().at("continuation_text").get<std::string>());
}

TEST_F(GoldenSmolLM2, ConfigIsThePublishedOne) {
  const nn::ModelConfig& got = model_->config();
  const nn::ModelConfig want = nn::preset("smollm2-135m");
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.hidden_size, want.hidden_size);
  EXPECT_EQ(got.intermediate_size, want.intermediate_size);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.num_heads, want.num_heads);
  EXPECT_EQ(got.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(got.resolved_head_dim(), want.resolved_head_dim());
  EXPECT_EQ(got.max_position_embeddings, want.max_position_embeddings);
  EXPECT_NEAR(got.norm_eps, want.norm_eps, 1e-12);  // stored as f32: 1e-5 to 7 digits
  EXPECT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings);
  EXPECT_FALSE(got.attention_qkv_bias || got.attention_out_bias || got.mlp_bias);
  EXPECT_EQ(model_->num_parameters(), 134515008);
}

TEST_F(GoldenSmolLM2, LogitsMatchTheReference) {
  const auto ids = golden_->tensor("prompt_ids").to_vector<int64_t>();
  const auto positions = golden_->tensor("positions").to_vector<int64_t>();
  const Tensor want_t = golden_->tensor("logits");  // (P, V)
  const int64_t V = want_t.size(1);
  ASSERT_EQ(V, model_->config().vocab_size);
  const std::vector<float> want = want_t.to_vector<float>();
  ASSERT_EQ(logits_.size(), (ids.size() + 32) * size_t(V));
  for (size_t p = 0; p < positions.size(); ++p) {
    ASSERT_LT(positions[p], int64_t(ids.size()));
    const float* g = logits_row(positions[p]);
    const float* w = want.data() + int64_t(p) * V;
    double err = 0, scale = 0;
    for (int64_t v = 0; v < V; ++v) {
      err = std::max(err, std::fabs(double(g[v]) - double(w[v])));
      scale = std::max(scale, std::fabs(double(w[v])));
    }
    const double rel = err / scale;
    EXPECT_LE(rel, kLogitTolerance) << "position " << positions[p];
    RecordProperty("normwise_err_pos" + std::to_string(positions[p]), std::to_string(rel));
    std::printf("[smollm2] position %lld: max |logit - ref| / max |ref| = %.3e (max |ref| %.2f)\n",
                static_cast<long long>(positions[p]), rel, scale);
  }
}

TEST_F(GoldenSmolLM2, GreedyContinuationMatchesTheReference) {
  const int64_t T = golden_->tensor("prompt_ids").size(0);
  const auto want = golden_->tensor("continuation").to_vector<int64_t>();
  const auto margins = golden_->tensor("margins").to_vector<float>();
  ASSERT_EQ(want.size(), 32u);
  const int64_t V = model_->config().vocab_size;
  std::vector<int32_t> got;
  for (size_t step = 0; step < want.size(); ++step) {
    const float* row = logits_row(T - 1 + int64_t(step));  // Note [One forward for the ...]
    got.push_back(int32_t(std::max_element(row, row + V) - row));
    EXPECT_EQ(got.back(), want[step])
        << "step " << step << " (reference top-1/top-2 margin " << margins[step] << ")";
  }
  std::printf("[smollm2] greedy continuation: %s\n",
              data::tokenizer_from_gguf(*file_)->decode(got).c_str());
}

// The same continuation produced the way a user gets it: `fitgrad generate` at temperature
// 0, decoding token by token through the KV cache from the prompt alone.
TEST_F(GoldenSmolLM2, GenerateWithTheKvCacheWritesTheReferenceContinuation) {
  apps::GenerateOptions o;
  o.model = test::smollm2_path();
  o.prompt = golden_->meta().at("prompt").get<std::string>();
  o.max_new_tokens = 32;
  o.sampling.temperature = 0;
  std::ostringstream out;
  const train::GenerateStats stats = apps::generate(o, out);
  EXPECT_EQ(stats.new_tokens, 32);
  EXPECT_EQ(out.str(), golden_->meta().at("continuation_text").get<std::string>());
}

}  // namespace
}  // namespace fitgrad::testing
