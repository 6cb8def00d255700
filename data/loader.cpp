// The Loader: window slicing, batch building, the worker threads and their queues, and the
// resume state.
#include "data/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "data/sft_stream.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad::data {

// Note [Loader workers]: the batch at position p (p = epoch * batches_per_epoch + index) is
// a pure function of p, so any thread can build it. Worker k of W owns the positions
// start + k + m*W and pushes them, in that order, to its own queue; next() at position p
// pops the front of queue (p - start) % W, which is therefore batch p, with no reorder
// buffer. A worker waits while its queue holds `prefetch` batches. restore() stops the
// workers, drops what they built, and starts them again from the new position (start).
// Each worker keeps its own copy of the epoch's window order (8 bytes a window).
// Allocations inside a worker happen under Category::data, set in that thread (the memory
// context is thread-local), and the allocator is thread-safe.

void to_json(nlohmann::json& j, const LoaderState& s) {
  j = nlohmann::json{{"epoch", s.epoch}, {"index", s.index}, {"seed", s.seed}};
}

void from_json(const nlohmann::json& j, LoaderState& s) {
  j.at("epoch").get_to(s.epoch);
  j.at("index").get_to(s.index);
  j.at("seed").get_to(s.seed);
}

int64_t Loader::windows_in(int64_t num_tokens, int64_t seq_len, bool pairs) {
  return (num_tokens >= 1 ? (num_tokens - 1) / seq_len : 0) / (pairs ? 2 : 1);
}

int64_t Loader::batches_in(int64_t num_tokens, const LoaderOptions& options,
                           const std::string& what) {
  const int64_t B = options.batch_size, T = options.seq_len;
  FG_CHECK(B >= 1, "[data {}] batch_size {} is less than 1", what, B);
  FG_CHECK(T >= 1, "[data {}] seq_len {} is less than 1", what, T);
  FG_CHECK(options.num_workers >= 0, "[data {}] num_workers {} is negative", what,
           options.num_workers);
  FG_CHECK(options.num_workers == 0 || options.prefetch >= 1,
           "[data {}] prefetch {} is less than 1 with {} workers", what, options.prefetch,
           options.num_workers);
  FG_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
           "[data {}] rank {} of world size {}", what, options.rank, options.world_size);
  const int64_t windows = windows_in(num_tokens, T, options.pairs);
  const int64_t global = B * options.world_size;  // Note [Data-parallel shards]
  FG_CHECK(windows >= global,
           "[data {}] {} tokens give {} windows of seq_len {} + 1, fewer than batch_size {}{}",
           what, num_tokens, windows, T, B,
           options.world_size > 1 ? fmt::format(" x {} ranks", options.world_size) : "");
  return windows / global;
}

Loader::Loader(std::span<const int32_t> tokens, const LoaderOptions& options, std::string what,
               std::span<const uint8_t> trained, std::span<const int32_t> positions,
               std::span<const int32_t> lengths)
    : tokens_(tokens),
      trained_(trained),
      positions_(positions),
      lengths_(lengths),
      options_(options),
      what_(std::move(what)) {
  FG_CHECK(trained_.empty() || trained_.size() == tokens_.size(),
           "[data {}] {} trained flags for {} tokens", what_, trained_.size(), tokens_.size());
  FG_CHECK(positions_.empty() || positions_.size() == tokens_.size(),
           "[data {}] {} positions for {} tokens", what_, positions_.size(), tokens_.size());
  batches_per_epoch_ = batches_in(int64_t(tokens_.size()), options_, what_);
  num_windows_ = windows_in(int64_t(tokens_.size()), options_.seq_len, options_.pairs);
  FG_CHECK(!options_.pairs || positions_.empty(),
           "[data {}] preference pairs are rows of one example each, not packed rows", what_);
  const int64_t per_window = options_.pairs ? 2 : 1;
  FG_CHECK(lengths_.empty() || int64_t(lengths_.size()) == num_windows_ * per_window,
           "[data {}] {} lengths for {} windows", what_, lengths_.size(),
           num_windows_ * per_window);
  FG_CHECK(lengths_.empty() || positions_.empty(),
           "[data {}] packed rows have no length of their own to group by", what_);
  FG_CHECK(!options_.group_by_length || !lengths_.empty(),
           "[data {}] group_by_length needs each window's length", what_);
  FG_CHECK(!options_.pack_pairs || (options_.pairs && !lengths_.empty()),
           "[data {}] packing pairs needs pairs and each answer's length", what_);
  for (const int32_t n : lengths_)
    FG_CHECK(n >= 1 && n <= options_.seq_len, "[data {}] a window's length {} is not in [1, {}]",
             what_, n, options_.seq_len);
  window_lengths_ = lengths_;
  if (options_.pairs && !lengths_.empty()) {
    for (size_t i = 0; i + 1 < lengths_.size(); i += 2)
      pair_lengths_.push_back(std::max(lengths_[i], lengths_[i + 1]));
    window_lengths_ = pair_lengths_;
  }
  // Fails here, not in a worker, when the device's backend is missing.
  allocator_for(options_.device);
  pinned_ = options_.pin_memory && options_.device.type == DeviceType::cuda;
  if (pinned_) pinned_allocator();
  label_ = intern_label("data." + what_);
  start_workers();
}

