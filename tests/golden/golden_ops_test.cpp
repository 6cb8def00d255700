// PyTorch golden data for the raw ops (issue 3): each row reads one file written by
// gen_golden.py, runs the fitgrad::ops forward on the stored inputs and the ops backward
// functions on the stored upstream gradient R, and compares `out` and every stored
// gradient d<input> (torch.autograd in float64, stored as f32) with f32 tolerances.
// Every result tensor in a file must be checked, and every .gtb file must be used.
//
// Note [Golden op tolerances]
// torch's own float32 run of each case lands within 3e-7 (normwise) of its float64 result
// (meta "torch_f32_err" in each file), and these shapes are tiny (reductions over <= 24
// terms), so a correct f32 kernel is within a few ulps: rtol 1e-5 / atol 1e-6 by default.
// atol is needed for elements that are sums of O(1) terms cancelling to near zero, whose
// relative error is unbounded.
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "tensor/ops/activation.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cross_entropy.h"
#include "tensor/ops/embedding.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

using Results = std::map<std::string, Tensor>;

struct GoldenOpCase {
  const char* label;
  const char* file;  // in tests/golden/
  std::function<Results(const GoldenFile&)> run;
  double rtol = 1e-5, atol = 1e-6;  // Note [Golden op tolerances]
};

// matmul's gradients through matmul with transposes: with A = op(a), B = op(b),
// dA = R B^T and dB = A^T R, then transposed back when a or b was, and summed over
// broadcast batch dims.
Results run_matmul(const GoldenFile& f) {
  const Tensor a = f.tensor("a"), b = f.tensor("b"), r = f.tensor("R");
  const bool ta = f.meta().at("trans_a"), tb = f.meta().at("trans_b");
  const Tensor da = ta ? ops::matmul(b, r, tb, true) : ops::matmul(r, b, false, !tb);
  const Tensor db = tb ? ops::matmul(r, a, true, ta) : ops::matmul(a, r, !ta, false);
  return {{"out", ops::matmul(a, b, ta, tb)},
          {"da", ops::sum_to(da, a.shape())},
          {"db", ops::sum_to(db, b.shape())}};
}

Results run_linear(const GoldenFile& f) {
  const Tensor x = f.tensor("x"), w = f.tensor("weight"), bias = f.tensor("bias");
  const Tensor r = f.tensor("R");  // (..., out)
  const Tensor r2 = r.reshape({-1, r.size(-1)}), x2 = x.reshape({-1, x.size(-1)});
  return {{"out", ops::linear(x, w, bias)},
          {"dx", ops::matmul(r, w)},
          {"dweight", ops::matmul(r2, x2, true, false)},
          {"dbias", ops::sum(r2, {0})}};
}

Results run_layer_norm(const GoldenFile& f) {
  const Tensor x = f.tensor("x"), w = f.tensor("weight"), b = f.tensor("bias");
  const auto fwd = ops::layer_norm(x, w, b, f.meta().at("eps"));
  const auto g = ops::layer_norm_backward(f.tensor("R"), x, w, fwd.mean, fwd.rstd, true);
  return {{"out", fwd.y}, {"dx", g.dx}, {"dweight", g.dweight}, {"dbias", g.dbias}};
}

Results run_rms_norm(const GoldenFile& f) {
  const Tensor x = f.tensor("x"), w = f.tensor("weight");
  const auto fwd = ops::rms_norm(x, w, f.meta().at("eps"));
  const auto g = ops::rms_norm_backward(f.tensor("R"), x, w, fwd.rstd);
  return {{"out", fwd.y}, {"dx", g.dx}, {"dweight", g.dweight}};
}

Results run_softmax(const GoldenFile& f) {
  const int64_t dim = f.meta().at("dim");
  const Tensor y = ops::softmax(f.tensor("x"), dim);
  return {{"out", y}, {"dx", ops::softmax_backward(f.tensor("R"), y, dim)}};
}

Results run_log_softmax(const GoldenFile& f) {
  const int64_t dim = f.meta().at("dim");
  const Tensor y = ops::log_softmax(f.tensor("x"), dim);
  return {{"out", y}, {"dx", ops::log_softmax_backward(f.tensor("R"), y, dim)}};
}

