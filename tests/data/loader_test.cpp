// Loader: windows, targets and order (sequential, and random epochs that visit every
// window once), determinism across seeds and worker counts, resume from a saved state
// (also across an epoch boundary), errors, shutdown with full queues, and the ledger's
// Category::data bytes; batches cut to their longest window, and grouped by length (the
// grouping against transformers' own, tests/golden/length_grouped). The token stream is mostly
// 0, 1, 2, ..., so a row's first id names its window (window w starts at token w*T).
#include "data/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "data/window_order.h"
#include "tensor/device_registry.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/card.h"

namespace fitgrad::data {
namespace {

using ::testing::HasSubstr;

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> t(size_t(n), 0);
  std::iota(t.begin(), t.end(), 0);
  return t;
}

LoaderOptions options_of(int64_t B, int64_t T, uint64_t seed = 0,
                         DataOrder order = DataOrder::random, int workers = 0, int prefetch = 2) {
  LoaderOptions o;
  o.batch_size = B;
  o.seq_len = T;
  o.seed = seed;
  o.order = order;
  o.num_workers = workers;
  o.prefetch = prefetch;
  return o;
}

// The batches as plain values, for comparing runs.
struct Plain {
  std::vector<int64_t> ids, targets;
  int64_t epoch, index;
  bool operator==(const Plain&) const = default;
};

Plain plain(const Batch& b) {
  return {b.ids.to_vector<int64_t>(), b.targets.to_vector<int64_t>(), b.epoch, b.index};
}

std::vector<Plain> take(Loader& loader, int64_t n) {
  std::vector<Plain> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(plain(loader.next()));
  return out;
}

// The windows of a batch over iota tokens, read back from the first id of each row.
std::vector<int64_t> windows_of(const Plain& p, int64_t B, int64_t T) {
  std::vector<int64_t> w;
  for (int64_t b = 0; b < B; ++b) w.push_back(p.ids[size_t(b * T)] / T);
  return w;
}

TEST(Loader, RowsAreWindowsAndTargetsAreShiftedIds) {
  // Random token values: rows must equal the stream at window starts, checked directly.
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(1000);
  for (int32_t& t : tokens) t = int32_t(rng() % 50257);
  const int64_t B = 3, T = 16;
  Loader loader(tokens, options_of(B, T, 0, DataOrder::sequential));
  EXPECT_EQ(loader.num_windows(), (1000 - 1) / T);
  EXPECT_EQ(loader.batches_per_epoch(), loader.num_windows() / B);
  for (int64_t i = 0; i < loader.batches_per_epoch(); ++i) {
    const Batch batch = loader.next();
    EXPECT_EQ(batch.ids.shape(), (Shape{B, T}));
    EXPECT_EQ(batch.targets.shape(), (Shape{B, T}));
    EXPECT_EQ(batch.ids.dtype(), DType::i64);
    EXPECT_EQ(batch.targets.dtype(), DType::i64);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = (i * B + b) * T;  // sequential: window i*B + b
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(batch.ids.at({b, t}), tokens[size_t(start + t)]);
        ASSERT_EQ(batch.targets.at({b, t}), tokens[size_t(start + t + 1)]);
      }
    }
  }
}

TEST(Loader, SequentialOrderGivesConsecutiveWindowsAndRollsOver) {
  const std::vector<int32_t> tokens = iota_tokens(10 * 8 + 5);  // 10 windows of T=8, tail dropped
  const int64_t B = 3, T = 8;
  Loader loader(tokens, options_of(B, T, 0, DataOrder::sequential));
  ASSERT_EQ(loader.num_windows(), 10);
  ASSERT_EQ(loader.batches_per_epoch(), 3);  // window 9 is dropped (drop_last)
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int64_t i = 0; i < 3; ++i) {
      const Plain p = plain(loader.next());
      EXPECT_EQ(p.epoch, epoch);
      EXPECT_EQ(p.index, i);
      EXPECT_EQ(windows_of(p, B, T), (std::vector<int64_t>{3 * i, 3 * i + 1, 3 * i + 2}));
    }
  }
  EXPECT_EQ(loader.state(), (LoaderState{3, 0, 0}));
}

