// BPE encode throughput on 1 MiB of Jane Austen (data/tokenizer.h): GPT-2's files, and a
// Hugging Face tokenizer.json named by $FITGRAD_TOKENIZER_JSON (data/hf_tokenizer.h; skipped
// when unset; bench/tokenizer_json_hf.py times the `tokenizers` library on the same text).
// The corpus is read from $FITGRAD_CORPUS, else the embedded data/assets/austen.txt (run from
// the repository root); the benchmark says so and skips when neither exists.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/bpe_tokenizer.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"

namespace {

std::string corpus_path() {
  if (const char* p = std::getenv("FITGRAD_CORPUS")) return p;
  return "data/assets/austen.txt";
}

// The first MiB of the corpus, or "" (the state then carries the error).
std::string first_mib(benchmark::State& state) {
  std::ifstream in(corpus_path(), std::ios::binary);
  if (!in) {
    state.SkipWithError(("corpus not found: " + corpus_path() + " (set FITGRAD_CORPUS)").c_str());
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().substr(0, size_t(1) << 20);
}

void encode_loop(benchmark::State& state, const fitgrad::data::Tokenizer& tok,
                 const std::string& text) {
  size_t ids = 0;
  for (auto _ : state) {
    auto out = tok.encode(text);
    ids = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * text.size()));
  state.counters["tokens"] = double(ids);
}

void BM_TokenizerJsonEncode1MiB(benchmark::State& state) {
  const char* path = std::getenv("FITGRAD_TOKENIZER_JSON");
  if (!path) {
    state.SkipWithError("set FITGRAD_TOKENIZER_JSON to a tokenizer.json");
    return;
  }
  const std::string text = first_mib(state);
  if (text.empty()) return;
  const auto tok = fitgrad::data::tokenizer_from_vocabulary(
      fitgrad::data::hf_tokenizer_vocabulary(path), "[bench]");
  encode_loop(state, *tok, text);
}
BENCHMARK(BM_TokenizerJsonEncode1MiB)->Unit(benchmark::kMillisecond);

void BM_Gpt2Encode1MiB(benchmark::State& state) {
  const std::string text = first_mib(state);
  if (text.empty()) return;
  encode_loop(state, fitgrad::data::BpeTokenizer::gpt2(fitgrad::data::gpt2_asset_dir()), text);
}
BENCHMARK(BM_Gpt2Encode1MiB)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
