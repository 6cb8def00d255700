// The llama.cpp <-> Hugging Face name table of llama_names.h, the Q/K row permutation,
// and a loader that renames and unpermutes a whole llama GGUF file.
#include "nn/llama_names.h"

#include <array>
#include <charconv>
#include <map>

#include "io/gguf.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"

namespace fitgrad::nn {

namespace {

struct NamePair {
  std::string_view gguf;
  std::string_view hf;
};

// Whole-model tensors.
constexpr std::array kGlobal = {
    NamePair{"token_embd.weight", "model.embed_tokens.weight"},
    NamePair{"output_norm.weight", "model.norm.weight"},
    NamePair{"output.weight", "lm_head.weight"},
};

// Per-block tensors, without the "blk.N." / "model.layers.N." prefix and the suffix: those
// every architecture shares, then those whose names differ (Note [Architectures' names]).
constexpr std::array kBlock = {
    NamePair{"attn_norm", "input_layernorm"},    NamePair{"attn_q", "self_attn.q_proj"},
    NamePair{"attn_k", "self_attn.k_proj"},      NamePair{"attn_v", "self_attn.v_proj"},
    NamePair{"attn_output", "self_attn.o_proj"}, NamePair{"attn_q_norm", "self_attn.q_norm"},
    NamePair{"attn_k_norm", "self_attn.k_norm"}, NamePair{"ffn_gate", "mlp.gate_proj"},
    NamePair{"ffn_down", "mlp.down_proj"},
};
constexpr std::array kLlamaBlock = {
    NamePair{"ffn_norm", "post_attention_layernorm"},
    NamePair{"ffn_up", "mlp.up_proj"},
};
constexpr std::array kGemmaBlock = {
    NamePair{"post_attention_norm", "post_attention_layernorm"},
    NamePair{"ffn_norm", "pre_feedforward_layernorm"},
    NamePair{"post_ffw_norm", "post_feedforward_layernorm"},
    NamePair{"ffn_up", "mlp.up_proj"},
};
constexpr std::array kPhi3Block = {
    NamePair{"ffn_norm", "post_attention_layernorm"},
    NamePair{"attn_qkv", "self_attn.qkv_proj"},
    NamePair{"ffn_up", "mlp.gate_up_proj"},
};

// Note [Architectures' names]
// llama.cpp's converter names a block's tensors by what they do in its graph, so the same
// Hugging Face name maps differently per architecture: Gemma's post_attention_layernorm
// follows attention (post_attention_norm) and its pre_feedforward_layernorm is the FFN's input
// norm (ffn_norm), which in Llama-like blocks is post_attention_layernorm; Phi-3 keeps its
// fused projections whole (attn_qkv: q, k, v rows in that order; ffn_up: the gate rows, then
// the up rows). Qwen3's and Gemma 3's q/k norms are attn_q_norm / attn_k_norm.
template <typename F>
void for_each_block_pair(std::string_view arch, F&& f) {
  for (const NamePair& p : kBlock) f(p);
  if (arch == "gemma2" || arch == "gemma3") {
    for (const NamePair& p : kGemmaBlock) f(p);
  } else if (arch == "phi3") {
    for (const NamePair& p : kPhi3Block) f(p);
  } else {
    for (const NamePair& p : kLlamaBlock) f(p);
  }
}

// Splits "<prefix><N>.<part>.<weight|bias>" into N, part and suffix.
bool split_block_name(std::string_view name, std::string_view prefix, std::string_view* index,
                      std::string_view* part, std::string_view* suffix) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  *index = name.substr(0, dot);
  for (char c : *index)
    if (c < '0' || c > '9') return false;
  name.remove_prefix(dot + 1);
  const size_t last = name.rfind('.');
  if (last == std::string_view::npos) return false;
  *part = name.substr(0, last);
  *suffix = name.substr(last + 1);
  return *suffix == "weight" || *suffix == "bias";
}

// (out, ...) rows viewed as (n_head, a, b, ...) with a * b * n_head = out, axes 1 and 2
// swapped, flattened back.
Tensor swap_row_groups(const Tensor& w, int64_t n_head, int64_t a, int64_t b) {
  Shape grouped = {n_head, a, b};
  for (int64_t d = 1; d < w.dim(); ++d) grouped.push_back(w.size(d));
  return w.contiguous().view(grouped).transpose(1, 2).contiguous().view(w.shape());
}

void check_qk(const Tensor& w, int64_t n_head, const char* op) {
  FG_CHECK(w.defined() && w.dim() >= 1, "[{}] needs a tensor with at least one dimension", op);
  FG_CHECK(n_head > 0 && w.size(0) % (2 * n_head) == 0,
           "[{}] {} rows cannot be split into {} heads of an even head_dim", op, w.size(0), n_head);
}

}  // namespace

