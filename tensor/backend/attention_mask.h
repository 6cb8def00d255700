// Which keys each query of an attention call sees: all of them, the causal prefix, or the
// causal sliding window of Mistral and Gemma 2/3, each within its own example when a row
// packs several; and Gemma 2's soft cap on the scores. Plain constexpr C++ shared by the ops,
// the CPU kernels and the cuda kernels (which compute their tile ranges from it), so every
// backend masks alike.
//
// Note [Sliding-window attention]
// With t queries and s keys (bottom-right aligned, Note [Causal alignment] in
// tensor/cpu/attention_flash.cpp), query i stands at position p = i + s - t. Causal: it sees
// keys j <= p. With a window W > 0 it sees only the W newest of those, p - W < j <= p, itself
// included: transformers' eager and sdpa masks for Mistral, Qwen2 and Gemma 2/3 (masked
// where j <= p - W). (FlashAttention's window_size = (W, 0) would let one more key in.) A
// window at least the sequence's length is causal attention. The flash kernels skip the
// key tiles below a query tile's window as they skip those past its diagonal, so a long
// sequence costs O(T W), and the KV cache needs no change: decoding t new queries against s
// cached keys applies the same rule.
//
// Note [Packed rows]
// A batch row may pack several examples end to end (--packing, data/sft_stream.h). Each then
// attends to itself only: query i sees the causal keys of its own example, j in
// [begin(i), i], block-diagonal causal attention as FlashAttention's varlen kernels and
// transformers' position_ids path compute it, and within the window if there is one. The
// examples are given per token: `segments` is a (2, B, T) i32 tensor on the op's device whose
// [0][b][i] is the first position of the example holding position i of row b and [1][b][i]
// one past its last. The kernels see the row they work on through row(b, t). Since an
// example's positions are contiguous, begin(i) and end(j) never decrease along a row, so the
// tile ranges below (the keys a tile of queries sees, the queries a tile of keys is seen by)
// stay intervals, and the flash kernels skip the tiles of other examples as they skip those
// past the diagonal. Packed rows are self-attention (t = s) under the causal mask; the
// pointers borrow the tensor, which the op's caller keeps alive (nn/packed_rows.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace fitgrad::backend {

struct AttentionMask {
  bool causal = false;
  int64_t window = 0;  // with causal: keys within this many positions, 0 = no limit
  // Gemma 2's soft cap on the scaled scores of the keys a query sees, s -> cap tanh(s / cap)
  // before the softmax (Note [Soft-capped scores] in tensor/cpu/attention_flash.cpp); 0: none.
  double softcap = 0;
  // Packed rows (Note [Packed rows]): per position, its example's first position and one past
  // its last; of the whole (B, T) batch, or of one row after row(). Null: one example a row.
  const int32_t* example_begin = nullptr;
  const int32_t* example_end = nullptr;

  constexpr AttentionMask() = default;
  // A plain bool is the causal mask or none (implicit, as the ops took a bool before).
  constexpr AttentionMask(bool causal_mask) : causal(causal_mask) {}  // NOLINT
  static constexpr AttentionMask sliding(int64_t w) {
    AttentionMask m(true);
    m.window = w;
    return m;
  }

  constexpr bool windowed() const { return causal && window > 0; }
  constexpr bool packed() const { return example_begin != nullptr; }
  // The mask of row b of a batch of rows of t positions.
  constexpr AttentionMask row(int64_t b, int64_t t) const {
    AttentionMask m = *this;
    if (packed()) {
      m.example_begin += b * t;
      m.example_end += b * t;
    }
    return m;
  }
  // Query i of t against s keys sees keys [key_begin, key_end) (empty when begin >= end).
  constexpr int64_t key_end(int64_t t, int64_t s, int64_t i) const {
    return causal ? std::clamp<int64_t>(i + s - t + 1, 0, s) : s;
  }
  constexpr int64_t key_begin(int64_t t, int64_t s, int64_t i) const {
    const int64_t begin = windowed() ? std::clamp<int64_t>(i + s - t + 1 - window, 0, s) : 0;
    // A query past the last (a kernel's partial tile) reads the last query's example.
    return packed() ? std::max<int64_t>(begin, example_begin[std::clamp<int64_t>(i, 0, t - 1)])
                    : begin;
  }
  // The first query that sees key j (t when none does); the queries that see it end at
  // query_end(j), before t within a window or a packed example.
  constexpr int64_t first_query(int64_t t, int64_t s, int64_t j) const {
    return causal ? std::clamp<int64_t>(j - (s - t), 0, t) : 0;
  }
  constexpr int64_t query_end(int64_t t, int64_t s, int64_t j) const {
    const int64_t end = windowed() ? std::clamp<int64_t>(j - (s - t) + window, 0, t) : t;
    return packed() ? std::min<int64_t>(end, example_end[std::clamp<int64_t>(j, 0, s - 1)]) : end;
  }
};

}  // namespace fitgrad::backend
