// The fitgrad arm of the training-step comparison (bench/compare_train_step.sh, issue 5):
// one CPU training step of a GPT-2-style decoder (6 layers, d 384, 6 heads, T 256, batch 8,
// GPT-2 vocabulary 50257, n_positions 1024, tied head, fp32) -- forward, mean
// cross-entropy, backward, AdamW step, zero_grad -- timed as the median of --steps steps
// after --warmup steps. bench/train_step_torch.py is the same model and step in PyTorch.
//
// It also measures the step's peak allocated bytes (the CPU allocator's peak over one
// step after warmup, when the AdamW states already exist) against the analytic sum of
// Note [Training-step memory], with the activation category's own peak as a check on
// the activation formula. A plain program, not a Google Benchmark: one step takes
// seconds, and the driver parses the RESULT lines.
//
// Note [Training-step memory]
// The analytic peak is weights + gradients + AdamW's two moments + every saved
// activation, each counted in fp32 bytes, for P parameters and N = B T tokens:
//   weights P, gradients P, AdamW states 2 P;
//   saved activations, derived from what each op's backward rule keeps (autograd/
//   functions_*.cpp save() calls; views, biases and residual adds keep nothing):
//     per block, with F = 4 C the MLP width and H heads:
//       ln_1          x (N C), mean (N), rstd (N)          -- x is the block's input
//       c_attn        its input, ln_1's output (N C)
//       attention     q, k, v = views of c_attn's output (3 N C), o (N C), lse (N H)
//       attn.c_proj   merged heads, a copy of o transposed (N C)
//       ln_2          h = x + attn (N C), mean (N), rstd (N)
//       c_fc          ln_2's output (N C)
//       gelu          its input (N F)
//       mlp.c_proj    gelu's output (N F)
//     = N (9 C + 2 F + H + 4) floats per block;
//     outside the blocks: the ids (N i64), ln_f's input, mean, rstd (N C + 2 N), the
//     head's input (N C), cross-entropy's logits (N V), lse (N) and targets (N i64)
//     = N (2 C + V + 3) floats + 2 N i64.
// At the end of the forward all of these are live at once; the backward then frees
// activations as it creates gradients, so the sum is an upper bound that the step
// exceeds only if its backward needs more than the gradients it creates, which is what
// the ratio against the measured peak checks. The largest candidate was the logits'
// gradient (N V, as large as the logits); it now overwrites them (Note [Cross-entropy
// gradient over the logits] in autograd/functions_nn.cpp), so the backward's largest
// transient is the head's dW (V C) next to the first delivery of wte's gradient.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/autocast.h"
#include "autograd/autocast_cache.h"
#include "autograd/tape.h"
#include "bench/flag_value.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "tensor/cpu/gemm.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/export.h"
#include "train/train_step.h"

namespace fitgrad {
namespace {

struct Args {
  int64_t layers = 6, d = 384, heads = 6, seq = 256, batch = 8, vocab = 50257, ctx = 1024;
  int warmup = 2, steps = 5, threads = 2;
  bool adamw = true;  // --optimizer=none: forward and backward only
  bool bf16 = false;  // --bf16: forward under bf16 autocast (Note [Autocast])
  bool peak_report = false;
  std::string
      gemm;  // --gemm=dnnl|openblas|eigen|mkl: the fp32 GEMM backend (default: the machine's)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* flag) { return bench::flag_value(s, flag); };
    if (const char* v = value("--layers"))
      a.layers = std::atoll(v);
    else if (const char* v = value("--d"))
      a.d = std::atoll(v);
    else if (const char* v = value("--heads"))
      a.heads = std::atoll(v);
    else if (const char* v = value("--seq"))
      a.seq = std::atoll(v);
    else if (const char* v = value("--batch"))
      a.batch = std::atoll(v);
    else if (const char* v = value("--vocab"))
      a.vocab = std::atoll(v);
    else if (const char* v = value("--ctx"))
      a.ctx = std::atoll(v);
    else if (const char* v = value("--warmup"))
      a.warmup = std::atoi(v);
    else if (const char* v = value("--steps"))
      a.steps = std::atoi(v);
    else if (const char* v = value("--threads"))
      a.threads = std::atoi(v);
    else if (const char* v = value("--optimizer"))
      a.adamw = std::string(v) != "none";
    else if (s == "--bf16")
      a.bf16 = true;
    else if (const char* v = value("--gemm"))
      a.gemm = v;
    else if (s == "--peak_report")
      a.peak_report = true;
    else if (s.starts_with("--benchmark_"))  // `make bench` passes BENCH_ARGS to every program
      continue;
    else {
      std::fprintf(
          stderr,
          "usage: train_step_bench [--layers=6] [--d=384] [--heads=6] [--seq=256] "
          "[--batch=8] [--vocab=50257] [--ctx=1024] [--warmup=2] [--steps=5] "
          "[--threads=2] [--optimizer=adamw|none] [--bf16] [--gemm=dnnl|openblas|eigen|mkl] "
          "[--peak_report]\n");
      std::exit(2);
    }
  }
  return a;
}

nn::ModelConfig config_of(const Args& a) {
  nn::ModelConfig cfg = nn::preset("gpt2");
  cfg.name = "gpt2-bench";
  cfg.num_layers = a.layers;
  cfg.hidden_size = a.d;
  cfg.intermediate_size = 4 * a.d;
  cfg.num_heads = cfg.num_kv_heads = a.heads;
  cfg.vocab_size = a.vocab;
  cfg.max_position_embeddings = a.ctx;
  cfg.embd_pdrop = cfg.attn_pdrop = cfg.resid_pdrop = 0.0;  // as the torch arm, no dropout
  return cfg;
}

// Note [Training-step memory]: the saved activations in bytes.
int64_t saved_activation_bytes(const Args& a) {
  const int64_t n = a.batch * a.seq, c = a.d, f = 4 * a.d;
  const int64_t per_block = n * (9 * c + 2 * f + a.heads + 4);
  const int64_t outside = n * (2 * c + a.vocab + 3);
  return 4 * (a.layers * per_block + outside) + 2 * 8 * n;
}

// A deterministic token stream (an LCG), so both arms see data of the same statistics.
Tensor tokens(int64_t rows, int64_t cols, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> v(size_t(rows * cols));
  uint64_t s = seed;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int64_t((s >> 33) % uint64_t(vocab));
  }
  return Tensor::from_vector(v, {rows, cols});
}

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

