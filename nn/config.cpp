// Validation, the parameter-count formula and the config.json reader and writer (config.h);
// the presets are nn/presets.cpp.
#include "nn/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/json_file.h"
#include "nn/text_config.h"
#include "tensor/error.h"

namespace fitgrad::nn {

// Note [Size bounds]
// Sizes read from a config.json are untrusted. validate() caps each at kMaxSize, so that a
// product of two fits int64, the depth at kMaxLayers, and an estimate in double of the
// weight matrices' count (one layer at least) at kMaxParameters = 2^40, so that
// num_parameters() cannot overflow (its terms are non-negative, and with the biases and
// norms, at most as many again, they sum to far less than 2^62) and so that a config no
// card could hold is refused before anything is built: 2^40 parameters are 512 GiB even in
// 4 bits (NF4), beyond any card, and the deepest published decoders have under 200 layers,
// while a tree of 2^16 blocks already takes a gigabyte of host memory to build on meta.
// Real models are far inside all three bounds.
constexpr int64_t kMaxSize = int64_t(1) << 31;
constexpr int64_t kMaxLayers = int64_t(1) << 16;
constexpr double kMaxParameters = 1099511627776.0;  // 2^40

namespace {

// Note [Errors name the file's keys]
// A config.json error names the key the user wrote: a GPT-2 config has n_embd, n_layer,
// n_head, n_positions and n_inner, not hidden_size or intermediate_size, and a Llama config
// has num_hidden_layers, num_attention_heads and num_key_value_heads (Note [Reading
// config.json]). GPT-2's n_inner, when absent, is 4 * n_embd, and the name says so.
std::string key_of(const ModelConfig& c, bool json_keys, const std::string& field) {
  if (!json_keys) return field;
  static const std::map<std::string, std::string> gpt2 = {
      {"hidden_size", "n_embd"},
      {"num_layers", "n_layer"},
      {"num_heads", "n_head"},
      {"num_kv_heads", "n_head"},
      {"max_position_embeddings", "n_positions"},
      {"intermediate_size", "n_inner (4 * n_embd when not given)"},
      {"norm_eps", "layer_norm_epsilon"}};
  static const std::map<std::string, std::string> llama = {{"num_layers", "num_hidden_layers"},
                                                           {"num_heads", "num_attention_heads"},
                                                           {"num_kv_heads", "num_key_value_heads"},
                                                           {"norm_eps", "rms_norm_eps"}};
  const auto& names = c.family == Family::gpt2 ? gpt2 : llama;
  const auto it = names.find(field);
  return it == names.end() ? field : it->second;
}

}  // namespace

void ModelConfig::validate(const std::string& where_arg, bool json_keys) const {
  const std::string where = where_arg.empty() ? "[config " + name + "]" : where_arg;
  const auto key = [&](const char* field) { return key_of(*this, json_keys, field); };
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"vocab_size", vocab_size},
                                     {"hidden_size", hidden_size},
                                     {"intermediate_size", intermediate_size},
                                     {"num_layers", num_layers},
                                     {"num_heads", num_heads},
                                     {"num_kv_heads", num_kv_heads},
                                     {"head_dim", head_dim},
                                     {"max_position_embeddings", max_position_embeddings},
                                     {"sliding_window", sliding_window}})
    FG_CHECK(value <= kMaxSize, "{} {} = {} is too large (at most 2^31)", where, key(field), value);
  FG_CHECK(num_layers <= kMaxLayers,
           "{} {} = {} is too many layers (at most 65536; Note [Size bounds])", where,
           key("num_layers"), num_layers);
  FG_CHECK(vocab_size > 0, "{} vocab_size must be positive, got {}", where, vocab_size);
  FG_CHECK(hidden_size > 0, "{} {} must be positive, got {}", where, key("hidden_size"),
           hidden_size);
  FG_CHECK(intermediate_size > 0, "{} {} must be positive, got {}", where, key("intermediate_size"),
           intermediate_size);
  FG_CHECK(num_layers >= 0, "{} {} must be >= 0, got {}", where, key("num_layers"), num_layers);
  FG_CHECK(num_heads > 0, "{} {} must be positive, got {}", where, key("num_heads"), num_heads);
  FG_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "{} {} = {} must divide {} = {}",
           where, key("num_kv_heads"), num_kv_heads, key("num_heads"), num_heads);
  FG_CHECK(head_dim > 0 || hidden_size % num_heads == 0, "{} {} = {} is not a multiple of {} = {}",
           where, key("hidden_size"), hidden_size, key("num_heads"), num_heads);
  FG_CHECK(head_dim >= 0, "{} head_dim must be >= 0, got {}", where, head_dim);
  FG_CHECK(max_position_embeddings > 0, "{} {} must be positive, got {}", where,
           key("max_position_embeddings"), max_position_embeddings);
  FG_CHECK(norm_eps > 0, "{} {} must be positive, got {}", where, key("norm_eps"), norm_eps);
  FG_CHECK(initializer_range >= 0, "{} initializer_range must be >= 0, got {}", where,
           initializer_range);
  for (const auto& [key, p] : {std::pair{"embd_pdrop", embd_pdrop},
                               {"attn_pdrop", attn_pdrop},
                               {"resid_pdrop", resid_pdrop}})
    FG_CHECK(p >= 0 && p < 1, "{} dropout {} must be in [0, 1), got {}", where, key, p);
  FG_CHECK(family == Family::gpt2 || (embd_pdrop == 0 && resid_pdrop == 0),
           "{} only GPT-2 has embedding and residual dropout (Note [Dropout as configured])",
           where);
  if (family == Family::gpt2) {
    FG_CHECK(num_kv_heads == num_heads, "{} gpt2 has no grouped-query attention", where);
    FG_CHECK(head_dim == 0 || head_dim * num_heads == hidden_size,
             "{} gpt2 needs head_dim * {} == {}", where, key("num_heads"), key("hidden_size"));
  } else {
    FG_CHECK(resolved_head_dim() % 2 == 0, "{} RoPE needs an even head_dim, got {}", where,
             resolved_head_dim());
    FG_CHECK(rope_theta > 0, "{} rope_theta must be positive, got {}", where, rope_theta);
  }
  // See Note [Size bounds].
  const double c = double(hidden_size), d = double(resolved_head_dim());
  const double attn =
      family == Family::gpt2 ? 4 * c * c : 2 * c * d * double(num_heads + num_kv_heads);
  const double params =
      double(vocab_size + max_position_embeddings) * c * 2 +
      double(std::max<int64_t>(num_layers, 1)) * (attn + 3 * c * double(intermediate_size));
  FG_CHECK(params <= kMaxParameters,
           "{} has about {:.3g} parameters, more than 2^40: 512 GiB even in 4 bits, beyond any "
           "card ({} = {}, {} = {}, {} = {}, vocab_size = {})",
           where, params, key("num_layers"), num_layers, key("hidden_size"), hidden_size,
           key("intermediate_size"), intermediate_size, vocab_size);
}

