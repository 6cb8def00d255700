// The data loader: (B, T) batches of token ids and next-token targets from a token stream
// (a TokenDataset's train() or val(), or any span of ids), in a reproducible order that
// survives a restart.
//
// Windows. The stream is cut into windows of seq_len + 1 tokens that start every seq_len
// tokens (0, T, 2T, ...), so consecutive windows share one token and every token but the
// first is a target exactly once; a tail too short for a whole window is dropped. With
// n tokens there are floor((n - 1) / T) windows. A window gives one row: ids are its first
// T tokens, targets its last T.
//
// Order. Epoch e visits the windows in window_order(num_windows, order, seed, e)
// (data/window_order.h): a fresh Philox permutation per epoch, or the identity. Batch i of
// an epoch is the windows at positions [i*B, (i+1)*B) of that order; the windows left
// over after the last whole batch are dropped for that epoch (a random order drops
// different ones each epoch). Epochs roll over by themselves. The batches depend only on
// (tokens, batch_size, seq_len, seed, order, rank, world_size, lengths, group_by_length): never
// on num_workers
// or on timing.
//
// Lengths. When each window holds one example padded after it and the loader is given each
// window's length, each batch is cut to its longest window, (B, T_b) with T_b = max length
// <= seq_len, as transformers' collators pad to the batch's longest: the columns cut hold
// padding only, whose targets are ignored. With group_by_length the epoch's order is also
// regrouped so that a global batch's windows have similar lengths (Note [Batches grouped by
// length] in data/window_order.h).
//
// Note [Data-parallel shards]
// With world_size N > 1 (data parallelism, dist/ddp.h) the loader of rank r gives rank r's
// part of a global batch of N·B windows: batch i of an epoch is the windows at positions
// [i*N*B + r*B, i*N*B + (r+1)*B) of the epoch's order, which is the same on every rank (the
// same seed). The ranks' batches are therefore disjoint, their union is batch i of one
// process with batch N·B, and an epoch has floor(windows / (N·B)) batches on every rank.
//
// Workers (Note [Loader workers] in loader.cpp). With num_workers = 0, next() builds the
// batch on the calling thread. With W > 0 workers, worker k builds batches k, k + W,
// k + 2W, ... (counting from the position of the last restore) into its own queue of at
// most `prefetch` batches, so at most W * prefetch batches wait ahead of next(), and
// next() takes them in order.
//
// Note [Preference batches]
// With pairs (--objective dpo, orpo; data/sft_stream.h's layout_pairs) a window is two rows of
// the stream, rows 2w and 2w + 1: a pair's chosen and rejected answers. The order, the shards
// and the lengths are the pairs' (a pair's is its longer answer's), and a batch of B pairs has
// 2B answers: the B chosen ones, then the B rejected ones in the same order, as TRL
// concatenates them. Each is a row of its own, or with pack_pairs a span of a packed row
// (Note [Packed pairs] in loader.cpp); Batch::spans names each answer's positions.
//
// Memory. Batch tensors are allocated under Category::data with the label "data.<what>",
// so the memory ledger shows them. With pin_memory and a CUDA device they are built in
// pinned host memory and next() copies them to the device; pin_memory is ignored for
// other devices. For a device other than the cpu, next() copies the batch there.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "data/window_order.h"
#include "tensor/row_span.h"
#include "tensor/tensor.h"

namespace fitgrad::data {

struct LoaderOptions {
  int64_t batch_size = 8;  // B
  int64_t seq_len = 256;   // T
  uint64_t seed = 0;
  DataOrder order = DataOrder::random;
  int num_workers = 0;  // 0: next() builds batches itself
  int prefetch = 2;     // batches each worker may hold ready; >= 1
  bool pin_memory = false;
  Device device = Device::cpu();
  int rank = 0;                  // Note [Data-parallel shards]
  int world_size = 1;            // >= 1
  bool pairs = false;            // Note [Preference batches]
  bool pack_pairs = false;       // pairs, with lengths: each batch's answers packed into rows
  bool group_by_length = false;  // with lengths: batches of similar lengths (Lengths, above)
};

// The target the cross-entropy skips (its ignore_index, Hugging Face's -100).
inline constexpr int64_t kIgnoredTarget = -100;

struct Batch {
  // T is seq_len, or the batch's longest window with lengths (Lengths, above); B is twice the
  // batch size for preference pairs (Note [Preference batches]).
  Tensor ids;      // (B, T) i64
  Tensor targets;  // (B, T) i64: ids shifted left by one token, kIgnoredTarget where untrained
  int64_t trained_targets = 0;  // targets that are not kIgnoredTarget
  // Pairs (else empty), for each answer, the B chosen ones first: its trained targets, its
  // row of the stream, and its positions in the batch (Note [Preference batches]).
  std::vector<int64_t> row_targets;
  std::vector<int64_t> rows;
  std::vector<RowSpan> spans;
  // Packed rows (Note [Packed rows] in tensor/backend/attention_mask.h), undefined otherwise:
  Tensor positions;             // (B, T) i32: each token's position in its example
  Tensor segments;              // (2, B, T) i32: each token's example [begin, end) in its row
  int64_t longest_example = 0;  // the longest example's length in the batch
  int64_t epoch = 0;
  int64_t index = 0;  // the batch's index within its epoch
};

// The position of the next batch: resuming from it gives exactly the batches an
// uninterrupted run would have given. The seed must match the loader's.
struct LoaderState {
  int64_t epoch = 0;
  int64_t index = 0;
  uint64_t seed = 0;
  bool operator==(const LoaderState&) const = default;
};
// {"epoch": e, "index": i, "seed": s}, for checkpoints.
void to_json(nlohmann::json& j, const LoaderState& s);
void from_json(const nlohmann::json& j, LoaderState& s);

class Loader {
 public:
  // `tokens` must outlive the loader. `what` names the split in errors and labels
  // ("[data train] ..."). Throws fitgrad::Error when batch_size, seq_len, num_workers or
  // prefetch is out of range, or when the tokens give fewer than batch_size windows.
  // `trained`, when given, holds one flag per token (and outlives the loader too): a token
  // whose flag is 0 is no target, its target kIgnoredTarget (Note [Trained targets]).
  // `positions`, when given, holds each token's position within its example (packed rows,
  // data/sft_stream.h; it outlives the loader too), from which batches take their positions
  // and segments. `lengths`, when given, holds each window's length (one example a window,
  // padded after it; for pairs each answer's, two a pair; it outlives the loader too): the
  // batches are cut to their longest window, and grouped by length with
  // options.group_by_length (Lengths, above).
  Loader(std::span<const int32_t> tokens, const LoaderOptions& options, std::string what = "train",
         std::span<const uint8_t> trained = {}, std::span<const int32_t> positions = {},
         std::span<const int32_t> lengths = {});
  // Stops and joins the workers, also those waiting on a full queue.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in order, waiting for a worker when it is not ready. Rethrows an error
  // a worker met while building it (and again on every later call).
  Batch next();
  LoaderState state() const;
  // Continues from `s` (from state() of a loader with the same tokens and options); throws
  // when the seed differs or the index is not within an epoch.
  void restore(const LoaderState& s);

