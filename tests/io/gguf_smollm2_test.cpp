// Reads the real SmolLM2-135M-Instruct Q4_1 GGUF file (Llama architecture, 30 blocks,
// tied embeddings): its metadata, its tokenizer arrays, every tensor decoded, and the
// parameter count under the Hugging Face names, which must equal the published count
// 134,515,008. Every tensor's decode is checked against ggml's `gguf` package. The file
// comes from tools/fetch-smollm2.sh; the tests skip when it is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "nn/llama_names.h"
#include "tests/golden/golden_file.h"
#include "tests/io/gguf_decode_check.h"
#include "tests/io/smollm2_file.h"

namespace fitgrad::io {
namespace {

class GgufSmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::smollm2_path();
    if (std::filesystem::is_regular_file(path))
      file_ = std::make_unique<GgufFile>(GgufFile::open(path));
  }
  static void TearDownTestSuite() { file_.reset(); }
  void SetUp() override {
    if (!file_) GTEST_SKIP() << test::smollm2_skip_message();
  }
  static const GgufFile& file() { return *file_; }
  static std::unique_ptr<GgufFile> file_;
};
std::unique_ptr<GgufFile> GgufSmolLM2::file_;

TEST_F(GgufSmolLM2, Metadata) {
  const auto& m = file().metadata();
  EXPECT_EQ(file().version(), 3u);
  EXPECT_EQ(file().alignment(), 32u);
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_u32("llama.block_count"), 30u);
  EXPECT_EQ(m.get_u32("llama.embedding_length"), 576u);
  EXPECT_EQ(m.get_u32("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(m.get_u32("llama.attention.head_count"), 9u);
  EXPECT_EQ(m.get_u32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(m.get_u32("llama.context_length"), 8192u);
  EXPECT_EQ(m.get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(m.get_f32("llama.rope.freq_base"), 100000.f);
  EXPECT_NEAR(m.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f, 1e-10f);
  EXPECT_EQ(m.get_u32("general.file_type"), 3u);  // mostly Q4_1
}

TEST_F(GgufSmolLM2, Tokenizer) {
  const auto& m = file().metadata();
  EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "gpt2");  // byte-level BPE
  EXPECT_EQ(m.get_string("tokenizer.ggml.pre"), "smollm");
  const auto& tokens = m.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(m.get_i32_array("tokenizer.ggml.token_type").size(), 49152u);
  const auto& merges = m.get_string_array("tokenizer.ggml.merges");
  EXPECT_EQ(merges.size(), 48900u);
  EXPECT_EQ(merges[0], "\xC4\xA0 t");  // "Ġ t": byte-level BPE spells a space as U+0120
  EXPECT_EQ(m.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(m.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_FALSE(m.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_NE(m.get_string("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(m.get_u32("llama.vocab_size"), tokens.size());
}

// The Hugging Face shapes of one block, and the tensor types the file uses.
TEST_F(GgufSmolLM2, TensorNamesShapesAndTypes) {
  ASSERT_EQ(file().tensors().size(), 272u);  // 1 + 30 * 9 + 1; no output.weight (tied)
  std::map<std::string, Shape> shapes;
  std::map<std::string, int> types;
  for (const auto& t : file().tensors()) {
    auto hf = nn::llama_cpp_to_hf_name(t.name);
    ASSERT_TRUE(hf.has_value()) << t.name;
    shapes[*hf] = t.shape();
    ++types[t.type_name()];
  }
  EXPECT_EQ(types, (std::map<std::string, int>{{"F32", 61}, {"Q4_1", 210}, {"Q8_0", 1}}));
  EXPECT_FALSE(file().has_tensor("output.weight"));
  EXPECT_EQ(file().info("token_embd.weight").type_name(), "Q8_0");
  EXPECT_EQ(shapes["model.embed_tokens.weight"], (Shape{49152, 576}));
  EXPECT_EQ(shapes["model.norm.weight"], (Shape{576}));
  const std::string l = "model.layers.29.";
  EXPECT_EQ(shapes[l + "input_layernorm.weight"], (Shape{576}));
  EXPECT_EQ(shapes[l + "self_attn.q_proj.weight"], (Shape{576, 576}));
  EXPECT_EQ(shapes[l + "self_attn.k_proj.weight"], (Shape{192, 576}));
  EXPECT_EQ(shapes[l + "self_attn.v_proj.weight"], (Shape{192, 576}));
  EXPECT_EQ(shapes[l + "self_attn.o_proj.weight"], (Shape{576, 576}));
  EXPECT_EQ(shapes[l + "post_attention_layernorm.weight"], (Shape{576}));
  EXPECT_EQ(shapes[l + "mlp.gate_proj.weight"], (Shape{1536, 576}));
  EXPECT_EQ(shapes[l + "mlp.up_proj.weight"], (Shape{1536, 576}));
  EXPECT_EQ(shapes[l + "mlp.down_proj.weight"], (Shape{576, 1536}));
}

// SmolLM2-135M's published parameter count, and the same number from the config.
TEST_F(GgufSmolLM2, ParameterCountIsPublished) {
  int64_t total = 0;
  std::set<std::string> names;
  for (const auto& t : file().tensors()) {
    names.insert(*nn::llama_cpp_to_hf_name(t.name));
    total += t.numel;
  }
  EXPECT_EQ(names.size(), file().tensors().size());
  EXPECT_EQ(total, 134515008);
  const int64_t V = 49152, D = 576, F = 1536, L = 30, kv = 3 * 64;
  EXPECT_EQ(total, V * D + L * (2 * D + D * D + 2 * D * kv + D * D + 3 * D * F) + D);
}

// Every tensor decodes to the values of ggml's `gguf` package, bit for bit (Note [Bitwise
// GGUF decodes]): the checksum of its whole decode and three sampled 32-value blocks, from
// tests/golden/smollm2_tensors.gtb (gen_smollm2_fixture.py).
TEST_F(GgufSmolLM2, EveryTensorDequantizes) {
  const testing::GoldenFile ref(testing::golden_path("smollm2_tensors.gtb"));
  const auto& checksums = ref.meta().at("checksums");
  ASSERT_EQ(checksums.size(), file().tensors().size());
  for (const auto& t : file().tensors()) {
    SCOPED_TRACE(t.name + " (" + t.type_name() + ")");
    Tensor w = file().tensor(t.name);
    ASSERT_EQ(w.shape(), t.shape());
    const float* x = w.data<float>();
    EXPECT_EQ(test::decode_checksum(x, w.numel()), checksums.at(t.name).get<std::string>());
    const std::vector<int64_t> blocks = ref.tensor(t.name + ".blocks").to_vector<int64_t>();
    const std::vector<float> want = ref.tensor(t.name).to_vector<float>();
    ASSERT_EQ(want.size(), 32 * blocks.size());
    for (size_t s = 0; s < blocks.size(); ++s)
      test::expect_same_bits(x + 32 * blocks[s], want.data() + 32 * s, 32,
                             "block " + std::to_string(blocks[s]));
  }
}

// The decoded embedding row of a token matches in f32, bf16 and through load_llama_gguf,
// and q/k come back in Hugging Face row order (inverse of the converter's permutation).
TEST_F(GgufSmolLM2, DecodingsAgreeAndQkUnpermutes) {
  Tensor e32 = file().tensor("token_embd.weight");
  Tensor e16 = file().tensor("token_embd.weight", DType::bf16);
  for (int64_t j = 0; j < 576; j += 37)
    EXPECT_NEAR(e16.at({1, j}), e32.at({1, j}), 1e-2 * std::abs(e32.at({1, j})) + 1e-6);
  Tensor q = file().tensor("blk.0.attn_q.weight");
  Tensor k = file().tensor("blk.0.attn_k.weight");
  Tensor q_hf = nn::unpermute_qk(q, 9);
  Tensor k_hf = nn::unpermute_qk(k, 3);
  EXPECT_EQ(nn::permute_qk(q_hf, 9).to_vector<float>(), q.to_vector<float>());
  // Row (h, j, i) of HF's (heads, 2, 32) order is GGUF row (h, i, j) of (heads, 32, 2).
  for (int64_t h : {0, 2})
    for (int64_t i : {0, 5, 31})
      for (int64_t jj : {0, 1})
        EXPECT_EQ(k_hf.at({h * 64 + jj * 32 + i, 7}), k.at({h * 64 + i * 2 + jj, 7}));
}

}  // namespace
}  // namespace fitgrad::io
