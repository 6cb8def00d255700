// libFuzzer target for the GGUF reader (io/gguf.cpp), its block decoders
// (io/gguf_dequant.cpp), the llama.cpp name mapping (nn/llama_names.cpp) and the
// embedded tokenizer (data/gguf_tokenizer.cpp). Each input is written to a scratch file and
// opened like a model. fitgrad::Error is the expected outcome for malformed input anywhere
// along the way; anything else (a crash, a sanitizer report, InternalError, another
// exception) is a bug. A file that opens has every metadata value listed and converted,
// every tensor decoded (up to a budget of elements per input, so one input stays fast),
// its F32/F16/BF16 tensors mapped and compared with the decoded ones, and its tokenizer
// built and run on a fixed text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/gguf_tokenizer.h"
#include "fuzz/temp_file.h"
#include "io/gguf.h"
#include "nn/llama_names.h"
#include "tensor/error.h"

namespace {

using fitgrad::Error;
using fitgrad::Tensor;
using fitgrad::io::GgufFile;

// Elements decoded per input, summed over its tensors (the files stay small, but a Q4
// block turns 18 bytes into 32 floats).
constexpr int64_t kDecodeBudget = int64_t(1) << 18;

volatile size_t sink;  // keeps results from being optimised away

template <class Fn>
void expect_error_or_value(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

// Every accessor on every value: each either converts or throws Error.
void walk_metadata(const GgufFile& file) {
  size_t n = 0;
  for (const auto& entry : file.metadata().entries()) {
    const std::string& key = entry.first;  // (Clang 14 cannot capture structured bindings)
    const fitgrad::io::GgufValue& v = entry.second;
    n += v.str().size() + v.str(0).size() + v.size();
    expect_error_or_value([&] { n += size_t(v.as_u64()); });
    expect_error_or_value([&] { n += size_t(v.as_i64()); });
    expect_error_or_value([&] { n += v.as_u32(); });
    expect_error_or_value([&] { n += size_t(v.as_i32()); });
    expect_error_or_value([&] { n += size_t(v.as_f32() != 0); });
    expect_error_or_value([&] { n += v.as_bool(); });
    expect_error_or_value([&] { n += v.as_string().size(); });
    expect_error_or_value([&] { n += v.as_string_array().size(); });
    expect_error_or_value([&] { n += v.as_i64_array().size(); });
    expect_error_or_value([&] { n += v.as_i32_array().size(); });
    expect_error_or_value([&] { n += v.as_f32_array().size(); });
    expect_error_or_value([&] { n += file.metadata().get_u32(key); });
    expect_error_or_value([&] { n += file.metadata().get_string_array(key).size(); });
  }
  sink = n;
}

// Decodes the tensors into f32 and bf16 while the budget lasts; an F32/F16/BF16 tensor
// mapped without a copy must hold the same bytes as its decoded copy. Then the whole file
// as a Llama model (names mapped, Q/K unpermuted) when it fits the budget.
void decode_tensors(const GgufFile& file) {
  int64_t budget = kDecodeBudget;
  size_t n = 0;
  for (const fitgrad::io::GgufTensorInfo& t : file.tensors()) {
    if (file.info(t.name).offset != t.offset || t.shape().size() != t.ne.size()) std::abort();
    if (t.nbytes) n += file.tensor_data(t.name)[0] + file.tensor_data(t.name)[t.nbytes - 1];
    if (t.numel > budget) continue;
    budget -= t.numel;
    for (fitgrad::DType out : {fitgrad::DType::f32, fitgrad::DType::bf16}) {
      std::optional<Tensor> decoded;
      expect_error_or_value([&] { decoded = file.tensor(t.name, out); });
      if (!decoded) continue;
      if (decoded->numel() != t.numel || decoded->shape() != t.shape()) std::abort();
      n += decoded->nbytes();
    }
    std::optional<Tensor> mapped;
    expect_error_or_value([&] { mapped = file.mapped_tensor(t.name); });
    if (mapped) {
      const Tensor copy = file.tensor(t.name, mapped->dtype());
      if (mapped->nbytes() != t.nbytes || copy.nbytes() != t.nbytes ||
          (t.nbytes && std::memcmp(mapped->data_ptr(), copy.data_ptr(), t.nbytes) != 0))
        std::abort();
    }
  }
  int64_t total = 0;
  for (const auto& t : file.tensors()) total += t.numel;
  if (total <= kDecodeBudget)
    expect_error_or_value([&] { n += fitgrad::nn::load_llama_gguf(file).size(); });
  sink = n;
}

// The tokenizer, if the file has one that builds: a fixed text encodes to ids inside the
// vocabulary, and those ids decode.
void run_tokenizer(const GgufFile& file) {
  std::unique_ptr<fitgrad::data::Tokenizer> tok;
  expect_error_or_value([&] { tok = fitgrad::data::tokenizer_from_gguf(file); });
  if (!tok) return;
  const std::string text = "Hello, world! 12345 <|endoftext|> \xC3\xA9t\xC3\xA9\n\tdone";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids;
    expect_error_or_value([&] { ids = tok->encode(text, special); });
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    sink = tok->decode(ids).size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fitgrad::fuzz::TempFile scratch("gguf");
  std::optional<GgufFile> file;
  try {
    file = GgufFile::open(scratch.write(data, size));
  } catch (const Error&) {
  }
  if (!file) return 0;
  walk_metadata(*file);
  decode_tensors(*file);
  run_tokenizer(*file);
  return 0;
}
