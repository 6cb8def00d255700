// `fitgrad quantize` (see quantize.h).
#include "apps/quantize.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "apps/output_policy.h"
#include "io/bnb_4bit.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "nn/llama_names.h"
#include "nn/tensor_source.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "train/checkpoint_dir.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::folder_weights;
using train::kSkipVerificationFlag;
using train::kSkipVerificationHelp;
using train::verify_before_reading;

bool is_quantized_linear(const std::string& name, const Shape& shape) {
  if (shape.size() != 2 || !name.ends_with(".weight")) return false;
  for (const char* skip : {"embed_tokens", "wte", "wpe", "lm_head"})
    if (name.find(skip) != std::string::npos) return false;
  return true;
}

int64_t quantize_model_file(const QuantizeArgs& a, std::ostream& out) {
  FG_CHECK(a.nf4 != a.fp4, "[quantize] give exactly one of --nf4 and --fp4");
  const bool gguf = a.in.ends_with(".gguf");
  const bool folder = std::filesystem::is_directory(a.in);
  FG_CHECK(gguf || folder || a.in.ends_with(".safetensors"),
           "[quantize] {}: the input must be a .safetensors or a .gguf file, or a model folder",
           a.in);
  FG_CHECK(a.out.ends_with(".safetensors"), "[quantize] {}: the output must end in .safetensors",
           a.out);
  FG_CHECK(a.dtype == "bf16" || a.dtype == "f16" || a.dtype == "f32",
           "[quantize] --dtype must be bf16, f16 or f32, got '{}'", a.dtype);
  FG_CHECK(a.blocksize >= 32 && a.blocksize <= 4096 && (a.blocksize & (a.blocksize - 1)) == 0,
           "[quantize] --blocksize must be a power of two from 32 to 4096, got {}", a.blocksize);
  verify_before_reading(a.in, "quantize IN", a.skip_verification);
  OutputPolicy outputs("quantize", a.overwrite);  // Note [Output policy]
  outputs.input("IN", a.in);
  const size_t output = outputs.output("OUT", a.out);
  const ops::FourBitOptions options{a.nf4 ? quant::FourBitType::nf4 : quant::FourBitType::fp4,
                                    a.blocksize, !a.no_double_quant};
  // Note [GGUF input]
  // A GGUF model's tensors are decoded one at a time under their Hugging Face names (Q and K
  // rows unpermuted, nn/llama_names.h), to f32 for quantization; the tensors that stay
  // dense are written in --dtype (bf16 by default, the dtype of the published checkpoints
  // such files come from), which the quant states also record as the weights' dtype.
  std::optional<io::SafetensorsFile> st;
  std::optional<io::GgufFile> gg;
  nn::TensorSource source;
  std::string arch = "llama";  // a GGUF file's architecture, which its tensor names depend on
  if (gguf) {
    gg.emplace(io::GgufFile::open(a.in));
    source = nn::llama_gguf_source(*gg, DType::f32);
    if (gg->metadata().has("general.architecture"))
      arch = gg->metadata().get_string("general.architecture");
  } else if (folder) {
    // A model folder's weights (Note [Sharded model folders]), a 4-bit folder's refused: its
    // source reads its weights dequantized, and they would be quantized twice.
    std::string file;
    source = folder_weights(a.in, &file);
    for (const auto& entry : std::filesystem::directory_iterator(a.in))
      if (entry.path().extension() == ".safetensors") {
        const io::SafetensorsFile shard = io::SafetensorsFile::open(entry.path().string());
        for (const io::SafetensorsEntry& e : shard.entries())
          FG_CHECK(!io::is_bnb_4bit(shard, e.name), "[quantize] {}: '{}' is already quantized",
                   entry.path().string(), e.name);
      }
  } else {
    st.emplace(io::SafetensorsFile::open(a.in));
    for (const io::SafetensorsEntry& e : st->entries()) {
      FG_CHECK(!io::is_bnb_4bit(*st, e.name), "[quantize] {}: '{}' is already quantized", a.in,
               e.name);
      // Note [Int8 weights as parameters] in nn/int8_linear.h: codes, scales and zeros.
      FG_CHECK(!e.name.ends_with(".weight_scales"),
               "[quantize] {}: '{}' is an int8 weight (a --weights_int8 run's u8 codes with its "
               "scales and zeros), which quantize does not read: write the model dense first "
               "with `fitgrad export --base <its checkpoint> -o <folder>` and quantize the "
               "folder",
               a.in, e.name.substr(0, e.name.size() - std::string("_scales").size()));
      source.entries.push_back({e.name, e.shape, e.dtype});
    }
    source.read = [&st](const std::string& name) { return st->tensor(name); };  // a view
  }
  const DType dense_dtype = a.dtype == "f16"   ? DType::f16
                            : a.dtype == "f32" ? DType::f32
                                               : DType::bf16;
  std::vector<std::pair<std::string, Tensor>> entries;
  int64_t quantized = 0, weights = 0, stored = 0, bytes_in = 0, bytes_out = 0;
  for (const nn::TensorSource::Entry& e : source.entries) {
    Tensor t = source.read(e.name);
    bytes_in +=
        gguf ? int64_t(gg->info(*nn::hf_to_llama_cpp_name(e.name, arch)).nbytes) : t.nbytes();
    const DType original = gguf ? dense_dtype : t.dtype();
    if (!is_quantized_linear(e.name, t.shape()) || !is_floating(t.dtype())) {
      if (gguf) t = t.to(original);  // the mapping's view for safetensors
      entries.emplace_back(e.name, t);
      bytes_out += t.nbytes();
      continue;
    }
    ops::FourBit q;
    {
      const MemoryContextScope scope({Category::quantized_weight, intern_label(e.name)});
      const Tensor f32 = t.to(DType::f32).contiguous();  // Note [Streaming quantization]
      q = ops::quantize_4bit(f32, options);
    }
    for (auto& entry : io::bnb_4bit_entries(e.name, q, original)) {
      bytes_out += entry.second.nbytes();
      entries.push_back(std::move(entry));
    }
    ++quantized;
    weights += t.numel();
    stored += q.nbytes();
  }
  FG_CHECK(quantized > 0, "[quantize] {} has no linear weight to quantize", a.in);
  io::write_safetensors(outputs.file(output), outputs.where(output), entries, {{"format", "pt"}});
  outputs.commit(out);
  out << fmt::format(
      "quantized {} linear weights ({} values) to {} with block size {}{}: {:.3f} bits per "
      "weight; {} -> {} bytes\n",
      quantized, weights, a.nf4 ? "NF4" : "FP4", a.blocksize,
      a.no_double_quant ? "" : " and double quantization", 8.0 * double(stored) / double(weights),
      bytes_in, bytes_out);
  return quantized;
}