double ModelConfig::residual_init_std() const {
  if (family != Family::gpt2) return initializer_range;
  return initializer_range / std::sqrt(2.0 * double(std::max<int64_t>(num_layers, 1)));
}

int64_t ModelConfig::num_parameters() const {
  const int64_t c = hidden_size, d = resolved_head_dim(), f = intermediate_size;
  const int64_t q = num_heads * d, kv = num_kv_heads * d;
  int64_t per_layer = 0, n = vocab_size * c;  // token embedding
  if (family == Family::gpt2) {
    n += max_position_embeddings * c;            // wpe
    per_layer = 2 * 2 * c                        // ln_1, ln_2
                + c * 3 * c + 3 * c + c * c + c  // c_attn, c_proj
                + c * f + f + f * c + c;         // c_fc, c_proj
    n += 2 * c;                                  // ln_f
  } else {
    per_layer = (gemma ? 4 : 2) * c           // the block's norms (Gemma's four)
                + c * q + 2 * c * kv + q * c  // q, k, v, o
                + (attention_qkv_bias ? q + 2 * kv : 0) + (attention_out_bias ? c : 0) + 3 * c * f +
                (mlp_bias ? 2 * f + c : 0)  // gate, up, down
                + (qk_norm ? 2 * d : 0);    // Qwen3's q_norm, k_norm
    n += c;                                 // norm
  }
  n += num_layers * per_layer;
  if (!tie_word_embeddings) n += vocab_size * c;  // lm_head
  return n;
}

