// The model of an inference command (see inference_model.h).
#include "apps/inference_model.h"

#include <fmt/format.h>

#include <memory>

#include "nn/lora.h"
#include "nn/lora_adapter.h"
#include "nn/nf4_linear.h"
#include "nn/target_modules.h"
#include "tensor/error.h"
#include "train/checkpoint_dir.h"

namespace fitgrad::apps {

using train::kInitHelp;
using train::kModelSpecHelp;
using train::kSkipVerificationFlag;
using train::kSkipVerificationHelp;
using train::load_model;
using train::LoadedModel;
using train::verify_before_reading;

void add_inference_model_options(CLI::App& cmd, InferenceModelOptions& o) {
  cmd.add_option("--model", o.model, kModelSpecHelp)->required();
  cmd.add_option("--init", o.init, kInitHelp);
  cmd.add_option("--device", o.device, "cpu or cuda[:i] (default cpu)");
  cmd.add_option("--dtype", o.dtype, "f32 or bf16 (default f32)");
  cmd.add_option("--quantize", o.quantize,
                 "nf4: hold every linear weight and the embedding in 4 bits, decoding from the "
                 "4-bit codes");
  cmd.add_option("--bnb_4bit_quant_type", o.quant_type, "nf4 or fp4 (with --quantize)");
  cmd.add_flag("--bnb_4bit_use_double_quant", o.double_quant,
               "quantize the 4-bit absmaxes too (4.127 instead of 4.5 bits per weight)");
  cmd.add_option("--adapter", o.adapter,
                 "a PEFT LoRA adapter directory to apply over the model (unmerged)");
  cmd.add_flag(kSkipVerificationFlag, o.skip_verification, kSkipVerificationHelp);
}

DType inference_dtype(const char* command, const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  throw Error(fmt::format("[{}] --dtype must be f32 or bf16, got '{}'", command, name));
}

LoadedModel load_inference_model(const char* command, const InferenceModelOptions& o) {
  FG_CHECK(!o.model.empty(), "[{}] --model is required", command);
  nn::BuildOptions build;
  build.device = Device::parse(o.device);
  build.dtype = inference_dtype(command, o.dtype);
  build.seed = o.seed;
  // Note [Generating from a 4-bit base]
  FG_CHECK(o.quantize.empty() || o.quantize == "nf4",
           "[{}] --quantize must be nf4 (or absent), got '{}'", command, o.quantize);
  const ops::FourBitOptions four_bit = nn::bnb_4bit_options(o.quant_type, o.double_quant, command);
  nn::LinearFactory base;
  if (!o.quantize.empty()) {
    base = nn::nf4_factory(four_bit);
    build.linear_factory = base;
    build.quantized_embedding = four_bit;
  }
  std::shared_ptr<nn::TargetModules> targets;
  if (!o.adapter.empty()) {
    verify_before_reading(o.adapter, std::string(command) + " --adapter", o.skip_verification);
    const nn::AdapterConfig adapter = nn::read_adapter_config(o.adapter);
    targets = std::make_shared<nn::TargetModules>(nn::TargetModules::parse(adapter.target_modules));
    build.linear_factory =
        nn::targeted_factory(targets, nn::lora_factory(adapter.lora, base), base);
  }
  LoadedModel loaded =
      load_model(o.model, o.init, build, o.skip_verification, std::string(command) + " --model");
  if (targets) {
    nn::check_targets_found(*targets);
    nn::load_lora_adapter(*loaded.model, o.adapter);
  }
  return loaded;
}

}  // namespace fitgrad::apps
