// `fitgrad eval`: the perplexity of a model (any spec of train/model_source.h, with --adapter
// and --quantize nf4 as in generate) on a text file, in f32 or bf16, as the perplexity users
// compute with transformers: the text is tokenized whole, cut into windows, and each window's
// next-token predictions are scored (Note [Eval windows] in eval.cpp). The command ends with
// a summary line and a JSON line {"tokens": N, "nll": x, "ppl": y}.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "apps/inference_model.h"

namespace CLI {
class App;
}

namespace fitgrad::apps {

// The model options (inference_model.h: a spec, in f32 or bf16, optionally in 4 bits and with
// a LoRA adapter, as a fine-tune is compared with its base), then the evaluation's own.
struct EvalOptions : InferenceModelOptions {
  std::string data;  // a UTF-8 text file
  int64_t seq_len = 512;
  int64_t max_windows = 0;  // 0: every window
  int64_t batch_size = 1;   // windows of one length per forward
};

struct EvalStats {
  int64_t windows = 0;
  int64_t scored_tokens = 0;
  double mean_nll = 0;  // nats per scored token
  double seconds = 0;   // the windows' forwards, not the load
  int64_t peak_bytes = 0;
};

// Runs the evaluation, writing one line per window to `out`; throws fitgrad::Error on bad
// input (naming the flag or the file).
EvalStats evaluate(const EvalOptions& options, std::ostream& out);

void add_eval_command(CLI::App& app);

}  // namespace fitgrad::apps