// Note [Reading config.json]
// model_type picks the family: gpt2 -> Family::gpt2; llama, mistral, qwen2, qwen3, phi3,
// gemma2 and gemma3_text -> Family::llama, with their variations (Qwen3's q/k norms, Phi-3's
// fused projections, Gemma's blocks: Note [Gemma blocks] in decoder.cpp).
//   - The keys that fix the shapes are required, and a missing one is an error naming it
//     ("[config f.json] missing key 'hidden_size' (model_type llama)"); so is a key of the
//     wrong JSON type.
//   - Optional keys take Hugging Face's defaults: num_key_value_heads = num_attention_heads,
//     rope_theta 10000, tie_word_embeddings (gpt2 and gemma true, others false), n_inner =
//     4 n_embd, attention_bias/mlp_bias false (qwen2 always has q/k/v biases),
//     initializer_range 0.02; Gemma2Config's and Gemma3TextConfig's own defaults for their
//     keys (soft caps 50 and 30 for gemma2 when absent, none when null).
//   - rope_scaling / rope_parameters: Note [Reading RoPE scaling].
//   - Keys whose non-default values change the model in ways fitgrad does not implement
//     are errors naming the key: a hidden_act other than silu (Gemma's hidden_activation
//     other than the tanh GELU), a GPT-2 activation other than the tanh GELU, qwen2's
//     use_sliding_window, Phi-3's partial_rotary_factor below 1 or its dropouts, GPT-2's
//     scale_attn_weights false / scale_attn_by_inverse_layer_idx / add_cross_attention.
//   - Any other key must be one of the bookkeeping keys these model types are known to
//     carry (token ids, dtypes, dropout rates, ...); an unknown key is an error naming it,
//     so that a config using a feature fitgrad has never heard of (quantization_config,
//     a new attention variant) fails loudly instead of building the wrong model.
namespace {

class Reader {
 public:
  Reader(const nlohmann::json& j, std::string source, std::string type)
      : j_(j), where_("[config " + source + "]"), type_(std::move(type)) {}

  const std::string& where() const { return where_; }
  bool has(const std::string& key) {
    seen_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null();
  }
  int64_t integer(const std::string& key) {
    FG_CHECK(has(key), "{} missing key '{}' (model_type {})", where_, key, type_);
    return integer_at(key);
  }
  int64_t integer(const std::string& key, int64_t fallback) {
    return has(key) ? integer_at(key) : fallback;
  }
  double number(const std::string& key) {
    FG_CHECK(has(key), "{} missing key '{}' (model_type {})", where_, key, type_);
    return number_at(key);
  }
  double number(const std::string& key, double fallback) {
    return has(key) ? number_at(key) : fallback;
  }
  bool boolean(const std::string& key, bool fallback) {
    if (!has(key)) return fallback;
    FG_CHECK(j_.at(key).is_boolean(), "{} key '{}' must be a boolean, got {}", where_, key,
             j_.at(key).type_name());
    return j_.at(key).get<bool>();
  }
  // The value of a key that has() found.
  const nlohmann::json& at(const std::string& key) const { return j_.at(key); }
  // A number whose null means "none" (0) and whose absence means `fallback`.
  double number_or_none(const std::string& key, double fallback) {
    seen_.insert(key);
    if (!j_.contains(key)) return fallback;
    return j_.at(key).is_null() ? 0.0 : number_at(key);
  }
  std::string string(const std::string& key, const std::string& fallback) {
    if (!has(key)) return fallback;
    FG_CHECK(j_.at(key).is_string(), "{} key '{}' must be a string, got {}", where_, key,
             j_.at(key).type_name());
    return j_.at(key).get<std::string>();
  }
  // Marks bookkeeping keys as known.
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) seen_.insert(k);
  }
  // Throws on the first key (in the file's order) that was neither read nor ignored.
  void reject_unknown() const {
    for (const auto& [key, value] : j_.items())
      FG_CHECK(seen_.count(key),
               "{} unknown key '{}' for model_type {} (fitgrad does not know "
               "what it changes)",
               where_, key, type_);
  }

 private:
  int64_t integer_at(const std::string& key) const {
    const auto& v = j_.at(key);
    FG_CHECK(v.is_number_integer(), "{} key '{}' must be an integer, got {}", where_, key,
             v.type_name());
    return v.get<int64_t>();
  }
  double number_at(const std::string& key) const {
    const auto& v = j_.at(key);
    FG_CHECK(v.is_number(), "{} key '{}' must be a number, got {}", where_, key, v.type_name());
    return v.get<double>();
  }

  const nlohmann::json& j_;
  std::string where_;
  std::string type_;
  std::set<std::string> seen_;
};