TEST(Loader, WindowCountMatchesTheStrideRule) {
  struct Row {
    int64_t n, T, windows;  // windows = floor((n - 1) / T), by hand
  };
  for (const Row& r : {Row{9, 8, 1}, Row{8, 8, 0}, Row{17, 8, 2}, Row{16, 8, 1}, Row{2, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << r.n << " tokens, T " << r.T);
    const std::vector<int32_t> tokens = iota_tokens(r.n);
    if (r.windows == 0) {
      EXPECT_THROW(Loader(tokens, options_of(1, r.T)), Error);
      continue;
    }
    Loader loader(tokens, options_of(1, r.T, 0, DataOrder::sequential));
    EXPECT_EQ(loader.num_windows(), r.windows);
    // The last window's last target is inside the stream.
    for (int64_t i = 0; i < r.windows; ++i) {
      const Plain p = plain(loader.next());
      EXPECT_EQ(p.targets.back(), (i + 1) * r.T);
      EXPECT_LT(p.targets.back(), r.n);
    }
  }
}

TEST(Loader, RandomEpochVisitsEveryWindowOnce) {
  const int64_t B = 4, T = 8;
  for (int64_t windows : {40, 43}) {  // divisible by B, and with 3 left over
    SCOPED_TRACE(windows);
    const std::vector<int32_t> tokens = iota_tokens(windows * T + 1);
    Loader loader(tokens, options_of(B, T, 1234));
    ASSERT_EQ(loader.num_windows(), windows);
    std::vector<std::set<int64_t>> seen(3);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < loader.batches_per_epoch(); ++i) {
        const Plain p = plain(loader.next());
        ASSERT_EQ(p.epoch, epoch);
        for (int64_t w : windows_of(p, B, T)) {
          EXPECT_TRUE(seen[size_t(epoch)].insert(w).second) << "window " << w << " twice";
          order.push_back(w);
        }
        // Every row is a whole window: ids w*T .. w*T+T-1, targets one further.
        for (int64_t b = 0; b < B; ++b) {
          const int64_t w = order[size_t(i * B + b)];
          for (int64_t t = 0; t < T; ++t) {
            ASSERT_EQ(p.ids[size_t(b * T + t)], w * T + t);
            ASSERT_EQ(p.targets[size_t(b * T + t)], w * T + t + 1);
          }
        }
      }
      EXPECT_EQ(int64_t(seen[size_t(epoch)].size()), windows / B * B);
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_NE(order, sorted) << "epoch " << epoch << " is not shuffled";
    }
    if (windows % B == 0) {
      for (const auto& s : seen) EXPECT_EQ(*s.rbegin(), windows - 1);
    } else {
      EXPECT_NE(seen[0], seen[1]);  // the dropped windows change with the epoch
    }
  }
}

TEST(Loader, SameSeedSameBatchesOtherSeedOtherBatches) {
  const std::vector<int32_t> tokens = iota_tokens(64 * 16 + 1);
  Loader a(tokens, options_of(4, 16, 5)), b(tokens, options_of(4, 16, 5)),
      c(tokens, options_of(4, 16, 6));
  const std::vector<Plain> ra = take(a, 40), rb = take(b, 40), rc = take(c, 40);
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
  // Epochs differ from each other too (16 batches an epoch).
  EXPECT_NE(windows_of(ra[0], 4, 16), windows_of(ra[16], 4, 16));
}

