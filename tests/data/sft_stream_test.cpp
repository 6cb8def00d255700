// The layouts of instruction data (data/sft_stream.h): best-fit-decreasing bins against the
// rule simulated by brute force and a worked instance; each layout's tokens, trained flags and
// positions for examples written out by hand; every trained target kept exactly once and
// none crossing from one example into the next; and the loader's packed batches (positions
// and example bounds per row, Note [Packed batches] in data/loader.cpp).
#include "data/sft_stream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "data/loader.h"
#include "data/sft_cache.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::data {
namespace {

// Best fit decreasing written out plainly: longest first (earlier on ties), into the bin with
// the least room that holds it (the earlier on ties), else a new bin.
std::vector<std::vector<size_t>> bfd_reference(const std::vector<int64_t>& sizes, int64_t cap) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<size_t>> bins;
  std::vector<int64_t> room;
  for (const size_t i : order) {
    size_t best = bins.size();
    for (size_t b = 0; b < bins.size(); ++b)
      if (room[b] >= sizes[i] && (best == bins.size() || room[b] < room[best])) best = b;
    if (best == bins.size()) {
      bins.emplace_back();
      room.push_back(cap);
    }
    bins[best].push_back(i);
    room[best] -= sizes[i];
  }
  return bins;
}

TEST(SftStream, BestFitDecreasingFollowsTheRule) {
  // 7 5 4 3 2 1 into bins of 10: {7, 3}, {5, 4, 1}, {2}.
  EXPECT_EQ(bfd_bins({3, 5, 7, 2, 4, 1}, 10),
            (std::vector<std::vector<size_t>>{{2, 0}, {1, 4, 5}, {3}}));
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t cap = 16 + trial;
    std::vector<int64_t> sizes(size_t(1 + trial * 3));
    for (int64_t& x : sizes) x = 1 + int64_t(rng() % uint32_t(cap));
    const auto bins = bfd_bins(sizes, cap);
    EXPECT_EQ(bins, bfd_reference(sizes, cap)) << trial;
    std::vector<int> placed(sizes.size());
    for (const auto& bin : bins) {
      int64_t used = 0;
      for (const size_t i : bin) used += sizes[i], ++placed[i];
      EXPECT_LE(used, cap);
    }
    EXPECT_EQ(placed, std::vector<int>(sizes.size(), 1));
  }
}

SftTokens example(int32_t first, int n, std::vector<uint8_t> trained) {
  SftTokens e;
  for (int i = 0; i < n; ++i) e.ids.push_back(first + i);
  e.trained = std::move(trained);
  return e;
}

