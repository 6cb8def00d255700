// Loading a model's Hugging Face weights into the same model built with LoRA and NF4 layers
// (nn/lora.h, nn/nf4_linear.h), as PEFT and transformers' bitsandbytes integration do:
// "X.weight" of an adapted Linear goes to "X.base_layer.weight" (and its bias likewise); the
// weight of an NF4 layer is quantized as it is loaded, one layer at a time (Note
// [Dequantized one layer at a time]); the LoRA factors, which the file does not have, keep
// their initialisation; the dense weight of an int8 layer (nn/int8_linear.h) is quantized to
// nearest as it loads, its codes, scales and zeros left out of the dense load. Every other name loads as Module::load does (strict), and one error
// names every missing, unexpected and misshaped entry before anything is changed. A source
// is read one entry at a time (Note [Streaming loads] in nn/tensor_source.h), so a QLoRA
// base never exists in more than 4 bits beyond one decoded tensor.
#pragma once

#include <map>
#include <string>

#include "nn/module.h"
#include "nn/tensor_source.h"

namespace fitgrad::nn {

void load_into_adapted(Module& model, const TensorSource& source);
void load_into_adapted(Module& model, const std::map<std::string, Tensor>& state);

}  // namespace fitgrad::nn