TEST(Loader, WindowOrderIsUniformOverPermutations) {
  // 24000 seeds of a 4-window shuffle: each of the 24 permutations should come up about
  // 1000 times. Chi-square with 23 degrees of freedom stays below 49.7 with p = 0.999.
  std::map<std::vector<int64_t>, int> counts;
  const int kSeeds = 24000;
  for (int s = 0; s < kSeeds; ++s) counts[window_order(4, DataOrder::random, uint64_t(s), 0)]++;
  ASSERT_EQ(counts.size(), 24u);
  double chi2 = 0;
  for (const auto& [perm, count] : counts) chi2 += std::pow(count - 1000.0, 2) / 1000.0;
  EXPECT_LT(chi2, 49.7);
  // Position 0 of a 1000-window shuffle over epochs: uniform over the windows.
  int low = 0;
  for (int e = 0; e < 2000; ++e) low += window_order(1000, DataOrder::random, 3, e)[0] < 500;
  EXPECT_NEAR(low, 1000, 4 * std::sqrt(500.0));
  EXPECT_EQ(window_order(5, DataOrder::sequential, 9, 4), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(Loader, AnyWorkerCountGivesTheSameBatches) {
  const std::vector<int32_t> tokens = iota_tokens(50 * 8 + 3);
  Loader reference(tokens, options_of(4, 8, 77));  // 12 batches an epoch
  const std::vector<Plain> expected = take(reference, 30);
  for (int workers : {1, 2, 3, 5}) {
    for (int prefetch : {1, 4}) {
      SCOPED_TRACE(::testing::Message() << workers << " workers, prefetch " << prefetch);
      Loader loader(tokens, options_of(4, 8, 77, DataOrder::random, workers, prefetch));
      EXPECT_EQ(take(loader, 30), expected);
    }
  }
}

TEST(Loader, RestoreResumesExactly) {
  const std::vector<int32_t> tokens = iota_tokens(30 * 8 + 1);
  const int64_t bpe = 7;  // 30 windows / B=4
  for (int64_t k : {int64_t{0}, int64_t{3}, bpe - 1, bpe, bpe + 2, 2 * bpe + 5}) {
    for (int workers : {0, 2}) {
      SCOPED_TRACE(::testing::Message() << k << " batches, then " << workers << " workers");
      Loader uninterrupted(tokens, options_of(4, 8, 11));
      ASSERT_EQ(uninterrupted.batches_per_epoch(), bpe);
      take(uninterrupted, k);
      const LoaderState saved = uninterrupted.state();
      EXPECT_EQ(saved, (LoaderState{k / bpe, k % bpe, 11}));
      // Through JSON, as a checkpoint stores it.
      const nlohmann::json j = saved;
      EXPECT_EQ(j.dump(), fmt::format(R"({{"epoch":{},"index":{},"seed":11}})", k / bpe, k % bpe));
      Loader resumed(tokens, options_of(4, 8, 11, DataOrder::random, workers, 1));
      take(resumed, 2);  // some progress of its own, discarded by restore
      resumed.restore(j.get<LoaderState>());
      EXPECT_EQ(resumed.state(), saved);
      EXPECT_EQ(take(resumed, 2 * bpe), take(uninterrupted, 2 * bpe));
    }
  }
}

TEST(Loader, Errors) {
  const std::vector<int32_t> tokens = iota_tokens(1000);
  struct Row {
    LoaderOptions options;
    std::string message;
  };
  const Row rows[] = {
      {options_of(8, 256),
       "[data train] 1000 tokens give 3 windows of seq_len 256 + 1, fewer than batch_size 8"},
      {options_of(0, 16), "[data train] batch_size 0 is less than 1"},
      {options_of(2, 0), "[data train] seq_len 0 is less than 1"},
      {options_of(2, 16, 0, DataOrder::random, -1), "[data train] num_workers -1 is negative"},
      {options_of(2, 16, 0, DataOrder::random, 2, 0),
       "[data train] prefetch 0 is less than 1 with 2 workers"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.message);
    try {
      Loader loader(tokens, r.options);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), r.message);
    }
  }
  try {
    Loader loader(std::span<const int32_t>(tokens).first(100), options_of(8, 64), "val");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[data val] 100 tokens give 1 windows"));
  }
  Loader loader(tokens, options_of(2, 16, 3));
  EXPECT_THROW(loader.restore({0, 0, 4}), Error);                           // another seed
  EXPECT_THROW(loader.restore({0, loader.batches_per_epoch(), 3}), Error);  // not in an epoch
  EXPECT_THROW(loader.restore({-1, 0, 3}), Error);
}

// The loader lives on a thread of its own, watched: a destructor that does not return in
// 60 s fails the test and ends the process (a hung join cannot be undone), instead of
// waiting for ctest's timeout. Once it returns, every prefetched batch has been freed.
TEST(Loader, DestructorStopsWorkersWaitingOnFullQueues) {
  const std::vector<int32_t> tokens = iota_tokens(4096);
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const auto data_bytes = [&] { return cpu.by_category()[size_t(Category::data)].current; };
  for (int taken : {0, 1, 5}) {
    const int64_t before = data_bytes();
    int64_t held = 0;
    std::promise<void> destroyed;
    std::future<void> done = destroyed.get_future();
    std::thread owner([&] {
      {
        Loader loader(tokens, options_of(2, 16, 0, DataOrder::random, 3, 1));
        take(loader, taken);
        // Give the workers time to fill their queues and block on them.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        held = data_bytes() - before;
      }
      destroyed.set_value();
    });
    if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "the Loader destructor did not return within 60 s (taken " << taken << ")";
      std::fprintf(stderr, "Loader.DestructorStopsWorkersWaitingOnFullQueues: hung, exiting\n");
      std::_Exit(1);
    }
    owner.join();
    EXPECT_GT(held, 0) << "the workers prefetched nothing (taken " << taken << ")";
    EXPECT_EQ(data_bytes(), before) << "batches outlived the loader (taken " << taken << ")";
  }
}