std::optional<std::string> llama_cpp_to_hf_name(std::string_view name, std::string_view arch) {
  for (const auto& p : kGlobal)
    if (p.gguf == name) return std::string(p.hf);
  std::string_view index, part, suffix;
  if (!split_block_name(name, "blk.", &index, &part, &suffix)) return std::nullopt;
  std::optional<std::string> hf;
  for_each_block_pair(arch, [&](const NamePair& p) {
    if (p.gguf == part)
      hf = "model.layers." + std::string(index) + "." + std::string(p.hf) + "." +
           std::string(suffix);
  });
  return hf;
}

std::optional<std::string> hf_to_llama_cpp_name(std::string_view name, std::string_view arch) {
  for (const auto& p : kGlobal)
    if (p.hf == name) return std::string(p.gguf);
  std::string_view index, part, suffix;
  if (!split_block_name(name, "model.layers.", &index, &part, &suffix)) return std::nullopt;
  std::optional<std::string> gguf;
  for_each_block_pair(arch, [&](const NamePair& p) {
    if (p.hf == part)
      gguf = "blk." + std::string(index) + "." + std::string(p.gguf) + "." + std::string(suffix);
  });
  return gguf;
}

bool gguf_shifts_norms(std::string_view arch) { return arch == "gemma2" || arch == "gemma3"; }

// Note [Q/K row permutation]
// Hugging Face's Llama applies RoPE to the two halves of each head (rotate_half: element i
// pairs with i + head_dim/2), while ggml's RoPE for llama pairs neighbours (2i, 2i+1). So
// llama.cpp's converter reorders the rows of q_proj and k_proj within each head: viewing
// the out dimension as (n_head, 2, head_dim/2), it swaps the last two axes, so that row
// (h, j, i) lands at (h, i, j) and each rotated pair becomes adjacent. k_proj uses the KV
// head count. unpermute_qk views the rows as (n_head, head_dim/2, 2) and swaps back.
Tensor permute_qk(const Tensor& w, int64_t n_head) {
  check_qk(w, n_head, "permute_qk");
  return swap_row_groups(w, n_head, 2, w.size(0) / n_head / 2);
}

Tensor unpermute_qk(const Tensor& w, int64_t n_head) {
  check_qk(w, n_head, "unpermute_qk");
  return swap_row_groups(w, n_head, w.size(0) / n_head / 2, 2);
}

TensorSource llama_gguf_source(const io::GgufFile& file, DType dtype) {
  const io::GgufMetadata& meta = file.metadata();
  const std::string arch = meta.has("general.architecture")
                               ? meta.get_string("general.architecture")
                               : std::string("llama");
  const int64_t n_head = meta.get_u32(arch + ".attention.head_count");
  const int64_t n_head_kv = meta.has(arch + ".attention.head_count_kv")
                                ? int64_t(meta.get_u32(arch + ".attention.head_count_kv"))
                                : n_head;
  TensorSource source;
  std::map<std::string, std::string> gguf_name;  // Hugging Face name -> the file's
  for (const io::GgufTensorInfo& t : file.tensors()) {
    // RoPE factors (Llama 3's rope_freqs, Phi-3's long and short lists) are no parameters.
    if (t.name == "rope_freqs.weight" || t.name == "rope_factors_long.weight" ||
        t.name == "rope_factors_short.weight")
      continue;
    auto hf = llama_cpp_to_hf_name(t.name, arch);
    FG_CHECK(hf.has_value(), "[gguf {}] tensor '{}' has no Hugging Face name for architecture {}",
             file.path(), t.name, arch);
    source.entries.push_back({*hf, t.shape(), dtype});
    gguf_name[*hf] = t.name;
  }
  // llama.cpp's converter permutes Q and K for its Llama architecture only (the others rotate
  // as Hugging Face's do), and stores Gemma's norm weights as 1 + w.
  const bool permuted = arch == "llama", shifted = gguf_shifts_norms(arch);
  source.read = [&file, dtype, n_head, n_head_kv, permuted, shifted,
                 names = std::move(gguf_name)](const std::string& hf) {
    const Tensor w = file.tensor(names.at(hf), dtype);
    if (shifted && hf.ends_with("norm.weight"))
      return ops::add_scalar(w.to(DType::f32), -1.0).to(dtype);
    if (!permuted) return w;
    if (hf.find(".self_attn.q_proj.") != std::string::npos) return unpermute_qk(w, n_head);
    if (hf.find(".self_attn.k_proj.") != std::string::npos) return unpermute_qk(w, n_head_kv);
    return w;
  };
  return source;
}

std::vector<std::pair<std::string, Tensor>> load_llama_gguf(const io::GgufFile& file, DType dtype) {
  const TensorSource source = llama_gguf_source(file, dtype);
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(source.entries.size());
  for (const TensorSource::Entry& e : source.entries) out.emplace_back(e.name, source.read(e.name));
  return out;
}

}  // namespace fitgrad::nn