ModelConfig read_gpt2(Reader& r) {
  ModelConfig m;
  m.model_type = m.name = "gpt2";
  m.family = Family::gpt2;
  m.vocab_size = r.integer("vocab_size");
  m.max_position_embeddings = r.integer("n_positions");
  m.hidden_size = r.integer("n_embd");
  m.num_layers = r.integer("n_layer");
  m.num_heads = m.num_kv_heads = r.integer("n_head");
  // 4 * n_embd; an n_embd too large for that fails validate() (Note [Size bounds]).
  m.intermediate_size = r.integer("n_inner", 4 * std::min(m.hidden_size, kMaxSize));
  m.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  m.initializer_range = r.number("initializer_range", 0.02);
  m.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  m.attention_qkv_bias = m.attention_out_bias = m.mlp_bias = true;
  const std::string act = r.string("activation_function", "gelu_new");
  FG_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh",
           "{} key 'activation_function' is '{}'; fitgrad's GPT-2 uses the tanh GELU "
           "(gelu_new)",
           r.where(), act);
  FG_CHECK(r.boolean("scale_attn_weights", true),
           "{} key 'scale_attn_weights' false is not supported", r.where());
  FG_CHECK(!r.boolean("scale_attn_by_inverse_layer_idx", false),
           "{} key 'scale_attn_by_inverse_layer_idx' true is not supported", r.where());
  FG_CHECK(!r.boolean("add_cross_attention", false),
           "{} key 'add_cross_attention' true is not supported (decoder-only)", r.where());
  // Note [Dropout as configured] in config.h; the defaults are GPT2Config's.
  m.embd_pdrop = r.number("embd_pdrop", 0.1);
  m.attn_pdrop = r.number("attn_pdrop", 0.1);
  m.resid_pdrop = r.number("resid_pdrop", 0.1);
  // The summary_* keys (summary_first_dropout included) configure the sequence-summary head
  // of GPT2DoubleHeadsModel and GPT2ForSequenceClassification, which a causal LM has not.
  r.ignore({"n_ctx", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
            "summary_type", "summary_use_proj", "task_specific_params", "reorder_and_upcast_attn",
            "gradient_checkpointing", "output_past", "n_special", "predict_special_tokens"});
  return m;
}

