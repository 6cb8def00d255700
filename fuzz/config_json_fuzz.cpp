// libFuzzer target for the config.json reader (nn::config_from_json, nn/config.cpp). The
// input is parsed as JSON by nlohmann (its own parser is not under test: invalid JSON is
// skipped) and read as a Hugging Face config. fitgrad::Error is the expected outcome for a
// config fitgrad cannot build; anything else (a crash, a sanitizer report, a
// nlohmann::json exception leaking out, InternalError) is a bug. A config that reads must
// also pass validate() and give a positive parameter count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "nn/config.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const fitgrad::nn::ModelConfig c = fitgrad::nn::config_from_json(j, "fuzz.json");
    c.validate();
    if (c.num_parameters() <= 0 || c.resolved_head_dim() <= 0) std::abort();
  } catch (const fitgrad::Error&) {
  }
  return 0;
}
