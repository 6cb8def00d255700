// `fitgrad export --base MODEL -o OUT.gguf [--merge ADAPTER] [--dtype f32|f16|bf16|q8_0]`.
//
// Note [GGUF files written]
// What llama.cpp's convert_hf_to_gguf.py writes, so that llama.cpp, Ollama and fitgrad's own
// reader (nn/gguf_model.h) load it: general.architecture "llama" for Llama and Mistral (whose
// sliding window llama.cpp's llama graph does not have), "qwen2", "qwen3", "gemma2", "gemma3"
// (gemma3_text) or "phi3";
//   - the tensors under llama.cpp's names (nn/llama_names.h), attn_q and attn_k rows permuted
//     for "llama" (Note [Q/K row permutation] in llama_names.cpp), Gemma's norm weights as
//     1 + w, in the --dtype's type (F32, F16, BF16 or Q8_0; as the converter, 1-d tensors
//     stay F32 and a matrix whose rows are not whole Q8_0 blocks is F16); Llama 3's RoPE
//     scaling as rope_freqs.weight, each pair's base frequency over its scaled one; Phi-3's
//     longrope lists as rope_factors_long.weight and rope_factors_short.weight;
//   - general.architecture, general.name, general.file_type, and the architecture's
//     context_length, embedding_length, block_count, feed_forward_length, attention
//     head_count, head_count_kv, layer_norm_rms_epsilon, key_length and value_length (when the
//     head dim is not hidden / heads, and always for Gemma and Qwen3), rope.freq_base, rope.dimension_count, vocab_size and
//     linear rope.scaling; the keys of Note [GGUF architectures] in nn/gguf_model.cpp (soft
//     caps, windows, Gemma 3's local RoPE base, Phi-3's longrope context and attention factor).
//     A Gemma whose query_pre_attn_scalar is not the one llama.cpp assumes is refused: no key
//     could carry it;
//   - the tokenizer of the base's vocabulary (Note [Self-contained GGUF vocabularies]):
//     byte-level BPE as tokenizer.ggml.model "gpt2" with its pre-tokenizer name, tokens, token
//     types and merges; SentencePiece-style BPE as "llama" with scores that order its merges
//     (a merged token scores minus the rank of its first merge) and add_space_prefix; the bos,
//     eos, padding and unknown ids, add_bos_token, and the chat template.
// The file goes through the output policy (Note [Output policy]).
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/export_parts.h"
#include "data/hf_tokenizer.h"
#include "data/spm_tokenizer.h"
#include "io/gguf_writer.h"
#include "nn/config.h"
#include "nn/gguf_model.h"
#include "nn/llama_names.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::load_model;
using train::LoadedModel;
namespace {

using nlohmann::json;

struct Encoding {
  io::GgmlType type;
  uint32_t file_type;  // llama.cpp's llama_ftype
};

Encoding encoding_of(const std::string& dtype) {
  if (dtype == "f32") return {io::GgmlType::F32, 0};
  if (dtype == "f16") return {io::GgmlType::F16, 1};
  if (dtype == "bf16") return {io::GgmlType::BF16, 32};
  if (dtype == "q8_0") return {io::GgmlType::Q8_0, 7};
  throw Error(
      fmt::format("[export] --dtype for a .gguf must be f32, f16, bf16 or q8_0, got '{}'", dtype));
}

// The tokenizer keys of a vocabulary JSON (Note [Self-contained GGUF vocabularies]).
void put_tokenizer(io::GgufWriter& w, const json& v) {
  const auto tokens = v.at("tokens").get<std::vector<std::string>>();
  std::vector<int32_t> types = v.at("token_types").get<std::vector<int32_t>>();
  if (types.empty()) types.assign(tokens.size(), 1);
  const auto merges = v.at("merges").get<std::vector<std::string>>();
  const bool spm = v.value("model", std::string()) == "spm";
  const auto id = [&](const char* key) -> std::optional<int32_t> {
    if (!v.contains(key) || v.at(key).is_null()) return std::nullopt;
    return v.at(key).get<int32_t>();
  };
  if (spm) {
    w.put("tokenizer.ggml.model", "llama");
    std::map<std::string, size_t> first_rank;  // merged token -> its first merge
    for (size_t r = 0; r < merges.size(); ++r) {
      const size_t space = merges[r].find(' ');
      first_rank.emplace(merges[r].substr(0, space) + merges[r].substr(space + 1), r);
    }
    std::vector<float> scores(tokens.size(), -1e9f);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (const auto it = first_rank.find(tokens[i]); it != first_rank.end())
        scores[i] = -float(it->second) - 1;
      if (types[i] == 1 && data::spm_byte_token(tokens[i]) >= 0) types[i] = 6;
    }
    if (const auto unk = id("unk")) types[size_t(*unk)] = 2;
    w.put("tokenizer.ggml.tokens", tokens);
    w.put("tokenizer.ggml.scores", scores);
    w.put("tokenizer.ggml.token_type", types);
    const json& o = v.at("spm");
    w.put_bool("tokenizer.ggml.add_space_prefix",
               o.value("prepend", false) || o.value("metaspace", std::string("none")) != "none");
  } else {
    w.put("tokenizer.ggml.model", "gpt2");
    w.put("tokenizer.ggml.pre", v.at("pre").get<std::string>());
    w.put("tokenizer.ggml.tokens", tokens);
    w.put("tokenizer.ggml.token_type", types);
    w.put("tokenizer.ggml.merges", merges);
  }
  for (const auto& [key, name] : {std::pair{"bos", "bos_token_id"},
                                  {"eos", "eos_token_id"},
                                  {"pad", "padding_token_id"},
                                  {"unk", "unknown_token_id"}})
    if (const auto i = id(key)) w.put_u32(std::string("tokenizer.ggml.") + name, uint32_t(*i));
  w.put_bool("tokenizer.ggml.add_bos_token", data::vocabulary_adds_bos(v));
  if (v.contains("chat_template") && v.at("chat_template").is_string())
    w.put("tokenizer.chat_template", v.at("chat_template").get<std::string>());
}

