// The llama.cpp <-> Hugging Face name table of llama_names.h, the Q/K row permutation,
// and a loader that renames and unpermutes a whole llama GGUF file.
#include "nn/llama_names.h"

#include <array>
#include <charconv>
#include <map>

#include "io/gguf.h"
#include "tensor/error.h"

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

// Per-block tensors, without the "blk.N." / "model.layers.N." prefix and the suffix.
constexpr std::array kBlock = {
    NamePair{"attn_norm", "input_layernorm"},    NamePair{"attn_q", "self_attn.q_proj"},
    NamePair{"attn_k", "self_attn.k_proj"},      NamePair{"attn_v", "self_attn.v_proj"},
    NamePair{"attn_output", "self_attn.o_proj"}, NamePair{"ffn_norm", "post_attention_layernorm"},
    NamePair{"ffn_gate", "mlp.gate_proj"},       NamePair{"ffn_up", "mlp.up_proj"},
    NamePair{"ffn_down", "mlp.down_proj"},
};

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

std::optional<std::string> llama_cpp_to_hf_name(std::string_view name) {
  for (const auto& p : kGlobal)
    if (p.gguf == name) return std::string(p.hf);
  std::string_view index, part, suffix;
  if (!split_block_name(name, "blk.", &index, &part, &suffix)) return std::nullopt;
  for (const auto& p : kBlock)
    if (p.gguf == part)
      return "model.layers." + std::string(index) + "." + std::string(p.hf) + "." +
             std::string(suffix);
  return std::nullopt;
}

std::optional<std::string> hf_to_llama_cpp_name(std::string_view name) {
  for (const auto& p : kGlobal)
    if (p.hf == name) return std::string(p.gguf);
  std::string_view index, part, suffix;
  if (!split_block_name(name, "model.layers.", &index, &part, &suffix)) return std::nullopt;
  for (const auto& p : kBlock)
    if (p.hf == part)
      return "blk." + std::string(index) + "." + std::string(p.gguf) + "." + std::string(suffix);
  return std::nullopt;
}

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
    if (t.name == "rope_freqs.weight") continue;  // Llama 3 RoPE scaling factors, no parameter
    auto hf = llama_cpp_to_hf_name(t.name);
    FG_CHECK(hf.has_value(), "[gguf {}] tensor '{}' has no Hugging Face Llama name", file.path(),
             t.name);
    source.entries.push_back({*hf, t.shape(), dtype});
    gguf_name[*hf] = t.name;
  }
  // llama.cpp's converter permutes Q and K for its Llama architecture only (Qwen2's rotate
  // as Hugging Face's do).
  const bool permuted = arch == "llama";
  source.read = [&file, dtype, n_head, n_head_kv, permuted,
                 names = std::move(gguf_name)](const std::string& hf) {
    const Tensor w = file.tensor(names.at(hf), dtype);
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
