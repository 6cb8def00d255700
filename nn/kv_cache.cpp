// KvCache (kv_cache.h).
#include "nn/kv_cache.h"

#include <string>

#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::nn {

KvCache::KvCache(const ModelConfig& cfg, int64_t batch, int64_t capacity, Device device,
                 DType dtype)
    : batch_(batch),
      capacity_(capacity),
      kv_heads_(cfg.num_kv_heads),
      head_dim_(cfg.resolved_head_dim()),
      device_(device),
      dtype_(dtype) {
  FG_CHECK(batch > 0, "[kv_cache] batch must be positive, got {}", batch);
  FG_CHECK(capacity > 0, "[kv_cache] capacity must be positive, got {}", capacity);
  FG_CHECK(capacity <= cfg.max_position_embeddings,
           "[kv_cache] capacity {} exceeds the model's max_position_embeddings = {}", capacity,
           cfg.max_position_embeddings);
  // Note [KV cache layout and memory].
  CategoryScope category(Category::other);
  LabelScope label("kv_cache");
  const Shape shape{batch, kv_heads_, capacity, head_dim_};
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    LabelScope layer("layers." + std::to_string(i));
    {
      LabelScope k("k");
      keys_.push_back(Tensor::empty(shape, dtype, device));
    }
    LabelScope v("v");
    values_.push_back(Tensor::empty(shape, dtype, device));
  }
}

void KvCache::check_room(int64_t t_new) const {
  FG_CHECK(t_new > 0, "[kv_cache] need at least one new position, got {}", t_new);
  FG_CHECK(length_ + t_new <= capacity_,
           "[kv_cache] {} new positions after {} cached exceed the cache's capacity of {} "
           "positions",
           t_new, length_, capacity_);
}

std::pair<Tensor, Tensor> KvCache::update(int64_t layer, const Tensor& k, const Tensor& v) {
  FG_ASSERT(layer >= 0 && layer < num_layers());
  const int64_t t_new = k.size(2);
  check_room(t_new);
  const Shape expected{batch_, kv_heads_, t_new, head_dim_};
  FG_CHECK(k.shape() == expected && v.shape() == expected,
           "[kv_cache] layer {}: keys and values must be (B={}, Hkv={}, T, D={}), got {} and {}",
           layer, batch_, kv_heads_, head_dim_, shape_str(k.shape()), shape_str(v.shape()));
  keys_[size_t(layer)].narrow(2, length_, t_new).copy_(k);
  values_[size_t(layer)].narrow(2, length_, t_new).copy_(v);
  const int64_t s = length_ + t_new;
  return {keys_[size_t(layer)].narrow(2, 0, s), values_[size_t(layer)].narrow(2, 0, s)};
}

void KvCache::advance(int64_t t_new) {
  check_room(t_new);
  length_ += t_new;
}

}  // namespace fitgrad::nn
