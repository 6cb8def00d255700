// Grouped generation for GRPO (train/grouped_generation.h, Note [Grouped generation]) on
// llama-tiny with random weights: the completions do not depend on how rows are batched;
// completion 0 and greedy decoding equal generate_after's unbatched decoding with the same
// draws; rows stop at a stop id (not truncated) or at max_completion_length (truncated); the
// model's mode is restored and no cache memory outlives the call; the dry run on meta
// allocates exactly as a full-length run on the CPU, whose rows all stopped early; an id past
// the tokenizer's vocabulary (the model's embedding padded beyond it) decodes to nothing.
#include "train/grouped_generation.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tensor/backend/profile.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/nn/allocation_events.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/train/sft_model_folder.h"
#include "train/decode.h"

namespace fitgrad::train {
namespace {

using fitgrad::testing::expect_error;

LoadedModel tiny(Device device = Device::cpu()) {
  return load_model("llama-tiny", "", {.device = device, .seed = 7});
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {10, 20, 30, 40, 50}, {11, 21, 31, 41, 51}, {5, 6, 7, 8, 9, 10, 11}};

GroupGenerationOptions sampled(int64_t batch) {
  GroupGenerationOptions o;
  o.num_generations = 4;
  o.max_completion_length = 12;
  o.generation_batch_size = batch;
  o.sampling.temperature = 0.9;
  o.sampling.top_k = 40;
  return o;
}

std::vector<std::vector<int32_t>> ids_of(const std::vector<Completion>& completions) {
  std::vector<std::vector<int32_t>> out;
  for (const Completion& c : completions) out.push_back(c.ids);
  return out;
}

TEST(GroupedGeneration, CompletionsDoNotDependOnTheBatching) {
  LoadedModel m = tiny();
  std::vector<std::vector<std::vector<int32_t>>> runs;
  for (int64_t batch : {0, 1, 3, 8}) {  // a group, one row, a cut group, two groups at once
    Generator generator(123);
    const auto completions =
        generate_groups(*m.model, m.tokenizer.get(), kPrompts, sampled(batch), generator);
    ASSERT_EQ(completions.size(), 12u);
    for (size_t c = 0; c < completions.size(); ++c)
      EXPECT_EQ(completions[c].prompt, int64_t(c / 4));
    // The whole reservation is drawn, however early rows stop.
    EXPECT_EQ(generator.state(), (RngState{123, 12 * 12}));
    runs.push_back(ids_of(completions));
  }
  for (size_t r = 1; r < runs.size(); ++r) EXPECT_EQ(runs[r], runs[0]) << "run " << r;
  // Rows of one group differ (their draws are their own).
  EXPECT_NE(runs[0][0], runs[0][1]);
}

TEST(GroupedGeneration, EqualsUnbatchedDecodingWithTheSameDraws) {
  LoadedModel m = tiny();
  for (double temperature : {0.0, 0.9}) {
    GroupGenerationOptions o = sampled(0);
    o.sampling.temperature = temperature;
    o.stop_ids = generation_stop_ids(m);  // where generate_after stops
    Generator generator(5);
    const auto completions =
        generate_groups(*m.model, m.tokenizer.get(), {kPrompts[2]}, o, generator);
    DecodeOptions d;
    d.seed = 5;  // completion 0 draws from offset 0 of seed 5, as generate_after does
    d.max_new_tokens = o.max_completion_length;
    d.sampling = o.sampling;
    std::ostringstream sink;
    std::string text;
    generate_after(m, d, kPrompts[2], sink, &text);
    EXPECT_EQ(completions[0].text, text) << "temperature " << temperature;
    EXPECT_EQ(m.tokenizer->decode(completions[0].ids), text);
    EXPECT_TRUE(completions[0].truncated);
    if (temperature == 0) {  // greedy: every row of the group is the same
      for (const Completion& c : completions) EXPECT_EQ(c.ids, completions[0].ids);
    }
  }
}

TEST(GroupedGeneration, RowsStopAtAStopIdOrAreTruncated) {
  LoadedModel m = tiny();
  GroupGenerationOptions o = sampled(0);
  Generator free_run(9);
  const auto unstopped = generate_groups(*m.model, nullptr, {kPrompts[0]}, o, free_run);
  for (const Completion& c : unstopped) {
    EXPECT_TRUE(c.truncated);
    EXPECT_EQ(c.ids.size(), 12u);
    EXPECT_EQ(c.text, "");  // no tokenizer
  }
  // Row 1's token at position k (its first occurrence) becomes a stop id.
  const std::vector<int32_t>& row = unstopped[1].ids;
  size_t k = 1;
  while (std::find(row.begin(), row.begin() + std::ptrdiff_t(k), row[k]) !=
         row.begin() + std::ptrdiff_t(k))
    ++k;
  ASSERT_LT(k, row.size());
  o.stop_ids = {row[k]};
  Generator again(9);
  const auto stopped = generate_groups(*m.model, nullptr, {kPrompts[0]}, o, again);
  EXPECT_EQ(stopped[1].ids, std::vector<int32_t>(row.begin(), row.begin() + std::ptrdiff_t(k)));
  EXPECT_FALSE(stopped[1].truncated);
  EXPECT_EQ(stopped[1].stop, row[k]);            // the stop token that ended it, trained by GRPO
  for (size_t c = 0; c < stopped.size(); ++c) {  // every row is its unstopped prefix
    const auto& full = unstopped[c].ids;
    const auto stop = std::find(full.begin(), full.end(), row[k]);
    EXPECT_EQ(stopped[c].ids, std::vector<int32_t>(full.begin(), stop)) << c;
    EXPECT_EQ(stopped[c].truncated, stop == full.end()) << c;
    EXPECT_EQ(stopped[c].stop, stop == full.end() ? -1 : row[k]) << c;
  }
}

TEST(GroupedGeneration, RestoresTheModelsModeAndFreesTheCache) {
  LoadedModel m = tiny();
  m.model->train();
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t before = alloc.stats().allocated_bytes[kAllPools].current;
  alloc.reset_peak_stats();
  Generator generator(1);
  generate_groups(*m.model, nullptr, kPrompts, sampled(0), generator);
  EXPECT_TRUE(m.model->training());
  EXPECT_EQ(alloc.stats().allocated_bytes[kAllPools].current, before);
  // The cache was there: 2 layers x k and v x (4 rows, 2 kv heads, 5 + 11 positions, 16) x 4 B.
  EXPECT_GE(alloc.stats().allocated_bytes[kAllPools].peak - before, 2 * 2 * 4 * 2 * 16 * 16 * 4);
}

TEST(GroupedGeneration, PromptAndCompletionMustFitTheContext) {
  LoadedModel m = tiny();
  GroupGenerationOptions o = sampled(0);
  o.max_completion_length = m.model->config().max_position_embeddings;
  Generator generator(1);
  expect_error([&] { generate_groups(*m.model, nullptr, {kPrompts[0]}, o, generator); },
               "[generate] prompt 0's 5 tokens + max_completion_length", "--max_completion_length");
}

std::vector<fitgrad::testing::Seen> generation_events(Device device, bool full_length,
                                                      std::vector<Completion>* out) {
  CachingAllocator& alloc = allocator_for(device);
  alloc.empty_cache();
  LoadedModel m = tiny(device);
  const uint64_t first = alloc.total_events();
  GroupGenerationOptions o = sampled(8);
  o.full_length = full_length;
  for (int32_t id = 0; id < 200; ++id) o.stop_ids.push_back(id);  // every row stops early
  Generator generator(2);
  *out = generate_groups(*m.model, m.tokenizer.get(), kPrompts, o, generator);
  return fitgrad::testing::events_since(alloc, first);
}

TEST(GroupedGeneration, MetaPlansTheFullLengthRunEventForEvent) {
  const backend::MetaTargetScope target(backend::host_cpu_profile());
  std::vector<Completion> cpu_out, meta_out;
  const auto cpu = generation_events(Device::cpu(), true, &cpu_out);
  const auto meta = generation_events(Device::meta(), true, &meta_out);
  ASSERT_GT(cpu.size(), 50u);
  EXPECT_TRUE(cpu == meta) << cpu.size() << " events on the CPU, " << meta.size() << " on meta";
  for (const Completion& c : cpu_out) EXPECT_FALSE(c.truncated);
  // Without full_length the CPU run ends its batches early: fewer events than the plan.
  EXPECT_LT(generation_events(Device::cpu(), false, &cpu_out).size(), cpu.size());
  ASSERT_EQ(meta_out.size(), 12u);
  for (const Completion& c : meta_out) {
    EXPECT_TRUE(c.truncated);
    EXPECT_EQ(c.ids, std::vector<int32_t>(12, 0));
  }
}

// The tiny model folder's embedding has 704 rows and its tokenizer 700 ids: sampled ids
// 700-703 are trained but, as the Hugging Face tokenizers' decode skips ids it does not know,
// write no text.
TEST(GroupedGeneration, IdsPastTheTokenizerDecodeToNothing) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "padded_vocab";
  const LoadedModel m = load_model(fitgrad::testing::write_sft_model_folder(dir), "", {.seed = 3});
  ASSERT_EQ(m.tokenizer->vocab_size(), 700);
  GroupGenerationOptions o;
  o.num_generations = 4;
  o.max_completion_length = 60;
  Generator generator(5);
  const auto completions =
      generate_groups(*m.model, m.tokenizer.get(), {{10, 20, 30}}, o, generator);
  int padded = 0;
  for (const Completion& c : completions) {
    std::vector<int32_t> known;
    for (const int32_t id : c.ids) {
      if (id < 700) known.push_back(id);
      padded += id < 700 ? 0 : 1;
    }
    EXPECT_EQ(c.text, m.tokenizer->decode(known));
  }
  EXPECT_GT(padded, 0);  // the seed draws some
}

}  // namespace
}  // namespace fitgrad::train