// The GGUF architecture of a model_type, or an error naming what cannot be written.
std::string gguf_architecture(const nn::ModelConfig& cfg, const std::string& out) {
  const std::string& type = cfg.model_type;
  FG_CHECK(type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
               type == "gemma2" || type == "gemma3_text" || type == "phi3",
           "[export] -o {}: GGUF export writes Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3 and "
           "Phi-3 models; model_type '{}' is not written (write a model folder: -o DIR)",
           out, type);
  if (cfg.gemma) {  // Note [GGUF architectures] in nn/gguf_model.cpp: llama.cpp's scale rule
    const double scale = nn::llama_cpp_gemma_query_scalar(cfg, type == "gemma2");
    FG_CHECK(cfg.query_pre_attn_scalar == scale,
             "[export] -o {}: query_pre_attn_scalar is {}, but llama.cpp scales a {}-layer {} "
             "by 1 / sqrt({}) and has no key for another value; the GGUF file would compute "
             "other logits (write a model folder: -o DIR)",
             out, cfg.query_pre_attn_scalar, cfg.num_layers, type, scale);
    FG_CHECK(type == "gemma2" ? cfg.attn_logit_softcapping > 0 && cfg.final_logit_softcapping > 0
                              : cfg.attn_logit_softcapping == 0,
             "[export] -o {}: llama.cpp's {} {} attention soft-capping; this model's cap is {}",
             out, type, type == "gemma2" ? "always applies" : "has no", cfg.attn_logit_softcapping);
  }
  if (type == "qwen2") return "qwen2";
  if (type == "qwen3") return "qwen3";
  if (type == "gemma2") return "gemma2";
  if (type == "gemma3_text") return "gemma3";
  if (type == "phi3") return "phi3";
  return "llama";
}

