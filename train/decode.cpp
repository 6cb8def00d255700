// generate_after and Utf8Stream (decode.h).
#include "train/decode.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "autograd/grad_mode.h"
#include "nn/kv_cache.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The logits of the last position of (1, T, V) as a (V) tensor.
Tensor last_logits(const Tensor& logits) {
  return logits.select(0, 0).select(0, logits.size(1) - 1);
}

Tensor ids_tensor(const std::vector<int32_t>& ids, Device device) {
  return Tensor::from_vector(ids, {1, int64_t(ids.size())}, DType::i32).to(device);
}

}  // namespace

void Utf8Stream::write(const std::string& bytes) {
  pending_ += bytes;
  const size_t keep = incomplete_tail();
  out_.write(pending_.data(), std::streamsize(pending_.size() - keep));
  out_.flush();
  pending_.erase(0, pending_.size() - keep);
}

void Utf8Stream::finish() {
  out_ << pending_;
  out_.flush();
  pending_.clear();
}

// The bytes from the last lead byte on when they are fewer than its sequence needs (an
// unfinished character); 0 when the end is complete. An invalid prefix held here is
// written once a later byte shows it cannot continue.
size_t Utf8Stream::incomplete_tail() const {
  const size_t n = pending_.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto b = uint8_t(pending_[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

GenerateStats generate_after(const LoadedModel& loaded, const DecodeOptions& o,
                             std::vector<int32_t> ids, std::ostream& out, std::string* text) {
  const nn::CausalLM& model = *loaded.model;
  const data::Tokenizer& tok = *loaded.tokenizer;
  const Device device = o.device;
  const DType dtype = o.dtype;
  if (ids.empty() && tok.bos()) ids.push_back(*tok.bos());
  FG_CHECK(!ids.empty(), "[generate] the prompt is empty");
  const int64_t context = model.config().max_position_embeddings;
  GenerateStats stats;
  int64_t max_new = o.max_new_tokens.value_or(0);
  if (!o.max_new_tokens) {  // the default: 64, or what the context leaves
    constexpr int64_t kDefault = 64;
    const int64_t room = context - int64_t(ids.size()) + 1;
    max_new = std::min(kDefault, room);
    if (max_new < kDefault && max_new > 0) stats.clamped_to = max_new;
  }
  FG_CHECK(max_new > 0 && int64_t(ids.size()) <= context,
           "[generate] the prompt's {} tokens fill the model's context of {} positions; "
           "shorten the prompt",
           ids.size(), context);
  const int64_t total = int64_t(ids.size()) + max_new - 1;  // the last is not fed
  FG_CHECK(total <= context,
           "[generate] {} prompt tokens + {} new tokens do not fit the model's context of {} "
           "positions; lower --max_new_tokens or shorten the prompt",
           ids.size(), max_new, context);

  autograd::NoGradGuard no_grad;
  CachingAllocator& allocator = allocator_for(device);
  Generator generator(o.seed);
  std::unique_ptr<nn::KvCache> cache;
  if (!o.no_kv_cache)
    cache = std::make_unique<nn::KvCache>(model.config(), 1, total, device, dtype);

  stats.prompt_tokens = int64_t(ids.size());
  stats.stop_reason = "max_new_tokens";
  Utf8Stream stream(out);
  auto t0 = Clock::now();
  Tensor logits = cache ? model.forward_cached(ids_tensor(ids, device), *cache)
                        : model.forward(ids_tensor(ids, device));
  stats.prefill_seconds = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t i = 0; i < max_new; ++i) {
    const int32_t next = nn::sample_token(last_logits(logits), o.sampling, generator);
    // Note [Stop tokens] in model_source.cpp: the spec's, else the tokenizer's eos.
    const bool stop = loaded.stop_ids.empty()
                          ? tok.eos() && next == *tok.eos()
                          : std::find(loaded.stop_ids.begin(), loaded.stop_ids.end(), next) !=
                                loaded.stop_ids.end();
    if (stop) {
      stats.stop_reason = "eos";
      break;
    }
    ++stats.new_tokens;
    ids.push_back(next);
    const std::string piece = tok.decode_continuation({next});
    stream.write(piece);
    if (text) *text += piece;
    if (i + 1 == max_new) break;
    logits = cache ? model.forward_cached(ids_tensor({next}, device), *cache)
                   : model.forward(ids_tensor(ids, device));
  }
  stream.finish();
  stats.decode_seconds = seconds_since(t0);
  stats.peak_bytes = allocator.stats().allocated_bytes[kAllPools].peak;
  return stats;
}

}  // namespace fitgrad::train
