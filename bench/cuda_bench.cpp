// The CUDA kernels' throughput (issue 15), for tools/device-check.sh: GEMMs in bf16 and TF32
// at 4096^3 and at transformer shapes, and flash attention forward + backward in bf16 at head
// dims 64 and 128, T = 1k..8k, causal and not. Each row is the median of --reps timed runs
// after --warmup, timed on the host around fitgrad::synchronize(cuda:0), and printed as
//   RESULT <kind> <name> <TFLOP/s>
// for the device check to set beside PyTorch's rows (tools/device/torch_reference.py, the
// same shapes on the same card). FLOPs: 2 m n k per GEMM; attention forward 4 B H T S D
// (halved under a causal mask), forward + backward 3.5 times the forward (the backward's
// five products against the forward's two), as FlashAttention's benchmarks count them.
// A plain program, not a Google Benchmark: without a GPU it says so and exits 0.
// `--device cpu --small` runs every row at a sixteenth of each size on the CPU: the device
// check's rehearsal (tools/device-check.sh --rehearse) proves the program end to end there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tensor/backend/math_mode.h"
#include "tensor/device_copy.h"
#include "tensor/device_registry.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/random.h"
#include "tensor/tensor.h"

namespace fitgrad {
namespace {

struct Options {
  int warmup = 3, reps = 10;
  int64_t shrink = 1;  // every size divided by this (--small: 16)
};

// The median seconds of fn over the timed runs.
double time_median(const Options& opt, Device device, const std::function<void()>& fn) {
  for (int i = 0; i < opt.warmup; ++i) fn();
  synchronize(device);
  std::vector<double> seconds;
  for (int i = 0; i < opt.reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(device);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

Tensor random_on(Device device, const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype, device);
  ops::uniform_(t, RngState{seed, 0}, -1.0, 1.0);
  return t;
}

void gemm_rows(const Options& opt, Device device) {
  struct Shape3 {
    const char* name;
    int64_t m, n, k;
  };
  // 4096^3, and GPT-2 124M / Llama-7B training shapes at 8192 tokens.
  const Shape3 shapes[] = {{"4096^3", 4096, 4096, 4096},
                           {"gpt2.qkv_8192x2304x768", 8192, 2304, 768},
                           {"gpt2.mlp_8192x3072x768", 8192, 3072, 768},
                           {"gpt2.head_8192x50257x768", 8192, 50257, 768},
                           {"llama7b.mlp_8192x11008x4096", 8192, 11008, 4096},
                           {"llama7b.attn_8192x4096x4096", 8192, 4096, 4096}};
  for (bool tf32 : {false, true})
    for (Shape3 s : shapes) {
      s.m = std::max<int64_t>(1, s.m / opt.shrink);
      s.n = std::max<int64_t>(1, s.n / opt.shrink);
      s.k = std::max<int64_t>(1, s.k / opt.shrink);
      const DType dtype = tf32 ? DType::f32 : DType::bf16;
      const Tensor a = random_on(device, {s.m, s.k}, dtype, 1);
      const Tensor b = random_on(device, {s.k, s.n}, dtype, 2);
      backend::MatmulTf32Scope mode(tf32);
      const double sec = time_median(opt, device, [&] { ops::matmul(a, b); });
      std::printf("RESULT gemm %s.%s %.4g\n", tf32 ? "tf32" : "bf16", s.name,
                  2.0 * double(s.m) * double(s.n) * double(s.k) / sec / 1e12);
      std::fflush(stdout);
    }
}

void attention_rows(const Options& opt, Device device) {
  const int64_t tokens = 16384 / opt.shrink;  // B T, as FlashAttention-2's benchmark holds it
  for (int64_t d : {64, 128})
    for (int64_t full_t : {1024, 2048, 4096, 8192})
      for (bool causal : {false, true}) {
        const int64_t t = std::min(tokens, full_t / opt.shrink);
        const int64_t heads = 2048 / d, batch = tokens / t;
        const Tensor q = random_on(device, {batch, heads, t, d}, DType::bf16, 3);
        const Tensor k = random_on(device, {batch, heads, t, d}, DType::bf16, 4);
        const Tensor v = random_on(device, {batch, heads, t, d}, DType::bf16, 5);
        const Tensor dout = random_on(device, {batch, heads, t, d}, DType::bf16, 6);
        const double sec = time_median(opt, device, [&] {
          const ops::AttentionOut out = ops::flash_attention(q, k, v, causal);
          ops::flash_attention_backward(dout, q, k, v, out.o, out.lse, causal);
        });
        const double fwd =
            4.0 * double(batch * heads) * double(t) * double(t) * double(d) / (causal ? 2.0 : 1.0);
        std::printf("RESULT attention fwdbwd.d%lld.t%lld.%s %.4g\n", static_cast<long long>(d),
                    static_cast<long long>(t), causal ? "causal" : "full", 3.5 * fwd / sec / 1e12);
        std::fflush(stdout);
      }
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) {
  using namespace fitgrad;
  Options opt;
  std::string only;
  std::string device_name = "cuda:0";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--warmup" && i + 1 < argc) {
      opt.warmup = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      opt.reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      device_name = argv[++i];
    } else if (arg == "--small") {
      opt.shrink = 16;
    } else {
      std::fprintf(stderr,
                   "cuda_bench: unknown argument %s (--warmup N --reps N --only gemm|attention "
                   "--device cuda:0|cpu --small)\n",
                   arg.c_str());
      return 2;
    }
  }
  Device device;
  try {
    device = Device::parse(device_name);
  } catch (const Error& e) {
    std::fprintf(stderr, "cuda_bench: --device: %s\n", e.what());
    return 2;
  }
  if (device.type == DeviceType::cuda && usable_device_count(DeviceType::cuda) <= device.index) {
    std::printf("cuda_bench: skipped: no usable CUDA device %s\n", device.str().c_str());
    return 0;
  }
  if (only.empty() || only == "gemm") gemm_rows(opt, device);
  if (only.empty() || only == "attention") attention_rows(opt, device);
  return 0;
}