// The keys of Note [GGUF architectures] in nn/gguf_model.cpp beyond the Llama ones.
void put_architecture_keys(io::GgufWriter& w, const nn::ModelConfig& cfg, const std::string& arch) {
  const auto key = [&](const char* k) { return arch + "." + k; };
  if (arch == "gemma2") {
    w.put_f32(key("attn_logit_softcapping"), float(cfg.attn_logit_softcapping));
    w.put_f32(key("final_logit_softcapping"), float(cfg.final_logit_softcapping));
    w.put_u32(key("attention.sliding_window"), uint32_t(cfg.sliding_window));
  }
  if (arch == "gemma3") {
    w.put_f32(key("rope.freq_base_swa"), float(cfg.rope_local_theta));
    if (cfg.final_logit_softcapping > 0)
      w.put_f32(key("final_logit_softcapping"), float(cfg.final_logit_softcapping));
    if (cfg.sliding_window > 0) {
      w.put_u32(key("attention.sliding_window"), uint32_t(cfg.sliding_window));
      w.put_u32(key("attention.sliding_window_pattern"), uint32_t(cfg.sliding_window_pattern));
    }
  }
  if (arch == "phi3") {
    w.put_u32(key("attention.sliding_window"), uint32_t(cfg.sliding_window));
    const RopeScaling& s = cfg.rope_scaling;
    if (s.type == RopeScaling::Type::longrope) {
      w.put_u32(key("rope.scaling.original_context_length"), uint32_t(s.original_max_position));
      w.put_f32(key("rope.scaling.attn_factor"), float(s.attention_factor));
    }
  }
}

}  // namespace

