// GPT-2 BPE encode throughput on 1 MiB of Jane Austen (data/tokenizer.h). The corpus is
// read from $FITGRAD_CORPUS, else the embedded data/assets/austen.txt (run from the
// repository root); the benchmark says so and skips when neither exists.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/bpe_tokenizer.h"

namespace {

std::string corpus_path() {
  if (const char* p = std::getenv("FITGRAD_CORPUS")) return p;
  return "data/assets/austen.txt";
}

void BM_Gpt2Encode1MiB(benchmark::State& state) {
  std::ifstream in(corpus_path(), std::ios::binary);
  if (!in) {
    state.SkipWithError(("corpus not found: " + corpus_path() + " (set FITGRAD_CORPUS)").c_str());
    return;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str().substr(0, size_t(1) << 20);
  const auto tok = fitgrad::data::BpeTokenizer::gpt2(fitgrad::data::gpt2_asset_dir());
  size_t ids = 0;
  for (auto _ : state) {
    auto out = tok.encode(text);
    ids = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * text.size()));
  state.counters["tokens"] = double(ids);
}
BENCHMARK(BM_Gpt2Encode1MiB)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
