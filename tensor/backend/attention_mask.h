// Which keys each query of an attention call sees: all of them, the causal prefix, or the
// causal sliding window of Mistral and Gemma 2/3; and Gemma 2's soft cap on the scores. Plain constexpr C++ shared by the ops, the
// CPU kernels and the cuda kernels (which compute their tile ranges from it), so every
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

  constexpr AttentionMask() = default;
  // A plain bool is the causal mask or none (implicit, as the ops took a bool before).
  constexpr AttentionMask(bool causal_mask) : causal(causal_mask) {}  // NOLINT
  static constexpr AttentionMask sliding(int64_t w) {
    AttentionMask m(true);
    m.window = w;
    return m;
  }

  constexpr bool windowed() const { return causal && window > 0; }
  // Query i of t against s keys sees keys [key_begin, key_end) (empty when begin >= end).
  constexpr int64_t key_end(int64_t t, int64_t s, int64_t i) const {
    return causal ? std::clamp<int64_t>(i + s - t + 1, 0, s) : s;
  }
  constexpr int64_t key_begin(int64_t t, int64_t s, int64_t i) const {
    return windowed() ? std::clamp<int64_t>(i + s - t + 1 - window, 0, s) : 0;
  }
  // The first query that sees key j (t when none does); with a window the queries that see
  // it end at last_query(j) + 1.
  constexpr int64_t first_query(int64_t t, int64_t s, int64_t j) const {
    return causal ? std::clamp<int64_t>(j - (s - t), 0, t) : 0;
  }
  constexpr int64_t query_end(int64_t t, int64_t s, int64_t j) const {
    return windowed() ? std::clamp<int64_t>(j - (s - t) + window, 0, t) : t;
  }
};

}  // namespace fitgrad::backend
