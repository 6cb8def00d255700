// `fitgrad quantize` (apps/quantize.h): a model's linear weights come out in bitsandbytes'
// 4-bit layout (io/bnb_4bit.h) with every companion tensor, transformers' quant state and
// the exact bytes of quantizing each weight directly; embeddings, norms and the head are
// copied byte for byte; the file loads back through --init as the dequantized weights; the
// command holds far less than the model while it runs (Note [Streaming quantization]); bad
// input is an error naming it.
#include "apps/quantize.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/inspect.h"
#include "io/bnb_4bit.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/nn/gguf_fixture.h"
#include "tests/tensor/ops/op_harness.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::load_model;
using train::LoadedModel;
namespace {
namespace fs = std::filesystem;

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.nbytes() == y.nbytes() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.nbytes())) == 0;
}

class Quantize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fitgrad_quantize_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = nn::build_model(nn::preset("llama-tiny"), {.seed = 12});
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, t] : model_->named_parameters()) tensors.emplace_back(name, t);
    in_ = (dir_ / "model.safetensors").string();
    io::save_safetensors(in_, tensors);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string in_;
  std::unique_ptr<nn::CausalLM> model_;
};

TEST_F(Quantize, WritesBitsandbytesLayoutWithTheExactBytes) {
  QuantizeArgs a;
  a.in = in_;
  a.out = (dir_ / "nf4.safetensors").string();
  a.nf4 = true;
  std::ostringstream out;
  CachingAllocator& alloc = allocator_for(Device::cpu());
  alloc.reset_peak_stats();
  const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
  const int64_t n = quantize_model_file(a, out);
  const int64_t peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  EXPECT_EQ(n, 14);  // 2 layers x (q, k, v, o, gate, up, down)
  EXPECT_NE(out.str().find("bits per weight"), std::string::npos) << out.str();
  int64_t weight_bytes = 0;
  for (const auto& [name, t] : model_->named_parameters())
    if (is_quantized_linear(name, t.shape())) weight_bytes += t.nbytes();
  EXPECT_LT(peak, weight_bytes / 2) << "peak " << peak;  // streaming, not the whole model

  const auto file = io::SafetensorsFile::open(a.out);
  for (const auto& [name, t] : model_->named_parameters()) {
    if (!is_quantized_linear(name, t.shape())) {
      EXPECT_TRUE(same_bytes(file.tensor(name), t)) << name;
      continue;
    }
    ASSERT_TRUE(io::is_bnb_4bit(file, name)) << name;
    const Tensor packed = file.tensor(name);
    EXPECT_EQ(packed.dtype(), DType::u8);
    EXPECT_EQ(packed.shape(), (Shape{t.numel() / 2, 1})) << name;
    EXPECT_EQ(file.tensor(name + ".absmax").dtype(), DType::u8);
    EXPECT_EQ(file.tensor(name + ".quant_map").numel(), 16);
    EXPECT_EQ(file.tensor(name + ".nested_quant_map").numel(), 256);
    const Tensor state = file.tensor(name + ".quant_state.bitsandbytes__nf4");
    const auto j = nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(state.data<uint8_t>()), size_t(state.numel())));
    EXPECT_EQ(j.at("quant_type"), "nf4");
    EXPECT_EQ(j.at("blocksize"), 64);
    EXPECT_EQ(j.at("dtype"), "float32");
    EXPECT_EQ(j.at("shape"), nlohmann::json(t.shape()));
    EXPECT_EQ(j.at("nested_blocksize"), 256);
    EXPECT_EQ(j.at("nested_dtype"), "float32");
    // The same bytes as quantizing the weight directly.
    const ops::FourBit direct = ops::quantize_4bit(t, {});
    const ops::FourBit back = io::read_bnb_4bit(file, name);
    EXPECT_TRUE(same_bytes(back.packed, direct.packed)) << name;
    EXPECT_TRUE(same_bytes(back.nested, direct.nested)) << name;
    EXPECT_TRUE(same_bytes(back.absmax2, direct.absmax2)) << name;
    EXPECT_TRUE(same_bytes(back.offset, direct.offset)) << name;
  }

  // --init takes the file: the dense model gets the dequantized weights.
  LoadedModel loaded = load_model("llama-tiny", a.out, {});
  for (const auto& [name, t] : loaded.model->named_parameters()) {
    const Tensor want = is_quantized_linear(name, t.shape())
                            ? ops::dequantize_4bit(io::read_bnb_4bit(file, name), DType::f32)
                            : model_->parameter(name);
    EXPECT_TRUE(same_bytes(t, want)) << name;
  }
}

