// `fitgrad eval` (see eval.h).
//
// Note [Eval windows]
// The text is tokenized whole, after the tokenizer's bos when it starts every text with one,
// as transformers' perplexity guide tokenizes the joined text (Note [The bos a text starts
// with] in data/hf_tokenizer.cpp; the tokenizer's own special tokens in the text stay text).
// Window w feeds tokens [L w, L w + L) and scores the predictions of tokens
// [L w + 1, L w + L + 1), for L = --seq_len: the windows' scored tokens are disjoint and each
// window starts with a fresh context, as bench/smollm2_perplexity's windows (and the
// stride = length case of transformers' perplexity guide) do. A last window with fewer than L
// tokens left is scored over what is left. With --batch_size B, up to B windows of one length
// go through one forward, which changes nothing but the products' rounding. The mean NLL is
// over every scored token; the perplexity is its exponential.
#include "apps/eval.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/guard.h"
#include "autograd/grad_mode.h"
#include "data/hf_tokenizer.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::LoadedModel;

EvalStats evaluate(const EvalOptions& o, std::ostream& out) {
  FG_CHECK(o.max_windows >= 0, "[eval] --max_windows must be 0 (every window) or positive, got {}",
           o.max_windows);
  FG_CHECK(o.batch_size >= 1, "[eval] --batch_size must be positive, got {}", o.batch_size);
  FG_CHECK(!o.data.empty(), "[eval] --data is required: a UTF-8 text file to score");
  const std::string text = io::read_whole_file("eval", "data file", o.data);
  const Device device = Device::parse(o.device);
  const LoadedModel loaded = load_inference_model("eval", o);
  FG_CHECK(loaded.tokenizer, "[eval] {} has no tokenizer to read the text with", o.model);
  const nn::CausalLM& model = *loaded.model;
  const int64_t context = model.config().max_position_embeddings;
  FG_CHECK(o.seq_len >= 1 && o.seq_len <= context,
           "[eval] --seq_len must be in [1, {}] (the model's context), got {}", context, o.seq_len);
  const std::vector<int32_t> ids =
      data::text_ids(*loaded.tokenizer, loaded.tokenizer_vocabulary, text,
                     /*allow_special=*/false);
  FG_CHECK(ids.size() >= 2,
           "[eval] {} holds {} token(s): at least 2 are needed to score one prediction", o.data,
           ids.size());

  autograd::NoGradGuard no_grad;
  CachingAllocator& allocator = allocator_for(device);
  allocator.reset_peak_stats();
  EvalStats stats;
  double nll_sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // The windows' first tokens (Note [Eval windows]), at most --max_windows of them.
  std::vector<int64_t> starts;
  for (int64_t start = 0; start + 1 < int64_t(ids.size()) &&
                          (o.max_windows == 0 || int64_t(starts.size()) < o.max_windows);
       start += o.seq_len)
    starts.push_back(start);
  auto length = [&](int64_t start) {
    return std::min<int64_t>(o.seq_len, int64_t(ids.size()) - 1 - start);
  };
  // Up to --batch_size windows of one length go through one forward; the mean loss of a
  // batch of b windows of n tokens is its NLL sum over b n.
  for (size_t w = 0; w < starts.size();) {
    const int64_t n = length(starts[w]);
    size_t end = w + 1;
    while (end < starts.size() && int64_t(end - w) < o.batch_size && length(starts[end]) == n)
      ++end;
    const int64_t b = int64_t(end - w);
    std::vector<int32_t> x, y;
    for (size_t i = w; i < end; ++i) {
      x.insert(x.end(), ids.begin() + starts[i], ids.begin() + starts[i] + n);
      y.insert(y.end(), ids.begin() + starts[i] + 1, ids.begin() + starts[i] + n + 1);
    }
    const Tensor xs = Tensor::from_vector(x, {b, n}, DType::i32).to(device);
    const Tensor ys = Tensor::from_vector(y, {b, n}, DType::i32).to(device);
    const double mean = model.loss(xs, ys).item();  // the mean over the batch's B T tokens
    nll_sum += mean * double(b * n);
    stats.scored_tokens += b * n;
    out << (b == 1 ? fmt::format("window {}: {} tokens, mean NLL {:.4f}\n", w, n, mean)
                   : fmt::format("windows {}-{}: {} x {} tokens, mean NLL {:.4f}\n", w, end - 1, b,
                                 n, mean));
    stats.windows += b;
    w = end;
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.mean_nll = nll_sum / double(stats.scored_tokens);
  stats.peak_bytes = allocator.stats().allocated_bytes[kAllPools].peak;
  return stats;
}

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "The perplexity of a model on a text file (windows of --seq_len tokens)");
  add_inference_model_options(*cmd, *o);
  cmd->add_option("--data", o->data, "the UTF-8 text file to score")->required();
  cmd->add_option("--seq_len", o->seq_len, "tokens per window (default 512)");
  cmd->add_option("--max_windows", o->max_windows, "score at most this many windows; 0 = all");
  cmd->add_option("--batch_size", o->batch_size,
                  "windows of one length per forward (default 1); the result is the same");
  cmd->callback([o] {
    const int code = run_guarded("eval", std::cout, std::cerr, [&] {
      const EvalStats s = evaluate(*o, std::cout);
      std::cout << fmt::format(
                       "[eval] {}: {} windows, {} scored tokens, mean NLL {:.4f} nats/token, "
                       "perplexity {:.3f}, {:.2f} s ({:.1f} tokens/s), peak memory {}",
                       o->data, s.windows, s.scored_tokens, s.mean_nll, std::exp(s.mean_nll),
                       s.seconds, double(s.scored_tokens) / s.seconds, format_bytes(s.peak_bytes))
                << std::endl;
      // The machine-readable line: every value at full precision.
      std::cout << nlohmann::json{{"tokens", s.scored_tokens},
                                  {"nll", s.mean_nll},
                                  {"ppl", std::exp(s.mean_nll)}}
                       .dump()
                << std::endl;
      return 0;
    });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace fitgrad::apps
