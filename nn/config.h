// ModelConfig: the architecture of a decoder-only model, the named presets (issue 4) and
// the reader of a Hugging Face config.json (model_type llama, mistral, qwen2, gpt2).
//
// Two families share one struct (Note [Two decoder families]):
//   - gpt2: learned positions, LayerNorm with bias, fused c_attn in Conv1D (in, out)
//     layout, GELU (tanh) MLP, biases everywhere, tied lm_head;
//   - llama (also mistral and qwen2): RoPE, RMSNorm, q/k/v/o projections in torch (out, in)
//     layout, MHA or GQA, SwiGLU MLP, optional q/k/v(/o) biases, tied or untied lm_head.
//
// Note [Preset numbers]
// Every preset copies the published config.json of its model (hidden, intermediate,
// layers, heads, kv heads, vocab, context, norm eps, rope theta, tie flag); tests/nn check
// the parameter counts against the published totals. The two tiny presets are ours:
//   gpt2-tiny:  vocab 256 (byte-level), ctx 64, 2 layers, d 64, 4 heads (MLP 256);
//   llama-tiny: vocab 256 (byte-level), ctx 64, 2 layers, d 64, 4 heads, 2 kv heads
//               (GQA), intermediate 176, rope theta 10000, untied lm_head.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/rope_params.h"

namespace fitgrad::nn {

enum class Family { gpt2, llama };

struct ModelConfig {
  std::string name;  // preset name, or the model_type of a config.json
  // "gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2" or "gemma3_text"
  std::string model_type;
  Family family = Family::llama;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // d_model (GPT-2 n_embd)
  int64_t intermediate_size = 0;  // MLP hidden width (GPT-2 n_inner, default 4 * n_embd)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads for MHA
  int64_t head_dim = 0;      // 0: hidden_size / num_heads
  int64_t max_position_embeddings = 0;
  double norm_eps = 1e-5;  // layer_norm_epsilon (gpt2) or rms_norm_eps (llama)
  double rope_theta = 10000.0;
  // rope_scaling (or transformers 5's rope_parameters): linear or llama3 (Note [RoPE
  // frequencies] in tensor/rope_params.h); none by default.
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_qkv_bias = false;  // gpt2: true; qwen2: true; llama: attention_bias
  bool attention_out_bias = false;  // gpt2: true; llama: attention_bias
  bool mlp_bias = false;            // gpt2: true; llama: mlp_bias
  // Qwen3: each q and k head is RMS-normalized (q_norm, k_norm, weights of head_dim) before
  // RoPE, as Qwen3Attention does.
  bool qk_norm = false;
  // Phi-3: q, k and v one qkv_proj (rows q, then k, then v) and gate and up one gate_up_proj
  // (rows gate, then up), as its checkpoints hold them.
  bool fused_projections = false;
  // Mistral's sliding window: each position attends to itself and the sliding_window - 1
  // before it (Note [Sliding-window attention] in tensor/backend/attention_mask.h). 0: none.
  int64_t sliding_window = 0;
  // Which layers slide: 0 every layer (Mistral, Phi-3); p: layer i unless (i + 1) % p == 0
  // (Gemma 2: 2, the even layers; Gemma 3: 6, five local layers to one global).
  int64_t sliding_window_pattern = 0;
  // Gemma 2 and 3 (Note [Gemma blocks] in decoder.cpp): RMSNorm scales by 1 + w (weights
  // start at 0), the embeddings are multiplied by sqrt(hidden_size), the MLP is GeGLU with the
  // tanh GELU, and each block normalizes its attention's and its MLP's input and output.
  bool gemma = false;
  double query_pre_attn_scalar = 0;    // attention scale 1 / sqrt(this); 0: head_dim
  double attn_logit_softcapping = 0;   // scores -> cap tanh(scores / cap); 0: none
  double final_logit_softcapping = 0;  // logits -> cap tanh(logits / cap); 0: none
  double rope_local_theta = 0;         // Gemma 3: the sliding layers' RoPE base, unscaled; 0: none
  double initializer_range = 0.02;
  // Note [Dropout as configured]
  // The dropout probabilities of the config, with Hugging Face's placement; they act only
  // in training mode (Module::train, Note [Training mode] in module.h), as nn.Dropout does.
  //   GPT-2: embd_pdrop on wte + wpe; attn_pdrop on the attention probabilities;
  //          resid_pdrop after attention's c_proj and after the MLP's c_proj.
  //          A config.json without them gets GPT2Config's defaults, 0.1 each.
  //   Llama, Mistral, Qwen2: attention_dropout (into attn_pdrop) on the attention
  //          probabilities, default 0; they have no other dropout.
  // Attention with attn_pdrop > 0 in training drops inside the flash kernels (Note
  // [Attention dropout] in attention.cpp). Each is in [0, 1); anything else is an error.
  double embd_pdrop = 0.0;
  double attn_pdrop = 0.0;
  double resid_pdrop = 0.0;

  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / num_heads; }
  // Whether layer i attends within sliding_window (sliding_window_pattern).
  bool layer_slides(int64_t i) const {
    return sliding_window > 0 &&
           (sliding_window_pattern == 0 || (i + 1) % sliding_window_pattern != 0);
  }
  // The init std of the projections that write into the residual stream (attention c_proj
  // and MLP c_proj): GPT-2 initializer_range / sqrt(2 num_layers), Llama initializer_range
  // (Note [Initialisation styles] in decoder.h).
  double residual_init_std() const;
  // Throws "<where> ..." naming the first inconsistent field; where defaults to
  // "[config <name>]". With `json_keys`, a field is named by its config.json key for this
  // family (n_layer for GPT-2, num_hidden_layers for Llama: Note [Errors name the file's
  // keys]); without, by its ModelConfig name (a preset, a GGUF file's translated config).
  void validate(const std::string& where = "", bool json_keys = false) const;
  // The parameter count from the formula (no model is built); equals the module tree's.
  int64_t num_parameters() const;

  bool operator==(const ModelConfig&) const = default;
};

// The preset names, in the order of the note above.
std::vector<std::string> preset_names();
// Throws "[config] unknown preset 'x' (known: ...)".
ModelConfig preset(std::string_view name);

// Reads a Hugging Face config.json object; `source` (a file name) starts every error:
// "[config <source>] missing key 'hidden_size'". See Note [Reading config.json] in config.cpp.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);
// Reads and parses the file at `path`.
ModelConfig load_config_json(const std::string& path);

// A Hugging Face config.json for cfg (model_type, architectures and the keys
// config_from_json reads), such that config_from_json gives cfg back except for `name`,
// which a config.json does not hold (it reads as the model_type). Throws for a config no
// config.json can express (a llama with q/k/v biases but no o_proj bias).
nlohmann::json config_to_json(const ModelConfig& cfg);

}  // namespace fitgrad::nn