TEST(SftStream, LayoutsWrittenOut) {
  // A: 3 tokens, the last two trained; B: 5 tokens, the last trained; C: 2 tokens, none
  // trained (dropped); D: 6 tokens, all trained (cut to 5 where cut).
  const std::vector<SftTokens> ex = {example(10, 3, {0, 1, 1}), example(20, 5, {0, 0, 0, 0, 1}),
                                     example(30, 2, {0, 0}), example(40, 6, {1, 1, 1, 1, 1, 1})};
  const int32_t p = 99;
  {
    const SftStream s = layout_examples(ex, 5, p, Packing::none);
    EXPECT_EQ(s.tokens,
              (std::vector<int32_t>{10, 11, 12, p, p, 20, 21, 22, 23, 24, 40, 41, 42, 43, 44, p}));
    EXPECT_EQ(s.trained, (std::vector<uint8_t>{0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0}));
    EXPECT_TRUE(s.positions.empty());
    EXPECT_EQ(s.lengths, (std::vector<int32_t>{3, 5, 5}));
    EXPECT_EQ(s.rows, 3);
    EXPECT_EQ(s.examples, 3);
    EXPECT_EQ(s.dropped, std::vector<size_t>{2});
    EXPECT_EQ(s.truncated, 1);
    EXPECT_EQ(s.trained_tokens, 2 + 1 + 4);
    EXPECT_EQ(s.real_tokens, 3 + 5 + 5);
  }
  {
    // Sizes 3, 5 and 6 in bins of 8, longest first: D -> bin 0 (room 2), B -> bin 1 (room
    // 3), A -> bin 1 (room 3 exactly: the least that holds it).
    const SftStream s = layout_examples(ex, 8, p, Packing::bfd);
    EXPECT_EQ(s.tokens, (std::vector<int32_t>{40, 41, 42, 43, 44, 45, p, p, 20, 21, 22, 23, 24, 10,
                                              11, 12, p}));
    EXPECT_EQ(s.trained, (std::vector<uint8_t>{0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0}));
    EXPECT_EQ(s.positions,
              (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0, 1, 0, 1, 2, 3, 4, 0, 1, 2, 0}));
    EXPECT_EQ(s.rows, 2);
    EXPECT_TRUE(s.lengths.empty());
    EXPECT_EQ(s.truncated, 0);
    EXPECT_EQ(s.trained_tokens, 2 + 1 + 5);
  }
  {
    // End to end in windows of 4, positions restarting where a window starts.
    const SftStream s = layout_examples(ex, 4, p, Packing::wrapped);
    EXPECT_EQ(s.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 22, 23, 24, 40, 41, 42, 43, 44,
                                              45, p, p, p}));
    EXPECT_EQ(s.trained, (std::vector<uint8_t>{0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0}));
    EXPECT_EQ(s.positions,
              (std::vector<int32_t>{0, 1, 2, 0, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 0, 1, 0}));
    EXPECT_EQ(s.rows, 4);
    EXPECT_EQ(s.trained_tokens, 2 + 1 + 5);
  }
  EXPECT_THROW(parse_packing("greedy"), Error);
}

TEST(SftStream, EveryTargetOnceAndNoneAcrossExamples) {
  std::mt19937 rng(9);
  std::vector<SftTokens> ex;
  for (int i = 0; i < 200; ++i) {
    const int n = 1 + int(rng() % 90);
    std::vector<uint8_t> trained(static_cast<size_t>(n));
    for (auto& f : trained) f = uint8_t(rng() % 3 == 0);
    ex.push_back(example(1000 * i, n, trained));
  }
  for (const Packing packing : {Packing::none, Packing::bfd, Packing::wrapped}) {
    const int64_t seq_len = 64;
    const SftStream s = layout_examples(ex, seq_len, -1, packing);
    int64_t want = 0;
    for (size_t i = 0; i < ex.size(); ++i)
      want += kept_targets(ex[i], packing == Packing::wrapped ? 1000 : seq_len);
    int64_t got = 0;
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      got += s.trained[i];
      // A trained token continues the example of the token before it, in the same row unless
      // wrapped rows cut it.
      if (s.trained[i]) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(s.tokens[i], s.tokens[i - 1] + 1) << i;
        if (packing == Packing::bfd) {
          EXPECT_NE(i % size_t(seq_len), 0u) << i;
        }
      }
      if (!s.positions.empty() && i % size_t(seq_len) != 0 && s.positions[i] != 0) {
        EXPECT_EQ(s.positions[i], s.positions[i - 1] + 1);
      }
    }
    EXPECT_EQ(got, want) << packing_name(packing);
    EXPECT_EQ(got, s.trained_tokens);
    EXPECT_EQ(int64_t(s.tokens.size()), s.rows * seq_len + 1);
  }
}

TEST(SftStream, LoaderGivesEachPackedRowItsExamples) {
  const std::vector<SftTokens> ex = {example(10, 3, {0, 1, 1}), example(20, 5, {0, 0, 0, 0, 1}),
                                     example(40, 6, {1, 1, 1, 1, 1, 1})};
  const SftStream s = layout_examples(ex, 8, 99, Packing::bfd);  // rows {D, pad}, {B, A}
  LoaderOptions o;
  o.batch_size = 2;
  o.seq_len = 8;
  o.order = DataOrder::sequential;
  Loader loader(s.tokens, o, "train", s.trained, s.positions);
  const Batch b = loader.next();
  EXPECT_EQ(b.positions.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0, 1, 0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(b.segments.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 6, 6, 0, 0, 0, 0, 0, 5, 5, 5,     // begins
                                  6, 6, 6, 6, 6, 6, 8, 8, 5, 5, 5, 5, 5, 8, 8, 8}));  // ends
  EXPECT_EQ(b.longest_example, 6);
  EXPECT_EQ(b.trained_targets, 2 + 1 + 5);
  // a position that breaks its example is refused
  std::vector<int32_t> broken = s.positions;
  broken[3] = 7;
  Loader bad(s.tokens, o, "train", s.trained, broken);
  testing::expect_error([&] { bad.next(); }, "[data train]", "breaks its example");
}

