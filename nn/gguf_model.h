// A whole model from a GGUF file: the ModelConfig read from llama.cpp's metadata keys, and
// a CausalLM built from it with every tensor of the file loaded (dequantized) under its
// Hugging Face name (llama_names.h). general.architecture "llama" (llama.cpp also stores
// Mistral and SmolLM models under it) and "qwen2" (model_type qwen2: q/k/v biases, its keys
// under qwen2.*, Q and K rows not permuted) are read.
//
// Note [GGUF model config]
// The ModelConfig fields and the <arch>.* keys they come from (llama.* or qwen2.*):
//   max_position_embeddings  context_length                      required
//   hidden_size              embedding_length                    required
//   intermediate_size        feed_forward_length                 required
//   num_layers               block_count                         required
//   num_heads                attention.head_count                required
//   num_kv_heads             attention.head_count_kv             default head_count
//   norm_eps                 attention.layer_norm_rms_epsilon    required (an f32 in the file)
//   rope_theta               rope.freq_base                      default 10000, llama.cpp's
//   head_dim                 attention.key_length                default embedding / heads
//   vocab_size               rows of token_embd.weight           required tensor
//   tie_word_embeddings      output.weight is absent
//   q/k/v, o, MLP biases     blk.0.attn_q.bias, attn_output.bias, ffn_up.bias are present
// Consistency checks beyond ModelConfig::validate: llama.vocab_size and the tokenizer's
// token count (when present) must not disagree with the embedding rows, value_length must
// equal key_length, rope.dimension_count must equal head_dim (no partial rotary), and what
// fitgrad's Llama cannot run is refused rather than loaded wrong: RoPE scaling other than
// linear (rope.scaling.type, rope.scaling.factor) or Llama 3's (a rope_freqs.weight tensor,
// Note [Llama 3 scaling from rope_freqs] in gguf_model.cpp) and mixtures of experts
// (expert_count > 0). Every error starts with "[gguf <path>]".
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "nn/config.h"
#include "nn/decoder.h"

namespace fitgrad::nn {

// The ModelConfig of a llama-architecture GGUF file from its metadata (Note [GGUF model
// config]), validated; errors name the file and the missing key. A file whose
// general.architecture is not "llama" is refused with an error that names it.
ModelConfig config_from_gguf(const io::GgufFile& file);
// The query_pre_attn_scalar llama.cpp gives a Gemma of cfg's shape, having no key for it (Note
// [GGUF architectures] in gguf_model.cpp): hidden / heads for the 27B shape (46 layers for
// gemma2, 62 for gemma3), else the head dim.
double llama_cpp_gemma_query_scalar(const ModelConfig& cfg, bool gemma2);

// Builds the model (options.initialize is ignored: weights come from the file) and loads
// every tensor, dequantized to options.dtype, one at a time (Note [Streaming loads] in
// nn/tensor_source.h): peak host memory is the model plus its largest tensor decoded.
std::unique_ptr<CausalLM> load_gguf_model(const io::GgufFile& file,
                                          const BuildOptions& options = {});
std::unique_ptr<CausalLM> load_gguf_model(const std::string& path,
                                          const BuildOptions& options = {});

}  // namespace fitgrad::nn
