// llama.cpp's tensor names for the architectures fitgrad reads and writes as GGUF (llama,
// qwen2, qwen3, gemma2, gemma3, phi3) and their Hugging Face names (the names fitgrad's modules
// use), plus the row permutation llama.cpp's converter applies to q_proj and k_proj.
//
//   token_embd.weight              model.embed_tokens.weight
//   output_norm.weight             model.norm.weight
//   output.weight                  lm_head.weight (absent with tied embeddings)
//   blk.N.attn_norm.weight         model.layers.N.input_layernorm.weight
//   blk.N.attn_q / attn_k / attn_v / attn_output
//                                  model.layers.N.self_attn.q_proj / k_proj / v_proj / o_proj
//   blk.N.attn_q_norm / attn_k_norm
//                                  model.layers.N.self_attn.q_norm / k_norm (Qwen3, Gemma 3)
//   blk.N.ffn_norm.weight          model.layers.N.post_attention_layernorm.weight
//                                  (Gemma: pre_feedforward_layernorm; its
//                                  post_attention_layernorm is post_attention_norm and its
//                                  post_feedforward_layernorm post_ffw_norm)
//   blk.N.ffn_gate / ffn_up / ffn_down
//                                  model.layers.N.mlp.gate_proj / up_proj / down_proj
//   blk.N.attn_qkv, blk.N.ffn_up   Phi-3's fused self_attn.qkv_proj and mlp.gate_up_proj
// Per-block names take a .weight or a .bias suffix (Qwen2-style q/k/v biases).
//
// See Note [Q/K row permutation] in llama_names.cpp for unpermute_qk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/tensor_source.h"
#include "tensor/tensor.h"

namespace fitgrad::io {
class GgufFile;
}  // namespace fitgrad::io

namespace fitgrad::nn {

// The Hugging Face name of a llama.cpp tensor name in a file of general.architecture `arch`
// (llama, qwen2, qwen3, gemma2, gemma3, phi3: Note [Architectures' names] in
// llama_names.cpp); nullopt for a name outside the table (such as rope_freqs.weight, which is
// no parameter).
std::optional<std::string> llama_cpp_to_hf_name(std::string_view name,
                                                std::string_view arch = "llama");
// The inverse: llama.cpp's name for a Hugging Face parameter name.
std::optional<std::string> hf_to_llama_cpp_name(std::string_view name,
                                                std::string_view arch = "llama");
// Whether llama.cpp's converter stores the architecture's RMSNorm weights as 1 + w (Gemma's
// norms scale by 1 + w; llama.cpp's plain RMSNorm then reads the file's weight as is).
bool gguf_shifts_norms(std::string_view arch);

// llama.cpp's converter permutation of a q_proj (n_head = head count) or k_proj
// (n_head = KV head count) weight or bias: rows (n_head, 2, head_dim/2) are reordered to
// (n_head, head_dim/2, 2). Shape (n_head * head_dim, ...) in and out.
Tensor permute_qk(const Tensor& w, int64_t n_head);
// Its inverse: turns the rows of a GGUF attn_q / attn_k tensor back into Hugging Face's
// order, in which RoPE rotates the two halves of each head.
Tensor unpermute_qk(const Tensor& w, int64_t n_head);

// Every tensor of a GGUF model file under its Hugging Face name, decoded to `dtype`, with
// attn_q / attn_k unpermuted (architecture llama) using its attention.head_count and
// head_count_kv, and Gemma's norms shifted back to w. In file order; the RoPE factor tensors
// (no parameters) are left out, and any other name outside the table throws.
std::vector<std::pair<std::string, Tensor>> load_llama_gguf(const io::GgufFile& file,
                                                            DType dtype = DType::f32);
// The same tensors as a source read one at a time (Note [Streaming loads] in
// nn/tensor_source.h); every name is translated when the source is made, so an unknown one
// throws before anything is read. `file` must outlive the source.
TensorSource llama_gguf_source(const io::GgufFile& file, DType dtype = DType::f32);

}  // namespace fitgrad::nn