// Preference pairs: a pair's answers in rows 2i and 2i + 1, a pair with an answer left without
// a target dropped whole; the loader's batch of B pairs is the B chosen rows, then the B
// rejected rows of the same pairs (Note [Preference batches]), cut to the longest with lengths.
TEST(SftStream, PairsAreRowsTwoByTwoAndBatchesPutTheChosenFirst) {
  const std::vector<SftTokens> chosen = {example(10, 3, {0, 1, 1}), example(20, 2, {0, 0}),
                                         example(30, 4, {0, 0, 1, 1}), example(40, 2, {0, 1})};
  const std::vector<SftTokens> rejected = {example(50, 2, {0, 1}), example(60, 3, {0, 1, 1}),
                                           example(70, 3, {0, 1, 1}), example(80, 4, {0, 1, 1, 1})};
  const int32_t p = 99;
  const SftStream s = layout_pairs(chosen, rejected, 4, p);
  EXPECT_EQ(s.dropped, std::vector<size_t>{1});  // pair 1's chosen answer trains nothing
  EXPECT_EQ(s.examples, 3);
  EXPECT_EQ(s.rows, 6);
  EXPECT_EQ(s.lengths, (std::vector<int32_t>{3, 2, 4, 3, 2, 4}));  // each answer's
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{10, 11, 12, p,  50, 51, p, p,  30, 31, 32, 33, 70,
                                            71, 72, p,  40, 41, p,  p, 80, 81, 82, 83, p}));
  LoaderOptions o;
  o.batch_size = 2;
  o.seq_len = 4;
  o.order = DataOrder::sequential;
  o.pairs = true;
  Loader loader(s.tokens, o, "train", s.trained);
  EXPECT_EQ(loader.num_windows(), 3);
  EXPECT_EQ(loader.batches_per_epoch(), 1);
  const Batch b = loader.next();
  ASSERT_EQ(b.ids.shape(), (Shape{4, 4}));
  // Rows: pair 0 chosen, pair 2 chosen, pair 0 rejected, pair 2 rejected.
  EXPECT_EQ(b.ids.to_vector<int64_t>(),
            (std::vector<int64_t>{10, 11, 12, p, 30, 31, 32, 33, 50, 51, p, p, 70, 71, 72, p}));
  const int64_t x = kIgnoredTarget;
  EXPECT_EQ(b.targets.to_vector<int64_t>(),
            (std::vector<int64_t>{11, 12, x, x, x, 32, 33, x, 51, x, x, x, 71, 72, x, x}));
  EXPECT_EQ(b.trained_targets, 2 + 2 + 1 + 2);
  // Grouped by the pairs' lengths (the longer answer): one megabatch of 2 pairs, the longer
  // first (pair 1 of the stream, 4 tokens, then pair 0, 3), as LengthGroupedSampler orders.
  o.group_by_length = true;
  Loader grouped(s.tokens, o, "train", s.trained, {}, s.lengths);
  const Batch c = grouped.next();
  EXPECT_EQ(c.ids.to_vector<int64_t>(),
            (std::vector<int64_t>{30, 31, 32, 33, 10, 11, 12, p, 70, 71, 72, p, 50, 51, p, p}));
  EXPECT_EQ(c.row_targets, (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(grouped.epoch_positions(0), 16);
  // Cut to their longest: pair 0 alone in a batch of one is 3 tokens long.
  o.batch_size = 1;
  Loader one(s.tokens, o, "train", s.trained, {}, s.lengths);
  EXPECT_EQ(one.epoch_positions(0), 2 * 4 + 2 * 4 + 2 * 3);
}

// Packed pairs (Note [Packed pairs]): a batch's answers best fit decreasing into rows of
// seq_len, cut to the fullest; each answer an example of its own (positions from 0, its
// segment, its last target ignored), the rest of a row one padding example without targets;
// the spans, counts and stream rows answer by answer, the chosen first.
TEST(SftStream, PackedPairsFillRowsWithWholeAnswers) {
  const std::vector<SftTokens> chosen = {example(10, 3, {0, 1, 1}), example(30, 4, {0, 0, 1, 1})};
  const std::vector<SftTokens> rejected = {example(50, 2, {0, 1}), example(70, 3, {0, 1, 1})};
  const int32_t p = 99;
  const SftStream s = layout_pairs(chosen, rejected, 7, p);
  LoaderOptions o;
  o.batch_size = 2;
  o.seq_len = 7;
  o.order = DataOrder::sequential;
  o.pairs = true;
  o.pack_pairs = true;
  Loader loader(s.tokens, o, "train", s.trained, {}, s.lengths);
  const Batch b = loader.next();
  // Answers 3, 4, 2, 3 tokens long: 4 + 3 in row 0, 3 + 2 in row 1 and two of padding.
  ASSERT_EQ(b.ids.shape(), (Shape{2, 7}));
  EXPECT_EQ(b.ids.to_vector<int64_t>(),
            (std::vector<int64_t>{30, 31, 32, 33, 10, 11, 12, 70, 71, 72, 50, 51, p, p}));
  const int64_t x = kIgnoredTarget;
  EXPECT_EQ(b.targets.to_vector<int64_t>(),
            (std::vector<int64_t>{x, 32, 33, x, 11, 12, x, 71, 72, x, 51, x, x, x}));
  EXPECT_EQ(b.positions.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 0, 1, 0, 1}));
  EXPECT_EQ(b.segments.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 0, 0, 4, 4, 4, 0, 0, 0, 3, 3, 5, 5,     // begin
                                  4, 4, 4, 4, 7, 7, 7, 3, 3, 3, 5, 5, 7, 7}));  // end
  EXPECT_EQ(b.spans, (std::vector<RowSpan>{{0, 4, 7}, {0, 0, 4}, {1, 3, 5}, {1, 0, 3}}));
  EXPECT_EQ(b.row_targets, (std::vector<int64_t>{2, 2, 1, 2}));
  EXPECT_EQ(b.rows, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(b.trained_targets, 7);
  EXPECT_EQ(b.longest_example, 4);
  EXPECT_EQ(loader.epoch_positions(0), 14);
}

// The encodings' cache (data/sft_cache.h) gives back what was written, ids and trained flags,
// for its fingerprint and count only, and nothing from a damaged file.
TEST(SftCache, ReadsBackWhatItWroteAndNothingElse) {
  const std::string path = ::testing::TempDir() + "/sft-cache-test.tokens";
  const std::vector<SftTokens> ex = {example(10, 3, {0, 1, 1}), example(2147483000, 2, {1, 0}),
                                     example(7, 0, {})};
  write_sft_cache(path, "fp", ex, "[test]");
  const auto back = read_sft_cache(path, "fp", ex.size());
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), ex.size());
  for (size_t i = 0; i < ex.size(); ++i) {
    EXPECT_EQ((*back)[i].ids, ex[i].ids) << i;
    EXPECT_EQ((*back)[i].trained, ex[i].trained) << i;
  }
  EXPECT_EQ((*back)[0].num_trained, 2);
  EXPECT_FALSE(read_sft_cache(path, "other", ex.size()).has_value());
  EXPECT_FALSE(read_sft_cache(path, "fp", ex.size() + 1).has_value());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x55');
  }
  EXPECT_FALSE(read_sft_cache(path, "fp", ex.size()).has_value());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fitgrad::data
