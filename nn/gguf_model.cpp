// config_from_gguf and load_gguf_model: see Note [GGUF model config] in gguf_model.h.
#include "nn/gguf_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/llama_names.h"
#include "nn/peft_load.h"
#include "tensor/error.h"

namespace fitgrad::nn {
namespace {

// Note [Llama 3 scaling from rope_freqs]
// llama.cpp's converter writes Llama 3.1/3.2's rope_scaling as rope_freqs.weight: one factor r_i
// per pair, the base frequency b_i divided by r_i at run time; from transformers' llama3
// formula (Note [RoPE frequencies] in tensor/rope_params.h) r_i is 1 for the high
// frequencies, `factor` for the low ones, and 1 / ((1 - s_i) / factor + s_i) between, where
// s_i = (L / w_i - lo) / (hi - lo) is linear in 1 / w_i (w_i = 2 pi / b_i). The parameters
// are read back: factor is the largest r_i; the pairs between give s_i, and a line through
// them gives lo / (hi - lo) and L / (hi - lo) (only those ratios matter, so lo is taken as 1).
// With one pair between, hi = 4 lo (Meta's published ratio) fixes the line; with none, the
// thresholds are put midway between the classes. The result must reproduce every factor to
// within f32 rounding, else the file's factors are not Llama 3's and it is refused.
RopeScaling llama3_from_factors(const std::vector<double>& r, int64_t d, double theta,
                                const std::string& where) {
  constexpr double kTwoPi = 6.283185307179586;
  const double factor = *std::max_element(r.begin(), r.end());
  RopeScaling s{RopeScaling::Type::llama3, factor, 1.0, 4.0, 8192.0};
  if (factor <= 1.0 + 1e-6) return {};       // every factor 1: no scaling
  std::vector<double> u, smooth;             // 1 / w_i and s_i of the pairs between
  double max_high_w = 0, min_low_w = 1e300;  // the classes' wavelengths
  for (size_t i = 0; i < r.size(); ++i) {
    const double w = kTwoPi / std::pow(theta, -double(2 * i) / double(d));
    if (std::fabs(r[i] - 1.0) <= 1e-6) {
      max_high_w = std::max(max_high_w, w);
    } else if (std::fabs(r[i] - factor) <= 1e-6 * factor) {
      min_low_w = std::min(min_low_w, w);
    } else {
      u.push_back(1.0 / w);
      smooth.push_back((1.0 / r[i] - 1.0 / factor) / (1.0 - 1.0 / factor));
    }
  }
  if (u.size() >= 2) {  // least squares line s = a u + c
    double su = 0, ss = 0, suu = 0, sus = 0;
    const double n = double(u.size());
    for (size_t k = 0; k < u.size(); ++k) {
      su += u[k];
      ss += smooth[k];
      suu += u[k] * u[k];
      sus += u[k] * smooth[k];
    }
    const double a = (n * sus - su * ss) / (n * suu - su * su), c = (ss - a * su) / n;
    FG_CHECK(c < 0 && a > 0,
             "{} rope_freqs.weight: the factors between 1 and {} are not Llama "
             "3's smooth interpolation",
             where, factor);
    s.high_freq_factor = 1.0 - 1.0 / c;  // lo = 1: hi - lo = -1 / c
    s.original_max_position = -a / c;    // L = a (hi - lo)
  } else if (u.size() == 1) {            // hi = 4: s = (L u - 1) / 3
    s.original_max_position = (3.0 * smooth[0] + 1.0) / u[0];
  } else {  // thresholds midway (geometrically) between the classes
    FG_CHECK(min_low_w > 4.0 * max_high_w,
             "{} rope_freqs.weight: no Llama 3 thresholds separate "
             "its factors",
             where);
    s.original_max_position = std::sqrt(4.0 * max_high_w * min_low_w);
  }
  const RopeParams fitted(theta, s);
  for (size_t i = 0; i < r.size(); ++i) {
    const double base = std::pow(theta, -double(2 * i) / double(d));
    const double want = base / r[i], got = rope_frequency(int64_t(i), d, fitted);
    FG_CHECK(std::fabs(got - want) <= 1e-5 * want,
             "{} rope_freqs.weight: factor {} of pair {} is not Llama 3's scaling (factor {}, "
             "original context {}, high_freq_factor {} read back from the others)",
             where, r[i], i, factor, s.original_max_position, s.high_freq_factor);
  }
  return s;
}

// general.architecture -> the model_type of the Hugging Face config it converts.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kModelTypes = {{
    {"llama", "llama"},
    {"qwen2", "qwen2"},
    {"qwen3", "qwen3"},
    {"gemma2", "gemma2"},
    {"gemma3", "gemma3_text"},
    {"phi3", "phi3"},
}};