int64_t export_gguf(const ExportArgs& a, std::ostream& out) {
  const Encoding encoding = encoding_of(a.dtype);
  nn::BuildOptions on_meta;  // the config and the tokenizer; the weights come from the source
  on_meta.device = Device::meta();
  const LoadedModel loaded = load_model(a.base, "", on_meta);
  const nn::ModelConfig& cfg = loaded.model->config();
  const std::string arch = gguf_architecture(cfg, a.out);
  FG_CHECK(!loaded.tokenizer_vocabulary.is_null(),
           "[export] -o {}: a GGUF file carries its tokenizer, and {}'s ({}) has no vocabulary to "
           "write; give a base with a tokenizer.json, a GGUF file or a checkpoint that stores one",
           a.out, a.base, loaded.tokenizer_id);

  std::string base_file;
  const nn::TensorSource source = base_weights(a, &base_file);
  OutputPolicy outputs("export", a.overwrite);  // Note [Output policy]
  declare_inputs(a, base_file, outputs);
  const size_t output = outputs.output("-o", a.out);
  const Exported ex = exported_weights(a, source, DType::f32);

  io::GgufWriter w;
  const auto key = [&](const char* k) { return arch + "." + k; };
  w.put("general.architecture", arch);
  w.put("general.name", cfg.name);
  w.put_u32("general.file_type", encoding.file_type);
  w.put_u32(key("context_length"), uint32_t(cfg.max_position_embeddings));
  w.put_u32(key("embedding_length"), uint32_t(cfg.hidden_size));
  w.put_u32(key("block_count"), uint32_t(cfg.num_layers));
  w.put_u32(key("feed_forward_length"), uint32_t(cfg.intermediate_size));
  w.put_u32(key("attention.head_count"), uint32_t(cfg.num_heads));
  w.put_u32(key("attention.head_count_kv"), uint32_t(cfg.num_kv_heads));
  w.put_f32(key("attention.layer_norm_rms_epsilon"), float(cfg.norm_eps));
  const int64_t d = cfg.resolved_head_dim();
  // The converter writes Gemma's and Qwen3's always (transformers' GGUF reader takes a missing
  // one as Gemma2Config's default of 256).
  if (d * cfg.num_heads != cfg.hidden_size || arch == "gemma2" || arch == "gemma3" ||
      arch == "qwen3") {
    w.put_u32(key("attention.key_length"), uint32_t(d));
    w.put_u32(key("attention.value_length"), uint32_t(d));
  }
  w.put_f32(key("rope.freq_base"), float(cfg.rope_theta));
  w.put_u32(key("rope.dimension_count"), uint32_t(d));
  w.put_u32(key("vocab_size"), uint32_t(cfg.vocab_size));
  const RopeScaling& s = cfg.rope_scaling;
  FG_CHECK(s.type == RopeScaling::Type::none || s.type == RopeScaling::Type::linear ||
               s.type == RopeScaling::Type::llama3 ||
               (s.type == RopeScaling::Type::longrope && arch == "phi3"),
           "[export] -o {}: this RoPE scaling has no GGUF form here", a.out);
  if (s.type == RopeScaling::Type::linear) {
    w.put(key("rope.scaling.type"), "linear");
    w.put_f32(key("rope.scaling.factor"), float(s.factor));
  }
  put_architecture_keys(w, cfg, arch);
  put_tokenizer(w, loaded.tokenizer_vocabulary);

  if (s.type == RopeScaling::Type::llama3) {  // rope_freqs.weight: b_i / f_i per pair
    std::vector<float> factors(size_t(d / 2));
    const RopeParams plain(cfg.rope_theta), scaled(cfg.rope_theta, s);
    for (int64_t i = 0; i < d / 2; ++i)
      factors[size_t(i)] = float(rope_frequency(i, d, plain) / rope_frequency(i, d, scaled));
    w.tensor("rope_freqs.weight", Tensor::from_vector(factors, {d / 2}), io::GgmlType::F32);
  }
  if (s.type == RopeScaling::Type::longrope) {  // Phi-3's lists, one divisor per pair
    const std::vector<float> longf(s.long_factor, s.long_factor + s.pairs),
        shortf(s.short_factor, s.short_factor + s.pairs);
    w.tensor("rope_factors_long.weight", Tensor::from_vector(longf, {s.pairs}), io::GgmlType::F32);
    w.tensor("rope_factors_short.weight", Tensor::from_vector(shortf, {s.pairs}),
             io::GgmlType::F32);
  }
  for (const auto& [name, t] : ex.tensors) {
    const std::optional<std::string> gguf = nn::hf_to_llama_cpp_name(name, arch);
    FG_CHECK(gguf.has_value(), "[export] -o {}: tensor '{}' has no llama.cpp name", a.out, name);
    Tensor data = t;
    if (nn::gguf_shifts_norms(arch) && name.ends_with("norm.weight"))
      data = ops::add_scalar(t.to(DType::f32), 1.0);  // Gemma's 1 + w
    if (arch == "llama" && name.find(".self_attn.q_proj.") != std::string::npos)
      data = nn::permute_qk(t, cfg.num_heads);
    if (arch == "llama" && name.find(".self_attn.k_proj.") != std::string::npos)
      data = nn::permute_qk(t, cfg.num_kv_heads);
    io::GgmlType type_of = encoding.type;
    if (data.dim() < 2) type_of = io::GgmlType::F32;
    if (type_of == io::GgmlType::Q8_0 && data.size(-1) % 32 != 0) type_of = io::GgmlType::F16;
    w.tensor(*gguf, data, type_of);
  }
  w.write(outputs.file(output));
  outputs.commit(out);
  const std::string window =
      (arch == "llama" || arch == "phi3") && cfg.sliding_window > 0
          ? fmt::format(
                "; llama.cpp's {} graph has no sliding window: past {} positions it "
                "attends to every earlier one",
                arch, cfg.sliding_window)
          : std::string();
  out << fmt::format(
      "{}; wrote the GGUF file {} ({} {}, {} tensors, tokenizer {}){}\n", ex.what, a.out, arch,
      a.dtype, ex.tensors.size(),
      loaded.tokenizer_vocabulary.value("model", std::string()) == "spm" ? "llama" : "gpt2",
      window);
  return ex.merged;
}

}  // namespace fitgrad::apps