// Note [GGUF input]: the same model stored as llama.cpp's converter would (Q/K rows
// permuted, F32) quantizes to the same bytes under Hugging Face names, its dense tensors in
// --dtype, and the result loads back through --init.
TEST_F(Quantize, AGgufModelQuantizesUnderHuggingFaceNames) {
  QuantizeArgs a;
  a.in = testing::write_gguf("quantize_in", testing::as_llama_cpp(*model_));
  a.out = (dir_ / "from_gguf.safetensors").string();
  a.nf4 = true;
  std::ostringstream out;
  EXPECT_EQ(quantize_model_file(a, out), 14);
  const auto file = io::SafetensorsFile::open(a.out);
  for (const auto& [name, t] : model_->named_parameters()) {
    if (!is_quantized_linear(name, t.shape())) {
      EXPECT_TRUE(same_bytes(file.tensor(name), t.to(DType::bf16))) << name;
      continue;
    }
    const Tensor state = file.tensor(name + ".quant_state.bitsandbytes__nf4");
    const auto j = nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(state.data<uint8_t>()), size_t(state.numel())));
    EXPECT_EQ(j.at("dtype"), "bfloat16") << name;
    const ops::FourBit direct = ops::quantize_4bit(t, {});
    const ops::FourBit back = io::read_bnb_4bit(file, name);
    EXPECT_TRUE(same_bytes(back.packed, direct.packed)) << name;
    EXPECT_TRUE(same_bytes(back.nested, direct.nested)) << name;
  }
  EXPECT_NO_THROW(load_model("llama-tiny", a.out, {}));
  fs::remove(a.in);
}

// A model folder as input (its shards read as the loader reads them): the same file as from
// its one-file form, and a folder already in 4 bits is refused; `inspect` lists the folder.
TEST_F(Quantize, AModelFolderQuantizesAsItsSingleFile) {
  QuantizeArgs a;
  a.in = in_;
  a.out = (dir_ / "from_file.safetensors").string();
  a.nf4 = true;
  std::ostringstream out;
  ASSERT_EQ(quantize_model_file(a, out), 14);
  const fs::path folder = dir_ / "folder";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << nn::config_to_json(model_->config()).dump();
  fs::copy_file(in_, folder / "model.safetensors");
  a.in = folder.string();
  a.out = (dir_ / "from_folder.safetensors").string();
  ASSERT_EQ(quantize_model_file(a, out), 14);
  const auto one = io::SafetensorsFile::open(dir_ / "from_file.safetensors"),
             other = io::SafetensorsFile::open(a.out);
  ASSERT_EQ(one.entries().size(), other.entries().size());
  for (const io::SafetensorsEntry& e : one.entries())
    EXPECT_TRUE(same_bytes(one.tensor(e.name), other.tensor(e.name))) << e.name;
  std::ostringstream listed;
  inspect_file(folder.string(), listed);
  EXPECT_NE(listed.str().find("Hugging Face model folder, llama"), std::string::npos)
      << listed.str();
  EXPECT_NE(listed.str().find("model.layers.1.mlp.down_proj.weight"), std::string::npos);
  fs::copy_file(dir_ / "from_file.safetensors", folder / "model.safetensors",
                fs::copy_options::overwrite_existing);
  a.out = (dir_ / "twice.safetensors").string();
  testing::expect_error([&] { quantize_model_file(a, out); }, "[quantize]", "is already quantized");
}

TEST_F(Quantize, BadInputIsAnErrorNamingIt) {
  QuantizeArgs a;
  a.in = in_;
  a.out = (dir_ / "x.safetensors").string();
  std::ostringstream out;
  testing::expect_error([&] { quantize_model_file(a, out); }, "[quantize]",
                        "give exactly one of --nf4 and --fp4");
  a.nf4 = true;
  a.blocksize = 100;
  testing::expect_error([&] { quantize_model_file(a, out); }, "[quantize]",
                        "blocksize must be a power of two from 32 to 4096, got 100");
  a.blocksize = 64;
  a.out = in_;
  testing::expect_error([&] { quantize_model_file(a, out); }, "[quantize]", "would overwrite");
  a.out = (dir_ / "x.safetensors").string();
  quantize_model_file(a, out);
  a.in = a.out;
  a.out = (dir_ / "y.safetensors").string();
  testing::expect_error([&] { quantize_model_file(a, out); }, "[quantize]", "is already quantized");
  // An int8 weight (Note [Int8 weights as parameters]) is named, with the way to a dense file.
  a.in = (dir_ / "int8.safetensors").string();
  io::save_safetensors(
      a.in, {{"model.layers.0.mlp.up_proj.weight", Tensor::zeros({4, 64}, DType::u8)},
             {"model.layers.0.mlp.up_proj.weight_scales", Tensor::full({1}, 1.0, DType::f32)},
             {"model.layers.0.mlp.up_proj.weight_zeros", Tensor::zeros({1}, DType::u8)}});
  testing::expect_error(
      [&] { quantize_model_file(a, out); },
      "[quantize] " + a.in + ": 'model.layers.0.mlp.up_proj.weight' is an int8 weight",
      "fitgrad export --base");
}

}  // namespace
}  // namespace fitgrad::apps