// Note [GGUF architectures]
// What llama.cpp's converter writes for each architecture beyond the Llama keys, and what
// llama.cpp assumes where it writes nothing (its loader and graphs), read back into the
// Hugging Face config the file came from:
//   - qwen3: attn_q_norm / attn_k_norm, per-head RMSNorm before RoPE (qk_norm).
//   - gemma2: Gemma blocks (Note [Gemma blocks] in decoder.cpp) whose norms the file holds as
//     1 + w (llama_gguf_source shifts them back); attn_logit_softcapping and
//     final_logit_softcapping (llama.cpp's defaults 50 and 30 when absent); every even layer
//     slides within attention.sliding_window (4096 when absent). The attention scale is
//     llama.cpp's: 1 / sqrt(head_dim), or 1 / sqrt(hidden / heads) for the 27B shape (46
//     layers for gemma2, 62 for gemma3), which is query_pre_attn_scalar in the configs
//     Google published.
//   - gemma3: also q/k norms (stored as 1 + w too); final_logit_softcapping when written;
//     with attention.sliding_window, every layer but each attention.sliding_window_pattern-th
//     (6 when absent) slides, with rope.freq_base_swa (10000 when absent) and no RoPE
//     scaling; the global layers take rope.freq_base and rope.scaling.
//   - phi3: the fused attn_qkv and ffn_up (Note [Architectures' names] in llama_names.cpp);
//     longrope as rope_factors_long.weight and rope_factors_short.weight, one divisor per
//     pair, with rope.scaling.attn_factor and rope.scaling.original_context_length (the long
//     list serves sequences past the latter); attention.sliding_window (0: none). llama.cpp
//     itself ignores Phi-3's window; fitgrad keeps it, as the model the file converts has it.
void read_architecture(const io::GgufFile& file, const std::string& arch, ModelConfig& m,
                       const std::string& where) {
  const io::GgufMetadata& meta = file.metadata();
  auto key = [&](const char* k) { return arch + "." + k; };
  auto f32_or = [&](const char* k, double fallback) {
    return meta.has(key(k)) ? double(meta.get_f32(key(k))) : fallback;
  };
  auto u64_or = [&](const char* k, int64_t fallback) {
    return meta.has(key(k)) ? int64_t(meta.get_u64(key(k))) : fallback;
  };
  FG_CHECK(m.num_heads > 0, "{} {} is 0", where, key("attention.head_count"));
  if (arch == "qwen3") m.qk_norm = true;
  if (arch == "gemma2" || arch == "gemma3") {
    m.gemma = true;
    m.query_pre_attn_scalar = llama_cpp_gemma_query_scalar(m, arch == "gemma2");
  }
  if (arch == "gemma2") {
    m.attn_logit_softcapping = f32_or("attn_logit_softcapping", 50.0);
    m.final_logit_softcapping = f32_or("final_logit_softcapping", 30.0);
    m.sliding_window = u64_or("attention.sliding_window", 4096);
    m.sliding_window_pattern = 2;
  }
  if (arch == "gemma3") {
    m.qk_norm = true;
    m.final_logit_softcapping = f32_or("final_logit_softcapping", 0.0);
    m.sliding_window = u64_or("attention.sliding_window", 0);
    m.sliding_window_pattern = u64_or("attention.sliding_window_pattern", 6);
    m.rope_local_theta = f32_or("rope.freq_base_swa", 10000.0);
  }
  if (arch == "phi3") {
    m.fused_projections = true;
    m.sliding_window = u64_or("attention.sliding_window", 0);
    const bool has_long = file.has_tensor("rope_factors_long.weight");
    FG_CHECK(has_long == file.has_tensor("rope_factors_short.weight"),
             "{} has one of rope_factors_long.weight and rope_factors_short.weight but not the "
             "other",
             where);
    if (has_long) {
      RopeScaling& s = m.rope_scaling;
      FG_CHECK(s.type == RopeScaling::Type::none, "{} has both {} and longrope factors", where,
               key("rope.scaling.type"));
      const int64_t pairs = m.resolved_head_dim() / 2;
      s.type = RopeScaling::Type::longrope;
      s.pairs = int32_t(pairs);
      FG_CHECK(pairs <= RopeScaling::kMaxPairs, "{} longrope over {} pairs; fitgrad holds {}",
               where, pairs, RopeScaling::kMaxPairs);
      for (const auto& [name, list] : {std::pair{"rope_factors_long.weight", s.long_factor},
                                       {"rope_factors_short.weight", s.short_factor}}) {
        const std::vector<float> v = file.tensor(name, DType::f32).to_vector<float>();
        FG_CHECK(int64_t(v.size()) == pairs, "{} {} has {} values for {} RoPE pairs", where, name,
                 v.size(), pairs);
        std::copy(v.begin(), v.end(), list);
      }
      s.original_max_position =
          double(u64_or("rope.scaling.original_context_length", m.max_position_embeddings));
      const double scale = double(m.max_position_embeddings) / s.original_max_position;
      s.attention_factor = f32_or(
          "rope.scaling.attn_factor",
          scale <= 1.0 ? 1.0
                       : std::sqrt(1.0 + std::log(scale) / std::log(s.original_max_position)));
    }
  }
}

}  // namespace

