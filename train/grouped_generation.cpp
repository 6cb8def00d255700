// generate_groups (grouped_generation.h, Note [Grouped generation]).
#include "train/grouped_generation.h"

#include <algorithm>
#include <memory>

#include "autograd/grad_mode.h"
#include "nn/kv_cache.h"
#include "tensor/error.h"

namespace fitgrad::train {
namespace {

// Puts a module in eval mode and restores its mode when it goes.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(nn::Module& m) : module_(m), was_training_(m.training()) { m.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  nn::Module& module_;
  bool was_training_;
};

// Consecutive completions sharing a prompt length, at most `rows` of them: [first, end).
struct RowBatch {
  int64_t first = 0, end = 0;
};

std::vector<RowBatch> row_batches(const std::vector<std::vector<int32_t>>& prompts, int64_t g,
                                  int64_t rows) {
  std::vector<RowBatch> out;
  const int64_t total = int64_t(prompts.size()) * g;
  for (int64_t c = 0; c < total; ++c) {
    const bool same_length = !out.empty() && prompts[size_t(out.back().first / g)].size() ==
                                                 prompts[size_t(c / g)].size();
    if (out.empty() || !same_length || out.back().end - out.back().first == rows)
      out.push_back({c, c});
    out.back().end = c + 1;
  }
  return out;
}

}  // namespace

std::vector<int32_t> generation_stop_ids(const LoadedModel& loaded) {
  if (!loaded.stop_ids.empty()) return loaded.stop_ids;
  if (loaded.tokenizer && loaded.tokenizer->eos()) return {*loaded.tokenizer->eos()};
  return {};
}

std::vector<Completion> generate_groups(nn::CausalLM& model, const data::Tokenizer* tokenizer,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GroupGenerationOptions& o, Generator& generator) {
  const int64_t g = o.num_generations, length = o.max_completion_length;
  FG_CHECK(g >= 1, "[generate] num_generations must be at least 1, got {}", g);
  FG_CHECK(length >= 1, "[generate] max_completion_length must be at least 1, got {}", length);
  FG_CHECK(o.generation_batch_size >= 0,
           "[generate] generation_batch_size must be >= 0 (0: num_generations), got {}",
           o.generation_batch_size);
  o.sampling.validate();
  const int64_t context = model.config().max_position_embeddings;
  for (size_t p = 0; p < prompts.size(); ++p) {
    FG_CHECK(!prompts[p].empty(), "[generate] prompt {} has no tokens", p);
    FG_CHECK(int64_t(prompts[p].size()) + length - 1 <= context,
             "[generate] prompt {}'s {} tokens + max_completion_length {} do not fit the "
             "model's context of {} positions; shorten the prompt or lower "
             "--max_completion_length",
             p, prompts[p].size(), length, context);
  }
  const auto params = model.named_parameters();
  FG_CHECK(!params.empty(), "[generate] the model has no parameters");
  const Device device = params.front().second.device();
  const bool dry = !device.has_bytes();

  autograd::NoGradGuard no_grad;
  EvalModeGuard eval(model);
  const RngState draws =
      generator.reserve(uint64_t(prompts.size()) * uint64_t(g) * uint64_t(length));
  std::vector<Completion> out(prompts.size() * size_t(g));
  const int64_t rows = o.generation_batch_size > 0 ? o.generation_batch_size : g;
  for (const RowBatch& batch : row_batches(prompts, g, rows)) {
    const int64_t b = batch.end - batch.first;
    const int64_t prompt_length = int64_t(prompts[size_t(batch.first / g)].size());
    std::vector<int32_t> ids;  // (b, prompt_length)
    for (int64_t c = batch.first; c < batch.end; ++c) {
      const std::vector<int32_t>& prompt = prompts[size_t(c / g)];
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      out[size_t(c)].prompt = c / g;
    }
    nn::KvCache cache(model.config(), b, prompt_length + length - 1, device, o.cache_dtype);
    Tensor logits =  // (b, T, V): T the prompt, then 1
        model.forward_cached(Tensor::from_vector(ids, {b, prompt_length}, DType::i32).to(device),
                             cache);
    std::vector<bool> done(size_t(b), false);
    std::vector<int32_t> next(size_t(b), 0);
    for (int64_t t = 0; t < length; ++t) {
      if (!dry) {
        const Tensor last = logits.select(1, logits.size(1) - 1);  // (b, V)
        for (int64_t r = 0; r < b; ++r) {
          if (done[size_t(r)]) continue;
          const uint64_t c = uint64_t(batch.first + r);
          Generator row_draws;
          row_draws.set_state({draws.seed, draws.offset + c * uint64_t(length) + uint64_t(t)});
          const int32_t token = nn::sample_token(last.select(0, r), o.sampling, row_draws);
          next[size_t(r)] = token;
          if (std::find(o.stop_ids.begin(), o.stop_ids.end(), token) != o.stop_ids.end()) {
            done[size_t(r)] = true;
            out[c].stop = token;
            continue;
          }
          out[c].ids.push_back(token);
          if (t + 1 == length) out[c].truncated = true;
        }
      }
      const bool all_done = std::all_of(done.begin(), done.end(), [](bool d) { return d; });
      if (t + 1 == length || (all_done && !o.full_length)) break;
      logits = Tensor();  // this step's logits go before the next step's come
      logits =
          model.forward_cached(Tensor::from_vector(next, {b, 1}, DType::i32).to(device), cache);
    }
    if (dry) {
      for (int64_t c = batch.first; c < batch.end; ++c) {
        out[size_t(c)].ids.assign(size_t(length), 0);
        out[size_t(c)].truncated = true;
      }
    }
  }
  // An id past the tokenizer's vocabulary (a model whose embedding is padded beyond it, as
  // Qwen2.5's is) decodes to nothing, as the Hugging Face tokenizers' decode skips ids it does
  // not know; its token still trains.
  if (tokenizer && !dry)
    for (Completion& c : out) {
      std::vector<int32_t> known;
      for (const int32_t id : c.ids)
        if (id >= 0 && id < tokenizer->vocab_size()) known.push_back(id);
      c.text = tokenizer->decode(known);
    }
  return out;
}

}  // namespace fitgrad::train