// Note [Reading RoPE scaling]
// rope_scaling (transformers 4) or rope_parameters (transformers 5, which moves rope_theta
// into it) is an object whose "rope_type" (or the older "type") is default, linear, llama3,
// dynamic, yarn or longrope ("su" in Phi-3's first configs), with that type's keys (Note [RoPE
// frequencies] in tensor/rope_params.h); null or absent is no scaling. longrope's context L
// is its own original_max_position_embeddings or, as Phi-3 writes it, the config's; its
// attention factor its attention_factor or else from its factor, else from
// max_position_embeddings / L; dynamic's and yarn's context is their
// original_max_position_embeddings, else max_position_embeddings (as transformers 4.46 reads
// them, which ignores the key; the two agree in every published config, whose values are
// equal). Any other type, a key the type does not
// read, a factor below 1, llama3's low_freq_factor >= high_freq_factor and longrope lists
// that do not give every pair a positive divisor are errors naming the key, as
// transformers' own validation refuses them or ignores what it should not.
RopeScaling read_rope_scaling(Reader& r, double* theta, int64_t max_position) {
  const bool v4 = r.has("rope_scaling"), v5 = r.has("rope_parameters");
  FG_CHECK(!(v4 && v5), "{} has both 'rope_scaling' and 'rope_parameters'; a config gives one",
           r.where());
  if (!v4 && !v5) return {};
  const std::string key = v4 ? "rope_scaling" : "rope_parameters";
  const nlohmann::json& o = r.at(key);
  FG_CHECK(o.is_object(), "{} key '{}' must be an object, got {}", r.where(), key, o.type_name());
  std::set<std::string> read;
  const auto value = [&](const char* k) -> const nlohmann::json* {
    read.insert(k);
    return o.contains(k) && !o.at(k).is_null() ? &o.at(k) : nullptr;
  };
  const auto number = [&](const char* k) {
    const nlohmann::json* v = value(k);
    FG_CHECK(v, "{} key '{}' lacks '{}'", r.where(), key, k);
    FG_CHECK(v->is_number(), "{} key '{}.{}' must be a number, got {}", r.where(), key, k,
             v->type_name());
    return v->get<double>();
  };
  std::string type = "default";
  for (const char* k : {"type", "rope_type"})
    if (const nlohmann::json* v = value(k)) {
      FG_CHECK(v->is_string(), "{} key '{}.{}' must be a string", r.where(), key, k);
      FG_CHECK(type == "default" || type == v->get<std::string>(),
               "{} key '{}' gives two types, '{}' and '{}'", r.where(), key, type,
               v->get<std::string>());
      type = v->get<std::string>();
    }
  if (v5 && value("rope_theta")) *theta = number("rope_theta");
  RopeScaling s;
  if (type == "linear") {
    s.type = RopeScaling::Type::linear;
    s.factor = number("factor");
  } else if (type == "llama3") {
    s.type = RopeScaling::Type::llama3;
    s.factor = number("factor");
    s.low_freq_factor = number("low_freq_factor");
    s.high_freq_factor = number("high_freq_factor");
    s.original_max_position = number("original_max_position_embeddings");
  } else if (type == "dynamic" || type == "yarn") {
    s.type = type == "yarn" ? RopeScaling::Type::yarn : RopeScaling::Type::dynamic;
    s.factor = number("factor");
    s.original_max_position = value("original_max_position_embeddings")
                                  ? number("original_max_position_embeddings")
                                  : double(max_position);
    if (type == "yarn") {
      s.attention_factor =
          value("attention_factor") ? number("attention_factor") : 0.1 * std::log(s.factor) + 1;
      if (value("beta_fast")) s.beta_fast = number("beta_fast");
      if (value("beta_slow")) s.beta_slow = number("beta_slow");
    }
  } else if (type == "longrope" || type == "su") {
    s.type = RopeScaling::Type::longrope;
    const auto list = [&](const char* k, float* out) {
      const nlohmann::json* v = value(k);
      FG_CHECK(v && v->is_array() && !v->empty() && v->size() <= RopeScaling::kMaxPairs,
               "{} key '{}.{}' must be a list of 1 to {} numbers", r.where(), key, k,
               RopeScaling::kMaxPairs);
      for (size_t i = 0; i < v->size(); ++i) {
        FG_CHECK((*v)[i].is_number() && (*v)[i].get<double>() > 0,
                 "{} key '{}.{}[{}]' must be a positive number", r.where(), key, k, i);
        out[i] = (*v)[i].get<float>();
      }
      return int32_t(v->size());
    };
    s.pairs = list("short_factor", s.short_factor);
    FG_CHECK(list("long_factor", s.long_factor) == s.pairs,
             "{} key '{}' has short_factor and long_factor of different lengths", r.where(), key);
    s.original_max_position = value("original_max_position_embeddings")
                                  ? number("original_max_position_embeddings")
                                  : double(r.integer("original_max_position_embeddings"));
    const double scale =
        value("factor") ? number("factor") : double(max_position) / s.original_max_position;
    s.attention_factor = value("attention_factor") ? number("attention_factor")
                         : scale <= 1
                             ? 1.0
                             : std::sqrt(1 + std::log(scale) / std::log(s.original_max_position));
  } else {
    FG_CHECK(type == "default",
             "{} key '{}' has rope_type '{}'; fitgrad implements default, linear, llama3, "
             "dynamic, yarn and longrope",
             r.where(), key, type);
  }
  for (const auto& [k, v] : o.items())
    FG_CHECK(read.count(k),
             "{} key '{}.{}' is not used by rope_type '{}' (fitgrad does not know what it "
             "changes)",
             r.where(), key, k, type);
  FG_CHECK(s.type == RopeScaling::Type::none || s.factor >= 1,
           "{} key '{}.factor' is {}; it must be at least 1", r.where(), key, s.factor);
  FG_CHECK(s.type != RopeScaling::Type::llama3 ||
               (s.low_freq_factor > 0 && s.low_freq_factor < s.high_freq_factor &&
                s.original_max_position > 0),
           "{} key '{}' needs 0 < low_freq_factor ({}) < high_freq_factor ({}) and a positive "
           "original_max_position_embeddings ({})",
           r.where(), key, s.low_freq_factor, s.high_freq_factor, s.original_max_position);
  return s;
}

