// Real Q4_1 and Q8_0 blocks of SmolLM2-135M-Instruct, cut into the committed
// smollm2_slice.gguf by gen_smollm2_fixture.py, decoded by io::GgufFile::tensor and
// compared bit for bit (Note [Bitwise GGUF decodes]) with ggml's `gguf` package's decode
// of the same bytes (smollm2_slice.gtb). They need no model download, so they always run;
// GgufSmolLM2.EveryTensorDequantizes checks every tensor when the model is present.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/gguf.h"
#include "tests/golden/golden_file.h"
#include "tests/io/gguf_decode_check.h"

namespace fitgrad::testing {
namespace {

// Tensor `name`_blocks of the slice, one block per row, against `name`_values.
void expect_blocks_match(const std::string& name, const std::string& type) {
  const io::GgufFile file = io::GgufFile::open(golden_path("smollm2_slice.gguf"));
  const GoldenFile ref(golden_path("smollm2_slice.gtb"));
  const io::GgufTensorInfo& info = file.info(name + "_blocks");
  ASSERT_EQ(info.type_name(), type);
  const std::vector<float> got = file.tensor(name + "_blocks").to_vector<float>();
  const std::vector<float> want = ref.tensor(name + "_values").to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(want.size(), 16u * 32u);
  const auto& sources = ref.meta().at(name + "_sources");
  for (size_t b = 0; b < sources.size(); ++b)
    test::expect_same_bits(
        got.data() + 32 * b, want.data() + 32 * b, 32,
        fmt::format("block {} ({} block {}, {})", b, sources[b].at("tensor").get<std::string>(),
                    sources[b].at("block").get<int64_t>(),
                    sources[b].at("why").get<std::string>()));
}

TEST(SmolLM2Slice, Q4_1BlocksDecodeAsGgufPy) { expect_blocks_match("q4_1", "Q4_1"); }

TEST(SmolLM2Slice, Q8_0BlocksDecodeAsGgufPy) { expect_blocks_match("q8_0", "Q8_0"); }

}  // namespace
}  // namespace fitgrad::testing