Results run_gelu(const GoldenFile& f) {
  const Tensor x = f.tensor("x");
  return {{"out", ops::gelu(x)}, {"dx", ops::gelu_backward(f.tensor("R"), x)}};
}

Results run_embedding(const GoldenFile& f) {
  const Tensor w = f.tensor("weight"), ids = f.tensor("ids");
  return {{"out", ops::embedding(w, ids)},
          {"dweight", ops::embedding_backward(f.tensor("R"), ids, w.size(0))}};
}

// chunk_rows 0 is the default chunking (one chunk here); a small one crosses chunks.
std::function<Results(const GoldenFile&)> run_cross_entropy(int64_t chunk_rows) {
  return [chunk_rows](const GoldenFile& f) -> Results {
    const Tensor logits = f.tensor("logits"), targets = f.tensor("targets");
    const int64_t ignore = f.meta().at("ignore_index");
    const auto fwd = ops::cross_entropy(logits, targets, ignore, chunk_rows);
    return {{"out", fwd.loss},
            {"dlogits", ops::cross_entropy_backward(f.tensor("R"), logits, targets, fwd.lse,
                                                    fwd.stats, ignore)}};
  };
}

Results run_flash_attention(const GoldenFile& f) {
  const Tensor q = f.tensor("q"), k = f.tensor("k"), v = f.tensor("v");
  const bool causal = f.meta().at("causal");
  const double scale = f.meta().at("scale");
  const auto fwd = ops::flash_attention(q, k, v, causal, scale);
  const auto g =
      ops::flash_attention_backward(f.tensor("R"), q, k, v, fwd.o, fwd.lse, causal, scale);
  return {{"out", fwd.o}, {"dq", g.dq}, {"dk", g.dk}, {"dv", g.dv}};
}

Results run_naive_attention(const GoldenFile& f) {
  const Tensor q = f.tensor("q"), k = f.tensor("k"), v = f.tensor("v");
  const bool causal = f.meta().at("causal");
  const double scale = f.meta().at("scale");
  const auto g = ops::naive_attention_backward(f.tensor("R"), q, k, v, causal, scale);
  return {{"out", ops::naive_attention(q, k, v, causal, scale)},
          {"dq", g.dq},
          {"dk", g.dk},
          {"dv", g.dv}};
}

const std::vector<GoldenOpCase>& cases() {
  static const std::vector<GoldenOpCase> table = {
      {"matmul 2d", "matmul_2d.gtb", run_matmul},
      {"matmul batched broadcast", "matmul_batched_broadcast.gtb", run_matmul},
      {"matmul transposed", "matmul_transposed.gtb", run_matmul},
      {"linear", "linear.gtb", run_linear},
      {"layer_norm", "layer_norm.gtb", run_layer_norm},
      {"rms_norm", "rms_norm.gtb", run_rms_norm},
      {"softmax last dim", "softmax_last.gtb", run_softmax},
      {"softmax middle dim", "softmax_middle.gtb", run_softmax},
      {"log_softmax last dim", "log_softmax_last.gtb", run_log_softmax},
      {"gelu tanh", "gelu_tanh.gtb", run_gelu},
      {"embedding", "embedding.gtb", run_embedding},
      {"cross_entropy", "cross_entropy.gtb", run_cross_entropy(0)},
      {"cross_entropy chunk_rows 5", "cross_entropy.gtb", run_cross_entropy(5)},
      {"flash attention causal MHA", "attention_causal_mha.gtb", run_flash_attention},
      {"flash attention causal GQA", "attention_causal_gqa.gtb", run_flash_attention},
      {"flash attention non-causal T != S", "attention_noncausal_t_ne_s.gtb", run_flash_attention},
      {"flash attention causal T < S", "attention_causal_t_lt_s.gtb", run_flash_attention},
      {"naive attention causal MHA", "attention_causal_mha.gtb", run_naive_attention},
      {"naive attention causal GQA", "attention_causal_gqa.gtb", run_naive_attention},
      {"naive attention non-causal T != S", "attention_noncausal_t_ne_s.gtb", run_naive_attention},
      {"naive attention causal T < S", "attention_causal_t_lt_s.gtb", run_naive_attention},
  };
  return table;
}