Loader::~Loader() { stop_workers(); }

// Note [Trained targets]
// Instruction data (data/sft_stream.h) comes with a flag per token: whether the loss learns
// it. A window's target t is token t + 1 of the window, so its flag decides: an unflagged
// token becomes kIgnoredTarget (-100), which the cross-entropy skips, as transformers' labels
// do. Each example fills its own window, its first token unflagged, so that the last
// position of one window, whose target is the next window's first token, is never trained.
// The batch counts its trained targets for the step's weights (Note [Loss over trained
// targets] in train/train_step.cpp).
Batch Loader::build(int64_t position, OrderCache& cache) const {
  const int64_t B = options_.batch_size, S = options_.seq_len;
  Batch batch;
  batch.epoch = position / batches_per_epoch_;
  batch.index = position % batches_per_epoch_;
  if (cache.epoch != batch.epoch) {
    cache.order = epoch_order(batch.epoch);
    cache.epoch = batch.epoch;
  }
  const int64_t first = (batch.index * options_.world_size + options_.rank) * B;
  if (options_.pack_pairs) {
    pack_pairs(batch, cache.order, first);
    return batch;
  }
  const int64_t T = row_length(cache.order, first);
  // Note [Preference batches]: a pair's two rows, the chosen answers' rows first.
  const int64_t per_window = options_.pairs ? 2 : 1, R = B * per_window;
  const MemoryContextScope scope({Category::data, label_});
  batch.ids = Tensor::empty({R, T}, DType::i64, Device::cpu(), pinned_);
  batch.targets = Tensor::empty({R, T}, DType::i64, Device::cpu(), pinned_);
  int64_t* ids = batch.ids.data<int64_t>();          // (R, T)
  int64_t* targets = batch.targets.data<int64_t>();  // (R, T)
  for (int64_t row = 0; row < R; ++row) {
    const int64_t b = row % B, half = row / B;
    const int64_t start = (cache.order[size_t(first + b)] * per_window + half) * S;
    const int32_t* src = tokens_.data() + start;  // T + 1 tokens
    for (int64_t t = 0; t < T; ++t) {
      ids[row * T + t] = src[t];
      targets[row * T + t] = src[t + 1];
    }
    if (trained_.empty()) continue;
    const uint8_t* learn = trained_.data() + start;  // Note [Trained targets]
    for (int64_t t = 0; t < T; ++t)
      if (!learn[t + 1]) targets[row * T + t] = kIgnoredTarget;
  }
  const auto trained = [](int64_t x) { return x != kIgnoredTarget; };
  batch.trained_targets = std::count_if(targets, targets + R * T, trained);
  if (options_.pairs)
    for (int64_t row = 0; row < R; ++row) {
      batch.row_targets.push_back(
          std::count_if(targets + row * T, targets + (row + 1) * T, trained));
      batch.rows.push_back(answer_row(cache.order, first, row));
      batch.spans.push_back({row, 0, T});
    }
  if (!positions_.empty()) pack_rows(batch, cache, B, T);
  return batch;
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order = window_order(num_windows_, options_.order, options_.seed, epoch);
  if (lengths_.empty() || !options_.group_by_length) return order;
  return length_grouped_order(std::move(order), window_lengths_,
                              options_.batch_size * options_.world_size);
}

int64_t Loader::row_length(const std::vector<int64_t>& order, int64_t first) const {
  if (lengths_.empty()) return options_.seq_len;
  int64_t T = 1;
  for (int64_t b = 0; b < options_.batch_size; ++b)
    T = std::max<int64_t>(T, window_lengths_[size_t(order[size_t(first + b)])]);
  return T;
}