int run(const Args& a) {
  cpu::set_gemm_threads(a.threads);
  if (!a.gemm.empty()) {
    bool known = false;
    for (cpu::GemmBackend b : {cpu::GemmBackend::dnnl, cpu::GemmBackend::openblas,
                               cpu::GemmBackend::eigen, cpu::GemmBackend::mkl})
      if (a.gemm == cpu::gemm_backend_name(b)) {
        cpu::set_gemm_backend(b);
        known = true;
      }
    if (!known) {
      std::fprintf(stderr, "train_step_bench: unknown --gemm=%s (dnnl, openblas, eigen or mkl)\n",
                   a.gemm.c_str());
      std::exit(2);
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(a.threads);  // the elementwise, norm, attention and loss kernels
#endif
  const nn::ModelConfig cfg = config_of(a);
  auto model = nn::build_model(cfg);
  const Tensor ids = tokens(a.batch, a.seq + 1, a.vocab, 1);  // (B, T + 1)
  const Tensor x = ids.narrow(1, 0, a.seq).contiguous();      // (B, T)
  const Tensor y = ids.narrow(1, 1, a.seq).contiguous();      // (B, T)
  CachingAllocator& alloc = allocator_for(Device::cpu());
  // The torch arm's settings: decay on matrices and embeddings only.
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.1),
                   optim::AdamWOptions{3e-4, 0.9, 0.95, 1e-8, 0.1});

  // The step fitgrad train runs (train/train_step.h), without clipping as in the torch arm;
  // with --optimizer=none the same forward and backward without the optimizer.
  const optim::LrSchedule constant = optim::make_lr_schedule("constant", 3e-4, 0, a.steps);
  train::TrainStep step(*model, opt, constant,
                        {.compute_dtype = a.bf16 ? DType::bf16 : DType::f32});

  std::vector<double> ms;
  int64_t peak = 0, activation_peak = 0;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    if (i == a.warmup) alloc.reset_peak_stats();
    const auto t0 = std::chrono::steady_clock::now();
    double loss = NAN;
    if (a.adamw) {
      step.run(i, [&](int64_t) { return train::MicroBatch{x, y}; });
    } else {
      {
        autograd::AutocastGuard autocast(a.bf16 ? DType::bf16 : DType::f32);
        autograd::AutocastCacheScope weight_cache;
        const Tensor l = model->loss(x, y);
        autograd::backward(l);
        loss = l.item();
      }
      opt.zero_grad();
    }
    const double dt =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i == a.warmup) {  // one measured step's peak
      peak = alloc.stats().allocated_bytes[kAllPools].peak;
      activation_peak = alloc.by_category()[size_t(Category::activation)].peak;
      if (a.peak_report) std::printf("%s\n", peak_report(alloc).c_str());
    }
    if (i >= a.warmup) ms.push_back(dt);
    if (a.adamw) loss = step.take_log().mean_loss;  // after the timing: the one host read
    std::printf("fitgrad step %d loss %.4f %.1f ms\n", i, loss, dt);
    std::fflush(stdout);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const int64_t params = cfg.num_parameters();
  const int64_t weights = 4 * params, grads = 4 * params, states = a.adamw ? 8 * params : 0;
  const int64_t acts = saved_activation_bytes(a);
  const int64_t analytic = weights + grads + states + acts;
  std::printf(
      "RESULT arm=fitgrad median_ms=%.1f min_ms=%.1f tokens_per_s=%.0f steps=%d threads=%d "
      "optimizer=%s precision=%s gemm=%s\n",
      median, ms.front(), double(a.batch * a.seq) / (median / 1e3), a.steps, a.threads,
      a.adamw ? "adamw" : "none", a.bf16 ? "bf16" : "fp32",
      cpu::gemm_backend_name(cpu::gemm_backend()));
  std::printf(
      "MEMORY params=%lld weights_mib=%.1f grads_mib=%.1f adamw_mib=%.1f activations_mib=%.1f "
      "analytic_mib=%.1f peak_mib=%.1f peak_ratio=%.3f activation_peak_mib=%.1f "
      "activation_ratio=%.3f\n",
      static_cast<long long>(params), mib(weights), mib(grads), mib(states), mib(acts),
      mib(analytic), mib(peak), double(peak) / double(analytic), mib(activation_peak),
      double(activation_peak) / double(acts));
  return 0;
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) { return fitgrad::run(fitgrad::parse(argc, argv)); }
