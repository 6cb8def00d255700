// Choosing the next token from a model's logits: temperature, top-k and top-p (nucleus)
// filtering, then one draw from fitgrad's Philox Generator, so a seed fixes the tokens.
//
// Note [Sampling semantics]
// As Hugging Face's generate() with do_sample, in its order:
//   - temperature 0 is greedy decoding: the argmax (the lowest id among equal maxima);
//   - otherwise the logits are divided by the temperature and softmaxed (in double);
//   - top_k > 0 keeps the k most probable tokens (ties at the k-th probability broken
//     toward lower ids, so exactly k remain);
//   - top_p < 1 then keeps, of what is left (renormalised), the smallest set of most
//     probable tokens whose cumulative probability reaches top_p, and always at least one;
//   - the kept probabilities are renormalised and one uniform u in [0, 1) from the
//     generator picks the token where the running sum over ids (in id order) first
//     exceeds u.
// One draw per sampled token (none when greedy), so the generator's offset counts the
// sampled tokens and a run resumed from its state continues the same sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/random/generator.h"
#include "tensor/tensor.h"

namespace fitgrad::nn {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0: greedy
  int64_t top_k = 0;         // >= 0; 0: off
  double top_p = 1.0;        // in (0, 1]; 1: off
  // Throws "[sampling] ..." naming the first value out of range.
  void validate() const;
};

// The distribution the next token is drawn from (Note [Sampling semantics]): one
// probability per id of `logits` (a 1-d float tensor of V entries), zero for filtered ids,
// summing to 1; one-hot at the argmax for temperature 0.
std::vector<double> sampling_distribution(const Tensor& logits, const SamplingOptions& options);

// The next token: the argmax for temperature 0, else a draw from sampling_distribution
// with one uniform reserved from `generator`.
int32_t sample_token(const Tensor& logits, const SamplingOptions& options, Generator& generator);

}  // namespace fitgrad::nn