ModelConfig read_llama(Reader& r, const std::string& type) {
  const bool gemma2 = type == "gemma2";
  ModelConfig m;
  m.model_type = m.name = type;
  m.family = Family::llama;
  m.vocab_size = r.integer("vocab_size");
  m.hidden_size = r.integer("hidden_size");
  m.intermediate_size = r.integer("intermediate_size");
  m.num_layers = r.integer("num_hidden_layers");
  m.num_heads = r.integer("num_attention_heads");
  m.num_kv_heads = r.integer("num_key_value_heads", m.num_heads);
  m.max_position_embeddings = r.integer("max_position_embeddings");
  m.norm_eps = r.number("rms_norm_eps");
  m.rope_theta = r.number("rope_theta", 10000.0);
  m.head_dim = r.integer("head_dim", 0);
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  m.tie_word_embeddings = r.boolean("tie_word_embeddings", gemma);
  m.initializer_range = r.number("initializer_range", 0.02);
  if (gemma) {
    // Gemma2Config's and Gemma3TextConfig's keys and defaults (Note [Gemma blocks]).
    m.gemma = true;
    m.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256);
    m.attn_logit_softcapping = r.number_or_none("attn_logit_softcapping", gemma2 ? 50 : 0);
    m.final_logit_softcapping = r.number_or_none("final_logit_softcapping", gemma2 ? 30 : 0);
    m.sliding_window = r.integer("sliding_window", 4096);
    m.sliding_window_pattern = gemma2 ? 2 : r.integer("sliding_window_pattern", 6);
    if (!gemma2) {
      m.qk_norm = true;
      m.rope_local_theta = r.number("rope_local_base_freq", 10000.0);
    }
    const std::string act = r.string("hidden_activation", "gelu_pytorch_tanh");
    FG_CHECK(act == "gelu_pytorch_tanh",
             "{} key 'hidden_activation' is '{}'; fitgrad's {} MLP is GeGLU with the tanh GELU",
             r.where(), act, type);
    // Gemma 2's first configs repeat the window as sliding_window_size.
    r.ignore(
        {"hidden_act", "cache_implementation", "final_w", "attention_bias", "sliding_window_size"});
    if (r.has("layer_types")) {  // newer configs list the pattern (sliding_window_pattern)
      const nlohmann::json& types = r.at("layer_types");
      FG_CHECK(types.is_array() && int64_t(types.size()) == m.num_layers,
               "{} key 'layer_types' must list the {} layers", r.where(), m.num_layers);
      for (int64_t i = 0; i < m.num_layers; ++i)
        FG_CHECK(types[size_t(i)] == (m.layer_slides(i) ? "sliding_attention" : "full_attention"),
                 "{} key 'layer_types' gives layer {} {}; its sliding_window_pattern {} makes it "
                 "{}",
                 r.where(), i, types[size_t(i)].dump(), m.sliding_window_pattern,
                 m.layer_slides(i) ? "sliding_attention" : "full_attention");
    }
  }
  if (type == "qwen2") {
    m.attention_qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
    FG_CHECK(!r.boolean("use_sliding_window", false),
             "{} key 'use_sliding_window' true is not supported", r.where());
    r.ignore({"sliding_window", "max_window_layers"});
  } else {
    const bool bias = r.boolean("attention_bias", false);
    m.attention_qkv_bias = m.attention_out_bias = bias;
    m.mlp_bias = r.boolean("mlp_bias", false);
  }
  if (type == "mistral" || type == "phi3") m.sliding_window = r.integer("sliding_window", 0);
  if (type == "phi3") {
    // Phi3ForCausalLM: fused qkv_proj and gate_up_proj; its dropouts are zero as released.
    m.fused_projections = true;
    for (const char* k : {"resid_pdrop", "embd_pdrop"})
      FG_CHECK(r.number(k, 0.0) == 0, "{} key '{}' above 0 is not supported", r.where(), k);
    FG_CHECK(r.number("partial_rotary_factor", 1.0) == 1.0,
             "{} key 'partial_rotary_factor' below 1 is not supported (RoPE on every pair)",
             r.where());
    r.ignore({"original_max_position_embeddings"});
  }
  if (type == "qwen3") {
    m.qk_norm = true;
    FG_CHECK(!r.boolean("use_sliding_window", false),
             "{} key 'use_sliding_window' true is not supported", r.where());
    if (r.has("layer_types"))
      for (const auto& t : r.at("layer_types"))
        FG_CHECK(t == "full_attention",
                 "{} key 'layer_types' holds {}; fitgrad's qwen3 layers are full_attention",
                 r.where(), t.dump());
    r.ignore({"sliding_window", "max_window_layers"});
  }
  if (!gemma) {
    const std::string act = r.string("hidden_act", "silu");
    FG_CHECK(act == "silu", "{} key 'hidden_act' is '{}'; fitgrad's {} MLP is SwiGLU (silu)",
             r.where(), act, type);
  }
  // Note [Reading RoPE scaling]
  m.rope_scaling = read_rope_scaling(r, &m.rope_theta, m.max_position_embeddings);
  if (m.rope_scaling.type == RopeScaling::Type::longrope)
    FG_CHECK(m.rope_scaling.pairs == m.resolved_head_dim() / 2,
             "{} key 'rope_scaling' has factors for {} pairs; head dim {} has {}", r.where(),
             m.rope_scaling.pairs, m.resolved_head_dim(), m.resolved_head_dim() / 2);
  FG_CHECK(!r.boolean("rope_interleaved", false),
           "{} key 'rope_interleaved' true is not supported (fitgrad uses rotate_half)", r.where());
  m.attn_pdrop = r.number("attention_dropout", 0.0);  // Note [Dropout as configured]
  r.ignore({"pretraining_tp", "is_llama_config", "use_sliding_window"});
  return m;
}

}  // namespace

ModelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  FG_CHECK(j.is_object(), "[config {}] the top level must be a JSON object, got {}", source,
           j.type_name());
  FG_CHECK(j.contains("model_type"), "[config {}] missing key 'model_type'", source);
  FG_CHECK(j.at("model_type").is_string(), "[config {}] key 'model_type' must be a string", source);
  const std::string type = j.at("model_type").get<std::string>();
  // Note [Multimodal folders] in text_config.cpp: the text model of a gemma3 folder.
  if (is_multimodal_config(j)) return config_from_json(text_model_config(j, source), source);
  Reader r(j, source, type);
  ModelConfig m;
  if (type == "gpt2") {
    m = read_gpt2(r);
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
             type == "phi3" || type == "gemma2" || type == "gemma3_text") {
    m = read_llama(r, type);
  } else {
    throw Error(fmt::format(
        "[config {}] key 'model_type' is '{}'; supported: gpt2, llama, mistral, qwen2, qwen3, "
        "phi3, gemma2, gemma3_text and gemma3 (its text model)",
        source, type));
  }
  r.ignore({"model_type", "architectures", "torch_dtype", "transformers_version", "_name_or_path",
            "bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "tokenizer_class",
            "max_length", "dtype"});
  r.reject_unknown();
  m.validate(r.where(), /*json_keys=*/true);
  return m;
}

ModelConfig load_config_json(const std::string& path) {
  return config_from_json(io::read_json_file(path, "[config " + path + "]"), path);
}

}  // namespace fitgrad::nn