double llama_cpp_gemma_query_scalar(const ModelConfig& cfg, bool gemma2) {
  const int64_t heads = std::max<int64_t>(1, cfg.num_heads);
  if (cfg.num_layers == (gemma2 ? 46 : 62)) return double(cfg.hidden_size) / double(heads);
  return double(cfg.head_dim > 0 ? cfg.head_dim : cfg.hidden_size / heads);
}

ModelConfig config_from_gguf(const io::GgufFile& file) {
  const io::GgufMetadata& meta = file.metadata();
  const std::string where = "[gguf " + file.path() + "]";
  const std::string& arch = meta.get_string("general.architecture");
  const auto type = std::find_if(kModelTypes.begin(), kModelTypes.end(),
                                 [&](const auto& t) { return t.first == arch; });
  FG_CHECK(type != kModelTypes.end(),
           "{} general.architecture is '{}'; fitgrad reads the GGUF architectures llama, qwen2, "
           "qwen3, gemma2, gemma3 and phi3",
           where, arch);
  auto key = [&](const char* k) { return arch + "." + k; };

  ModelConfig m;
  m.name = meta.has("general.name") ? meta.get_string("general.name") : arch;
  m.model_type = type->second;  // Qwen2: q/k/v with biases, o_proj without
  m.family = Family::llama;
  m.max_position_embeddings = meta.get_u64(key("context_length"));
  m.hidden_size = meta.get_u64(key("embedding_length"));
  m.intermediate_size = meta.get_u64(key("feed_forward_length"));
  m.num_layers = meta.get_u64(key("block_count"));
  m.num_heads = meta.get_u64(key("attention.head_count"));
  m.num_kv_heads = meta.has(key("attention.head_count_kv"))
                       ? int64_t(meta.get_u64(key("attention.head_count_kv")))
                       : m.num_heads;
  m.norm_eps = meta.get_f32(key("attention.layer_norm_rms_epsilon"));
  if (meta.has(key("rope.freq_base"))) m.rope_theta = meta.get_f32(key("rope.freq_base"));
  if (meta.has(key("attention.key_length"))) {
    m.head_dim = meta.get_u64(key("attention.key_length"));
    if (meta.has(key("attention.value_length")))
      FG_CHECK(meta.get_u64(key("attention.value_length")) == uint64_t(m.head_dim),
               "{} {} = {} differs from key_length = {}", where, key("attention.value_length"),
               meta.get_u64(key("attention.value_length")), m.head_dim);
  }

  FG_CHECK(file.has_tensor("token_embd.weight"), "{} tensor 'token_embd.weight' is missing", where);
  const Shape embd = file.info("token_embd.weight").shape();
  FG_CHECK(embd.size() == 2, "{} tensor 'token_embd.weight' must be 2-d, got {} dims", where,
           embd.size());
  m.vocab_size = embd[0];
  if (meta.has(key("vocab_size")))
    FG_CHECK(int64_t(meta.get_u64(key("vocab_size"))) == m.vocab_size,
             "{} {} = {} but token_embd.weight has {} rows", where, key("vocab_size"),
             meta.get_u64(key("vocab_size")), m.vocab_size);
  if (meta.has("tokenizer.ggml.tokens")) {
    const size_t n_tokens = meta.get("tokenizer.ggml.tokens").size();
    FG_CHECK(int64_t(n_tokens) <= m.vocab_size,
             "{} tokenizer.ggml.tokens has {} tokens but token_embd.weight only {} rows", where,
             n_tokens, m.vocab_size);
  }
  m.tie_word_embeddings = !file.has_tensor("output.weight");
  m.attention_qkv_bias = file.has_tensor("blk.0.attn_q.bias");
  m.attention_out_bias = file.has_tensor("blk.0.attn_output.bias");
  m.mlp_bias = file.has_tensor("blk.0.ffn_up.bias");

  if (meta.has(key("rope.scaling.type"))) {
    const std::string& scaling = meta.get_string(key("rope.scaling.type"));
    FG_CHECK(scaling == "none" || scaling == "linear",
             "{} {} is '{}'; fitgrad implements none and linear (and Llama 3's, from "
             "rope_freqs.weight)",
             where, key("rope.scaling.type"), scaling);
    if (scaling == "linear") {
      FG_CHECK(meta.has(key("rope.scaling.factor")), "{} {} is linear but {} is missing", where,
               key("rope.scaling.type"), key("rope.scaling.factor"));
      m.rope_scaling = {RopeScaling::Type::linear, meta.get_f32(key("rope.scaling.factor"))};
    }
  }
  if (file.has_tensor("rope_freqs.weight")) {
    FG_CHECK(m.rope_scaling.type == RopeScaling::Type::none, "{} has both {} and rope_freqs.weight",
             where, key("rope.scaling.type"));
    const int64_t d =
        m.head_dim > 0 ? m.head_dim : m.hidden_size / std::max<int64_t>(1, m.num_heads);
    const Tensor factors = file.tensor("rope_freqs.weight", DType::f32);
    FG_CHECK(factors.numel() == d / 2, "{} rope_freqs.weight has {} values for {} RoPE pairs",
             where, factors.numel(), d / 2);
    m.rope_scaling = llama3_from_factors(factors.to_vector<double>(), d, m.rope_theta, where);
  }
  read_architecture(file, arch, m, where);
  FG_CHECK(!meta.has(key("expert_count")) || meta.get_u64(key("expert_count")) == 0,
           "{} {} = {}: mixture-of-experts models are not supported", where, key("expert_count"),
           meta.has(key("expert_count")) ? meta.get_u64(key("expert_count")) : 0);

  m.validate(where);
  if (meta.has(key("rope.dimension_count")))
    FG_CHECK(int64_t(meta.get_u64(key("rope.dimension_count"))) == m.resolved_head_dim(),
             "{} {} = {} differs from head_dim = {} (partial rotary embeddings are not "
             "supported)",
             where, key("rope.dimension_count"), meta.get_u64(key("rope.dimension_count")),
             m.resolved_head_dim());
  return m;
}

std::unique_ptr<CausalLM> load_gguf_model(const io::GgufFile& file, const BuildOptions& options) {
  const ModelConfig cfg = config_from_gguf(file);
  BuildOptions build = options;
  build.initialize = false;
  std::unique_ptr<CausalLM> model = build_model(cfg, build);
  // One tensor decoded at a time (Note [Streaming loads]); plain Module::load unless the
  // build adapted or quantized layers.
  load_into_adapted(*model, llama_gguf_source(file, options.dtype));
  return model;
}

std::unique_ptr<CausalLM> load_gguf_model(const std::string& path, const BuildOptions& options) {
  return load_gguf_model(io::GgufFile::open(path), options);
}

}  // namespace fitgrad::nn