CLI::App* add_quantize_command(CLI::App& app, QuantizeArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a safetensors model with its linear weights in bitsandbytes' 4-bit format (NF4 or "
      "FP4, as transformers saves a *-bnb-4bit model)");
  cmd->add_option("IN", a.in, "the input .safetensors or Llama .gguf file")->required();
  cmd->add_option("OUT", a.out, "the output .safetensors file")->required();
  cmd->add_flag("--nf4", a.nf4, "NF4 codes (QLoRA's)");
  cmd->add_flag("--fp4", a.fp4, "bitsandbytes' FP4 codes");
  cmd->add_option("--blocksize", a.blocksize, "values per absmax: 32 to 4096, a power of two")
      ->capture_default_str();
  cmd->add_flag("--no_double_quant", a.no_double_quant,
                "keep the absmaxes in f32 (4.5 bits per weight instead of 4.127)");
  cmd->add_option("--dtype", a.dtype,
                  "GGUF input: the dtype of the tensors left dense (bf16, f16 or f32)")
      ->capture_default_str();
  cmd->add_flag("--overwrite", a.overwrite, "replace an existing OUT file");
  cmd->add_flag(kSkipVerificationFlag, a.skip_verification, kSkipVerificationHelp);
  cmd->footer(
      "OUT is never IN (whatever the spelling), never inside a training run's directory or a "
      "checkpoint and never a special file; an existing file is replaced only with "
      "--overwrite, a write-protected or hard-linked one never (docs/run_promises.md).");
  return cmd;
}

}  // namespace fitgrad::apps