// Normwise error max|got - want| / max|want|, for the log (GOLDEN_VERBOSE=1).
double normwise(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return scale > 0 ? err / scale : err;
}

class GoldenOps : public ::testing::TestWithParam<GoldenOpCase> {};

TEST_P(GoldenOps, ForwardAndBackwardMatchTorch) {
  const GoldenOpCase& c = GetParam();
  const GoldenFile file(golden_path(c.file));
  const Results got = c.run(file);
  // The stored results: `out` and the gradients d<input>; inputs never start with 'd'.
  std::set<std::string> stored;
  for (const auto& name : file.names())
    if (name == "out" || name[0] == 'd') stored.insert(name);
  std::set<std::string> computed;
  for (const auto& [name, t] : got) computed.insert(name);
  EXPECT_EQ(computed, stored) << c.label << ": every stored result must be checked";
  const bool verbose = std::getenv("GOLDEN_VERBOSE") != nullptr;
  for (const auto& [name, t] : got) {
    if (!file.has(name)) continue;
    const Tensor want = file.tensor(name);
    ASSERT_EQ(t.shape(), want.shape()) << c.label << " " << name;
    const auto g = to_f64(t), w = to_f64(want);
    EXPECT_TRUE(all_close(g, w, c.rtol, c.atol)) << c.label << " " << name;
    if (verbose)
      std::printf("[golden] %-36s %-8s normwise err %.2e (torch f32 %.2e)\n", c.label, name.c_str(),
                  normwise(g, w), file.meta().at("torch_f32_err").value(name, 0.0));
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenOps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GoldenOpCase>& info) {
                           std::string s;  // alphanumerics, other runs become one '_'
                           for (char ch : std::string(info.param.label)) {
                             if (std::isalnum(static_cast<unsigned char>(ch)))
                               s += ch;
                             else if (!s.empty() && s.back() != '_')
                               s += '_';
                           }
                           return s;
                         });

// Each committed .gtb file is read by some row above, by golden_block_test.cpp,
// golden_llama_test.cpp, golden_smollm2_test.cpp or the optimizer tests.
TEST(GoldenOpsFiles, EveryGoldenFileIsUsed) {
  std::set<std::string> used = {"block.gtb", "llama_block.gtb", "smollm2_logits.gtb"};
  // Read by tests/optim/ (optim_golden_test.cpp, schedule_test.cpp,
  // adafactor_golden_test.cpp, adam8bit_golden_test.cpp, apollo_golden_test.cpp,
  // galore_golden_test.cpp).
  used.insert({"optim_adamw.gtb", "optim_adamw_clip.gtb", "optim_sgd.gtb", "optim_sgd_nesterov.gtb",
               "optim_schedules.gtb", "optim_adafactor_torch.gtb", "optim_adafactor_hf.gtb",
               "optim_adafactor_hf_manual.gtb", "optim_adam8bit.gtb", "optim_apollo.gtb",
               "optim_apollo_mini.gtb", "optim_galore.gtb"});
  // Read by tests/tensor/quant/four_bit_golden_test.cpp and int8_golden_test.cpp (and
  // tests/optim/int8_update_test.cpp).
  used.insert({"nf4_quant.gtb", "int8_quant.gtb"});
  // Read by smollm2_slice_*_test.cpp and tests/io/gguf_smollm2_test.cpp.
  used.insert({"smollm2_slice.gtb", "smollm2_tensors.gtb"});
  for (const auto& c : cases()) used.insert(c.file);
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(FITGRAD_GOLDEN_DIR)) {
    if (e.path().extension() != ".gtb") continue;
    ++n;
    EXPECT_TRUE(used.count(e.path().filename().string())) << e.path() << " is not tested";
  }
  EXPECT_EQ(n, int(used.size())) << "a golden file named in the tests is missing";
}

}  // namespace
}  // namespace fitgrad::testing