// Note [Packed pairs]
// With pack_pairs a batch holds the same B pairs as without, in the same order and shards, so
// each micro-batch's loss is still the mean over its B pairs; only the padding goes. Its 2B
// answers, each cut to seq_len as a row of its own would be, are packed best fit decreasing
// (Note [Best-fit-decreasing bins] in sft_stream.cpp) into rows of seq_len, and the batch is
// cut to its fullest row: (R, T) with R <= 2B and T <= seq_len. Inside a row each answer is an
// example of its own (Note [Packed batches]): its positions restart at 0, it attends to itself
// only, and its last target (the next answer's first token, or padding) is ignored, so its
// summed log-probability is the one it has alone. The rest of a row is padding, one more
// example without targets. Batch::spans names each answer's row and positions. As TRL's
// padding_free, which puts a batch's sequences in one row, but in rows of seq_len.
Loader::PairRows Loader::pair_rows(const std::vector<int64_t>& order, int64_t first) const {
  const int64_t B = options_.batch_size;
  std::vector<int64_t> sizes(size_t(2 * B));
  for (int64_t a = 0; a < 2 * B; ++a)
    sizes[size_t(a)] = lengths_[size_t(answer_row(order, first, a))];
  PairRows p{bfd_bins(sizes, options_.seq_len), 0};
  for (const std::vector<size_t>& bin : p.bins) {
    int64_t used = 0;
    for (const size_t a : bin) used += sizes[a];
    p.length = std::max(p.length, used);
  }
  return p;
}

void Loader::pack_pairs(Batch& batch, const std::vector<int64_t>& order, int64_t first) const {
  const int64_t B = options_.batch_size, S = options_.seq_len;
  const PairRows p = pair_rows(order, first);
  const auto R = int64_t(p.bins.size());
  const int64_t T = p.length;
  const MemoryContextScope scope({Category::data, label_});
  batch.ids = Tensor::empty({R, T}, DType::i64, Device::cpu(), pinned_);
  batch.targets = Tensor::empty({R, T}, DType::i64, Device::cpu(), pinned_);
  batch.positions = Tensor::empty({R, T}, DType::i32, Device::cpu(), pinned_);
  batch.segments = Tensor::empty({2, R, T}, DType::i32, Device::cpu(), pinned_);
  int64_t* ids = batch.ids.data<int64_t>();          // (R, T)
  int64_t* targets = batch.targets.data<int64_t>();  // (R, T)
  int32_t* pos = batch.positions.data<int32_t>();    // (R, T)
  int32_t* begin = batch.segments.data<int32_t>();   // (R, T)
  int32_t* end = begin + R * T;                      // (R, T)
  batch.row_targets.assign(size_t(2 * B), 0);
  batch.rows.assign(size_t(2 * B), 0);
  batch.spans.assign(size_t(2 * B), {});
  const int32_t pad = tokens_.back();  // the stream ends with its padding token
  // Puts n positions of one example at [at, at + n) of row r: ids and targets from the stream
  // at `start` (none for padding), positions from 0.
  const auto put = [&](int64_t r, int64_t at, int64_t n, const int64_t* start) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = r * T + at + i;
      ids[k] = start ? tokens_[size_t(*start + i)] : pad;
      const bool trained =
          start && (trained_.empty() || trained_[size_t(*start + i + 1)] != 0) && i + 1 < n;
      targets[k] = trained ? tokens_[size_t(*start + i + 1)] : kIgnoredTarget;
      pos[k] = int32_t(i);
      begin[k] = int32_t(at);
      end[k] = int32_t(at + n);
    }
    batch.longest_example = std::max(batch.longest_example, n);
  };
  for (int64_t r = 0; r < R; ++r) {
    int64_t at = 0;
    for (const size_t a : p.bins[size_t(r)]) {
      const int64_t row = answer_row(order, first, int64_t(a));
      const int64_t n = lengths_[size_t(row)], start = row * S;
      put(r, at, n, &start);
      batch.rows[a] = row;
      batch.spans[a] = {r, at, at + n};
      batch.row_targets[a] = std::count_if(targets + r * T + at, targets + r * T + at + n,
                                           [](int64_t x) { return x != kIgnoredTarget; });
      batch.trained_targets += batch.row_targets[a];
      at += n;
    }
    if (at < T) put(r, at, T - at, nullptr);
  }
}

int64_t Loader::epoch_positions(int64_t epoch) const {
  const std::vector<int64_t> order = epoch_order(epoch);
  const int64_t B = options_.batch_size, rows = B * (options_.pairs ? 2 : 1);
  int64_t positions = 0;
  for (int64_t i = 0; i < batches_per_epoch_; ++i) {
    const int64_t first = (i * options_.world_size + options_.rank) * B;
    if (options_.pack_pairs) {
      const PairRows p = pair_rows(order, first);
      positions += int64_t(p.bins.size()) * p.length;
    } else {
      positions += rows * row_length(order, first);
    }
  }
  return positions;
}