TEST(Loader, BatchesAreDataInTheLedger) {
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const auto data_bytes = [&] { return cpu.by_category()[size_t(Category::data)].current; };
  const std::vector<int32_t> tokens = iota_tokens(1000);
  const int64_t B = 4, T = 16;  // B*T*8 = 512 bytes a tensor, one rounding unit
  const int64_t before = data_bytes();
  {
    const CategoryScope outer(Category::activation);  // the loader sets its own
    Loader loader(tokens, options_of(B, T));
    const Batch batch = loader.next();
    EXPECT_EQ(data_bytes() - before, 2 * B * T * 8);
    bool labelled = false;
    for (const auto& [label, bytes] : cpu.by_label()) {
      if (label_text(label) == "data.train") labelled = bytes >= 2 * B * T * 8;
    }
    EXPECT_TRUE(labelled);
  }
  EXPECT_EQ(data_bytes(), before);
  {
    // Batches built by workers are data too: all prefetched batches are counted.
    Loader loader(tokens, options_of(B, T, 0, DataOrder::random, 2, 3), "val");
    const Batch batch = loader.next();
    // The workers refill their queues: 2 workers * 3 batches, plus the one held here.
    const int64_t full = (1 + 2 * 3) * 2 * B * T * 8;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (data_bytes() - before < full && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(data_bytes() - before, full);
    bool labelled = false;
    for (const auto& [label, bytes] : cpu.by_label()) {
      if (label_text(label) == "data.val") labelled = bytes == full;
    }
    EXPECT_TRUE(labelled);
  }
  EXPECT_EQ(data_bytes(), before);
}

TEST(Loader, PinnedBatchesReachTheDevice) {
  FG_SKIP_WITHOUT_CARD();
  const std::vector<int32_t> tokens = iota_tokens(1000);
  LoaderOptions options = options_of(4, 16, 2, DataOrder::random, 2);
  options.pin_memory = true;
  options.device = Device::cuda(0);
  Loader on_device(tokens, options);
  Loader on_cpu(tokens, options_of(4, 16, 2));
  for (int i = 0; i < 5; ++i) {
    const Batch batch = on_device.next();
    EXPECT_EQ(batch.ids.device(), Device::cuda(0));
    EXPECT_EQ(plain(batch), plain(on_cpu.next()));
  }
}

// Note [Data-parallel shards]: rank r of N with batch B gives rows [r*B, (r+1)*B) of the
// single-process batch of N·B, batch after batch and across an epoch boundary, so the ranks'
// batches are disjoint and together are that batch.
TEST(Loader, DataParallelShardsTileTheGlobalBatch) {
  const std::vector<int32_t> tokens = iota_tokens(16 * 40 + 1);  // 40 windows of T=16
  for (int world : {2, 3}) {
    const int64_t B = 2, T = 16;
    Loader one(tokens, options_of(B * world, T, 11));
    std::vector<std::unique_ptr<Loader>> ranks;
    for (int r = 0; r < world; ++r) {
      LoaderOptions o = options_of(B, T, 11, DataOrder::random, r % 2);  // workers or not
      o.rank = r;
      o.world_size = world;
      ranks.push_back(std::make_unique<Loader>(tokens, o));
      EXPECT_EQ(ranks.back()->batches_per_epoch(), one.batches_per_epoch());
    }
    for (int64_t i = 0; i < one.batches_per_epoch() + 2; ++i) {
      const std::vector<int64_t> global = one.next().ids.to_vector<int64_t>();  // (N·B, T)
      for (int r = 0; r < world; ++r) {
        const std::vector<int64_t> mine = ranks[size_t(r)]->next().ids.to_vector<int64_t>();
        const std::vector<int64_t> want(global.begin() + r * B * T,
                                        global.begin() + (r + 1) * B * T);
        ASSERT_EQ(mine, want) << "world " << world << " rank " << r << " batch " << i;
      }
    }
  }
  LoaderOptions bad = options_of(2, 16);
  bad.world_size = 2;
  bad.rank = 2;
  EXPECT_THROW(Loader(tokens, bad), Error);
}

TEST(Loader, LengthGroupedOrderIsTransformers) {
  std::ifstream in(FITGRAD_GOLDEN_DIR "/length_grouped/cases.json");
  ASSERT_TRUE(in) << "tests/golden/length_grouped/cases.json is missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden.at("cases").size(), 6u);
  for (const nlohmann::json& c : golden.at("cases")) {
    const auto lengths = c.at("lengths").get<std::vector<int32_t>>();
    EXPECT_EQ(length_grouped_order(c.at("permutation").get<std::vector<int64_t>>(), lengths,
                                   c.at("batch_size").get<int64_t>()),
              c.at("order").get<std::vector<int64_t>>())
        << lengths.size() << " windows, batch " << c.at("batch_size");
  }
}

TEST(Loader, BatchesGroupedByLengthAreCutToTheirLongest) {
  const int64_t S = 16, n = 203;
  const std::vector<int32_t> tokens = iota_tokens(S * n + 1);
  std::vector<int32_t> lengths(static_cast<size_t>(n), 0);
  std::mt19937 rng(3);
  for (int32_t& x : lengths) x = 1 + int32_t(rng() % uint32_t(S));
  std::vector<uint8_t> trained(tokens.size(), 0);  // as data/sft_stream.h lays out one example
  for (int64_t w = 0; w < n; ++w)                  // a window: its first token and the
    for (int64_t t = 1; t < lengths[size_t(w)]; ++t) trained[size_t(w * S + t)] = 1;  // padding off
  for (const int world : {1, 2}) {
    const int64_t B = 3;
    std::vector<std::unique_ptr<Loader>> ranks;
    for (int r = 0; r < world; ++r) {
      LoaderOptions o = options_of(B, S, 7, DataOrder::random, r);
      o.rank = r;
      o.world_size = world;
      o.group_by_length = true;
      ranks.push_back(std::make_unique<Loader>(tokens, o, "train", trained,
                                               std::span<const int32_t>(), lengths));
    }
    const int64_t per_epoch = ranks[0]->batches_per_epoch();
    EXPECT_EQ(per_epoch, n / (B * world));
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const std::vector<int64_t> want =
          length_grouped_order(window_order(n, DataOrder::random, 7, epoch), lengths, B * world);
      std::vector<int64_t> positions(size_t(world), 0);
      for (int64_t i = 0; i < per_epoch; ++i)
        for (int r = 0; r < world; ++r) {
          const Batch batch = ranks[size_t(r)]->next();
          const int64_t first = (i * world + r) * B;
          int64_t longest = 0;
          for (int64_t b = 0; b < B; ++b)
            longest = std::max<int64_t>(longest, lengths[size_t(want[size_t(first + b)])]);
          ASSERT_EQ(batch.ids.shape(), (Shape{B, longest})) << "epoch " << epoch << " batch " << i;
          positions[size_t(r)] += B * longest;
          const std::vector<int64_t> ids = batch.ids.to_vector<int64_t>();
          const std::vector<int64_t> targets = batch.targets.to_vector<int64_t>();
          int64_t trained_targets = 0;
          for (int64_t b = 0; b < B; ++b) {
            const int64_t w = want[size_t(first + b)];
            for (int64_t t = 0; t < longest; ++t) {
              ASSERT_EQ(ids[size_t(b * longest + t)], w * S + t);
              const bool learn = t + 1 < lengths[size_t(w)];
              trained_targets += learn;
              ASSERT_EQ(targets[size_t(b * longest + t)], learn ? w * S + t + 1 : kIgnoredTarget);
            }
          }
          EXPECT_EQ(batch.trained_targets, trained_targets);
          if (i == 0 && r == 0) {  // the longest window of the epoch comes first
            EXPECT_EQ(longest, *std::max_element(lengths.begin(), lengths.end()));
          }
        }
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(ranks[size_t(r)]->epoch_positions(epoch), positions[size_t(r)]);
        EXPECT_LT(positions[size_t(r)], per_epoch * B * S);
      }
    }
  }
  EXPECT_THROW(Loader(tokens, options_of(2, S), "train", {}, {},
                      std::span<const int32_t>(lengths).first(10)),
               Error);
  // Without grouping the order is the epoch's own, and each batch is still cut to its longest.
  Loader cut(tokens, options_of(3, S, 7), "train", trained, {}, lengths);
  const std::vector<int64_t> order = window_order(n, DataOrder::random, 7, 0);
  for (int64_t i = 0; i < 5; ++i) {
    int64_t longest = 0;
    for (int64_t b = 0; b < 3; ++b)
      longest = std::max<int64_t>(longest, lengths[size_t(order[size_t(i * 3 + b)])]);
    const Batch batch = cut.next();
    ASSERT_EQ(batch.ids.shape(), (Shape{3, longest}));
    EXPECT_EQ(batch.ids.to_vector<int64_t>()[0], order[size_t(i * 3)] * S);
  }
  LoaderOptions grouped_without_lengths = options_of(2, S);
  grouped_without_lengths.group_by_length = true;
  EXPECT_THROW(Loader(tokens, grouped_without_lengths), Error);
}

}  // namespace
}  // namespace fitgrad::data