  int64_t num_windows() const { return num_windows_; }
  // The positions (rows times their length) of this rank's batches in epoch `epoch`:
  // batches_per_epoch() x batch_size x seq_len, or less for batches cut to their longest.
  int64_t epoch_positions(int64_t epoch) const;
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // The windows in `num_tokens` tokens, floor((n - 1) / seq_len) (0 for no tokens), or
  // half as many pairs of them.
  static int64_t windows_in(int64_t num_tokens, int64_t seq_len, bool pairs = false);
  // The batches_per_epoch() of a loader over `num_tokens` tokens with these options, and the
  // constructor's checks of them (the same errors), without building one (`fitgrad train
  // --device meta` sizes its run with it).
  static int64_t batches_in(int64_t num_tokens, const LoaderOptions& options,
                            const std::string& what);
  const LoaderOptions& options() const { return options_; }

 private:
  // A built batch, or the error building it threw.
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  // The window order of one epoch, recomputed when the epoch changes.
  struct OrderCache {
    int64_t epoch = -1;
    std::vector<int64_t> order;
  };

  Batch build(int64_t position, OrderCache& cache) const;
  // The window order of an epoch (window_order, grouped by length with group_by_length).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // The row length of the batch whose first window is at `first` of `order` (Lengths).
  int64_t row_length(const std::vector<int64_t>& order, int64_t first) const;
  // Note [Packed pairs]: the answers of the batch whose first pair is at `first` of `order`,
  // as bins (rows) of answer indices, and the fullest bin's length.
  struct PairRows {
    std::vector<std::vector<size_t>> bins;
    int64_t length = 0;
  };
  PairRows pair_rows(const std::vector<int64_t>& order, int64_t first) const;
  // The stream row of answer a (of 2B, the chosen first) of that batch.
  int64_t answer_row(const std::vector<int64_t>& order, int64_t first, int64_t a) const {
    return order[size_t(first + a % options_.batch_size)] * 2 + a / options_.batch_size;
  }
  // Fills a batch of packed pairs (Note [Packed pairs]).
  void pack_pairs(Batch& batch, const std::vector<int64_t>& order, int64_t first) const;
  // The positions and segments of a packed batch (Note [Packed batches] in loader.cpp).
  void pack_rows(Batch& batch, const OrderCache& cache, int64_t B, int64_t T) const;
  void work(int worker, int64_t first);
  void start_workers();
  void stop_workers();

  std::span<const int32_t> tokens_;
  std::span<const uint8_t> trained_;         // empty: every target trained
  std::span<const int32_t> positions_;       // empty: one example a row
  std::span<const int32_t> lengths_;         // empty: every batch seq_len long, in window order
  std::vector<int32_t> pair_lengths_;        // pairs with lengths: each pair's longer answer
  std::span<const int32_t> window_lengths_;  // lengths_, or pair_lengths_ for pairs
  LoaderOptions options_;
  std::string what_;
  uint32_t label_ = 0;
  int64_t num_windows_ = 0;
  int64_t batches_per_epoch_ = 0;
  bool pinned_ = false;

  int64_t position_ = 0;  // epoch * batches_per_epoch + index of the next batch
  int64_t start_ = 0;     // the position the workers started from
  std::exception_ptr error_;
  OrderCache order_;  // for num_workers = 0

  std::mutex mutex_;
  std::condition_variable ready_;  // a queue got a batch
  std::condition_variable space_;  // a queue has room, or stop_
  bool stop_ = false;
  std::vector<std::deque<Slot>> queues_;  // one per worker, guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace fitgrad::data
