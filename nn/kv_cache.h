// The key/value cache of generation: for every layer, the keys and values (after RoPE for
// the llama family) of all positions seen so far, so that decoding one more token costs
// one position's projections and one row of attention instead of a forward over the whole
// sequence (CausalLM::forward_cached in decoder.h). Inference only: nothing here records
// on the autograd tape.
//
// Note [KV cache layout and memory]
// Each layer owns two buffers (B, Hkv, capacity, D), allocated once when the cache is
// built, so decoding never allocates cache memory and an over-long generation fails up
// front with a clear error instead of growing. They are allocated under Category::other
// (the ledger's activation category means "saved for backward", which the cache is not)
// with the labels "kv_cache.layers.{i}.k" and ".v", so memory reports show them apart.
// update() writes the new positions of one layer and returns views of positions
// [0, length + T_new); the attention op copies them to contiguous inputs itself. All
// layers write at the same positions; CausalLM::forward_cached then calls advance().
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nn/config.h"
#include "tensor/tensor.h"

namespace fitgrad::nn {

class KvCache {
 public:
  // Buffers for `batch` sequences of up to `capacity` positions, one pair per layer of cfg,
  // in `dtype` (the model's activation dtype) on `device`.
  KvCache(const ModelConfig& cfg, int64_t batch, int64_t capacity, Device device = Device::cpu(),
          DType dtype = DType::f32);

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  // Positions cached so far (the position of the next token).
  int64_t length() const { return length_; }
  int64_t num_layers() const { return int64_t(keys_.size()); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

  // Throws "[kv_cache] ..." unless t_new more positions fit.
  void check_room(int64_t t_new) const;
  // Writes k and v (B, Hkv, T_new, D) of `layer` at positions [length, length + T_new)
  // and returns that layer's keys and values of positions [0, length + T_new), each
  // (B, Hkv, length + T_new, D).
  std::pair<Tensor, Tensor> update(int64_t layer, const Tensor& k, const Tensor& v);
  // Moves length on by t_new once every layer has written them.
  void advance(int64_t t_new);
  // Forgets every position (the buffers are kept).
  void clear() { length_ = 0; }

 private:
  int64_t batch_, capacity_, kv_heads_, head_dim_;
  Device device_;
  DType dtype_;
  int64_t length_ = 0;
  std::vector<Tensor> keys_, values_;  // per layer, (B, Hkv, capacity, D)
};

}  // namespace fitgrad::nn
