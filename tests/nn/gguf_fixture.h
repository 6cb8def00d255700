// A minimal GGUF v3 writer for tests (string, u32 and f32 metadata, F32 tensors), and a
// model's parameters as llama.cpp's converter stores them, so loaders and converters of
// GGUF models are tested on files of known content.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nn/decoder.h"
#include "nn/llama_names.h"

namespace fitgrad::testing {

using nn::CausalLM;
using nn::ModelConfig;

struct Kv {
  uint32_t type;               // 4 u32, 6 f32, 8 string
  std::vector<uint8_t> value;  // encoded
};

template <class T>
inline void put(std::vector<uint8_t>& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}
inline void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
inline Kv kv_u32(uint32_t v) {
  Kv k{4, {}};
  put(k.value, v);
  return k;
}
inline Kv kv_f32(float v) {
  Kv k{6, {}};
  put(k.value, v);
  return k;
}
inline Kv kv_str(const std::string& v) {
  Kv k{8, {}};
  put_str(k.value, v);
  return k;
}

struct GgufSpec {
  std::map<std::string, Kv> kvs;
  std::map<std::string, Tensor> tensors;  // llama.cpp name -> f32 tensor (row-major)
};

inline std::string write_gguf(const std::string& name, const GgufSpec& spec) {
  constexpr uint64_t kAlign = 32;
  std::vector<uint8_t> b;
  put<uint32_t>(b, 0x46554747);  // "GGUF"
  put<uint32_t>(b, 3);
  put<uint64_t>(b, spec.tensors.size());
  put<uint64_t>(b, spec.kvs.size());
  for (const auto& [key, kv] : spec.kvs) {
    put_str(b, key);
    put<uint32_t>(b, kv.type);
    b.insert(b.end(), kv.value.begin(), kv.value.end());
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& [tname, t] : spec.tensors) {
    put_str(b, tname);
    put<uint32_t>(b, uint32_t(t.dim()));
    for (int64_t d = t.dim() - 1; d >= 0; --d) put<uint64_t>(b, uint64_t(t.size(d)));  // ne
    put<uint32_t>(b, 0);                                                               // F32
    put<uint64_t>(b, offset);
    offsets.push_back(offset);
    offset = (offset + uint64_t(t.numel()) * 4 + kAlign - 1) / kAlign * kAlign;
  }
  const size_t data_start = (b.size() + kAlign - 1) / kAlign * kAlign;
  b.resize(data_start + offset, 0);
  size_t i = 0;
  for (const auto& [tname, t] : spec.tensors) {
    const std::vector<float> v = t.to_vector<float>();
    std::memcpy(b.data() + data_start + offsets[i++], v.data(), v.size() * 4);
  }
  const std::string path = ::testing::TempDir() + "fitgrad_gguf_model_" +
                           std::to_string(::getpid()) + "_" + name + ".gguf";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return path;
}

// The parameters of `model` as llama.cpp's converter stores them: llama.* metadata, blk.N.*
// names, q/k rows permuted for interleaved RoPE, F32 data.
inline GgufSpec as_llama_cpp(const CausalLM& model) {
  const ModelConfig& cfg = model.config();
  GgufSpec s;
  s.kvs["general.architecture"] = kv_str("llama");
  s.kvs["general.name"] = kv_str("tiny");
  s.kvs["llama.context_length"] = kv_u32(uint32_t(cfg.max_position_embeddings));
  s.kvs["llama.embedding_length"] = kv_u32(uint32_t(cfg.hidden_size));
  s.kvs["llama.feed_forward_length"] = kv_u32(uint32_t(cfg.intermediate_size));
  s.kvs["llama.block_count"] = kv_u32(uint32_t(cfg.num_layers));
  s.kvs["llama.attention.head_count"] = kv_u32(uint32_t(cfg.num_heads));
  s.kvs["llama.attention.head_count_kv"] = kv_u32(uint32_t(cfg.num_kv_heads));
  s.kvs["llama.attention.layer_norm_rms_epsilon"] = kv_f32(float(cfg.norm_eps));
  s.kvs["llama.rope.freq_base"] = kv_f32(float(cfg.rope_theta));
  s.kvs["llama.rope.dimension_count"] = kv_u32(uint32_t(cfg.resolved_head_dim()));
  for (const auto& [hf, w] : model.named_parameters()) {
    Tensor t = w;
    if (hf.find(".q_proj.") != std::string::npos) t = nn::permute_qk(w, cfg.num_heads);
    if (hf.find(".k_proj.") != std::string::npos) t = nn::permute_qk(w, cfg.num_kv_heads);
    s.tensors[*nn::hf_to_llama_cpp_name(hf)] = t.contiguous();
  }
  return s;
}

}  // namespace fitgrad::testing