// Note [Packed batches]
// A packed row's examples are told apart by their positions: an example starts where the
// position is 0 (its first token, or a window's first token) and ends where the next starts.
// The batch carries the positions (RoPE, GPT-2's position embedding) and, per token, its
// example's [begin, end) within the row (the attention's segments, Note [Packed rows]), both
// built here beside the ids and moved to the device with them.
void Loader::pack_rows(Batch& batch, const OrderCache& cache, int64_t B, int64_t T) const {
  batch.positions = Tensor::empty({B, T}, DType::i32, Device::cpu(), pinned_);
  batch.segments = Tensor::empty({2, B, T}, DType::i32, Device::cpu(), pinned_);
  int32_t* pos = batch.positions.data<int32_t>();   // (B, T)
  int32_t* begin = batch.segments.data<int32_t>();  // (B, T)
  int32_t* end = begin + B * T;                     // (B, T)
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = (batch.index * options_.world_size + options_.rank) * B;
    const int32_t* src = positions_.data() + cache.order[size_t(first + b)] * T;
    for (int64_t t = 0; t < T; ++t) {
      FG_CHECK(src[t] >= 0 && src[t] <= t && (t == 0 || src[t] == 0 || src[t] == src[t - 1] + 1),
               "[data {}] position {} at token {} of a packed row breaks its example", what_,
               src[t], t);
      pos[b * T + t] = src[t];
      begin[b * T + t] = int32_t(t) - pos[b * T + t];
    }
    for (int64_t t = T - 1, e = T; t >= 0; --t) {
      end[b * T + t] = int32_t(e);
      if (pos[b * T + t] == 0) e = t;
    }
    for (int64_t t = 0; t < T; ++t)
      batch.longest_example = std::max<int64_t>(batch.longest_example, pos[b * T + t] + 1);
  }
}

void Loader::work(int worker, int64_t first) {
  OrderCache cache;
  const auto stride = int64_t(options_.num_workers);
  for (int64_t position = first;; position += stride) {
    {
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] {
        return stop_ || int64_t(queues_[size_t(worker)].size()) < options_.prefetch;
      });
      if (stop_) return;
    }
    Slot slot;
    try {
      slot.batch = build(position, cache);
    } catch (...) {
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      queues_[size_t(worker)].push_back(std::move(slot));
    }
    ready_.notify_all();
    if (failed) return;
  }
}

void Loader::start_workers() {
  const int W = options_.num_workers;
  stop_ = false;
  start_ = position_;
  queues_.assign(size_t(W), {});
  for (int k = 0; k < W; ++k) workers_.emplace_back(&Loader::work, this, k, position_ + k);
}

void Loader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  queues_.clear();
}

Batch Loader::next() {
  if (error_) std::rethrow_exception(error_);
  Batch batch;
  if (options_.num_workers == 0) {
    batch = build(position_, order_);
  } else {
    const auto k = size_t((position_ - start_) % options_.num_workers);
    Slot slot;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return !queues_[k].empty(); });
      slot = std::move(queues_[k].front());
      queues_[k].pop_front();
    }
    space_.notify_all();
    if (slot.error) {
      error_ = slot.error;
      std::rethrow_exception(error_);
    }
    batch = std::move(slot.batch);
  }
  ++position_;
  if (options_.device != Device::cpu()) {
    const MemoryContextScope scope({Category::data, label_});
    batch.ids = batch.ids.to(options_.device);
    batch.targets = batch.targets.to(options_.device);
    if (batch.positions.defined()) {
      batch.positions = batch.positions.to(options_.device);
      batch.segments = batch.segments.to(options_.device);
    }
  }
  return batch;
}

LoaderState Loader::state() const {
  return {position_ / batches_per_epoch_, position_ % batches_per_epoch_, options_.seed};
}

void Loader::restore(const LoaderState& s) {
  FG_CHECK(s.seed == options_.seed, "[data {}] the state was saved with seed {}, not {}", what_,
           s.seed, options_.seed);
  FG_CHECK(s.epoch >= 0 && s.index >= 0 && s.index < batches_per_epoch_,
           "[data {}] state epoch {} index {} is not a batch position ({} batches an epoch)", what_,
           s.epoch, s.index, batches_per_epoch_);
  stop_workers();
  position_ = s.epoch * batches_per_epoch_ + s.index;
  error_ = nullptr;
  start_workers();
}

}  // namespace fitgrad::data
