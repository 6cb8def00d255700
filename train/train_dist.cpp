// The data-parallel parts of a `fitgrad train` run (train_dist.h).
#include "train/train_dist.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "dist/meta_group.h"
#include "dist/rendezvous.h"
#include "tensor/error.h"
#include "train/train_flags.h"

namespace fitgrad::train {

namespace {

// What data parallelism refuses, in a job and in the plan of one of its ranks alike.
void check_data_parallel_flags(const TrainArgs& a) {
  if (a.optim_in_backward)
    throw Error(
        "[train] --optim_in_backward cannot run data-parallel: a gradient is final only once "
        "its bucket is averaged across the ranks");
  if (a.zero_stage > 0 && (a.weights_int8 || a.offload_optimizer))
    throw Error(fmt::format(
        "[train] --zero_stage {} cannot run with {}: Note [ZeRO by whole parameters]", a.zero_stage,
        a.weights_int8 ? "--weights_int8 (its scales and zeros would need their own broadcast)"
                       : "--offload_optimizer (the update runs on the host masters)"));
}

}  // namespace

void setup_dist(TrainRun& r) {
  const auto env = dist::dist_env_from_environment();
  const TrainArgs& a = r.a;
  if (env && r.dry_run)
    throw Error(
        "[train] --device meta plans one process; run the dry run without a launcher "
        "(RANK/WORLD_SIZE unset), and plan a rank with `fitgrad memplan --world_size N --rank K`");
  if (!env && !(r.dry_run && a.plan_world_size > 1)) {
    if (a.zero_stage > 0)
      throw Error(fmt::format(
          "[train] --zero_stage {} shards across the ranks of a launcher, and this is one process "
          "(RANK/WORLD_SIZE unset): run it under `fitgrad launch --nproc_per_node N` (or plan "
          "a rank with `fitgrad memplan --world_size N`)",
          a.zero_stage));
    // The same command line serves one process and a job (torchrun's habit): the job's own
    // flags are noted, not refused.
    for (const char* flag : {"ddp_timeout", "ddp_bucket_cap_mb"})
      if (!is_default(train_flag(flag), a) && !r.dry_run)
        r.out << fmt::format(
            "note: --{} applies to the ranks of a data-parallel job (`fitgrad launch`); this "
            "run is one process\n",
            flag);
    return;
  }
  check_data_parallel_flags(a);
  r.group = env ? dist::make_process_group(*env, r.device, std::chrono::seconds(a.ddp_timeout))
                // Note [Planning one rank]
                : dist::make_meta_group(int(a.plan_rank), int(a.plan_world_size));
}

namespace {

// What the ranks compare, an item each (Note [One flag table]): every flag the ranks must agree
// on, then the model's shapes.
std::vector<std::string> config_items(const TrainRun& r) {
  std::vector<std::string> items = flags_items(r.a, r.group ? r.group->size() : 1, r.device);
  std::string shapes = "the model's parameters";
  for (const auto& [name, p] : r.lm.model->named_parameters())
    shapes += fmt::format(" {}:{}:{}", name, fmt::join(p.shape(), "x"), dtype_name(p.dtype()));
  items.push_back(std::move(shapes));
  return items;
}

// FNV-1a, 64 bits.
int64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return int64_t(h);
}

// Each rank's `values` (n each), gathered: (world x n) on the host.
std::vector<int64_t> gather_all(TrainRun& r, const std::vector<int64_t>& values) {
  const auto n = int64_t(values.size());
  Tensor all = Tensor::zeros({r.group->size() * n}, DType::i64, r.device);
  r.group->all_gather(Tensor::from_vector(values, {n}, DType::i64).to(r.device), all);
  const Tensor host = all.to(Device::cpu());
  return {host.data<int64_t>(), host.data<int64_t>() + host.numel()};
}

// The first item of the configuration that rank `other` and rank 0 disagree on, with both
// values, as "rank 1 has --seed 7 where rank 0 has --seed 42". Every rank calls it, since
// every rank saw the same hashes: the collectives match.
std::string first_difference(TrainRun& r, int other) {
  const std::vector<std::string> items = config_items(r);
  std::vector<int64_t> hashes;
  for (const std::string& item : items) hashes.push_back(fnv1a(item));
  const std::vector<int64_t> all = gather_all(r, hashes);
  const size_t n = items.size();
  size_t j = 0;
  while (j < n && all[size_t(other) * n + j] == all[j]) ++j;
  if (j == n) return fmt::format("rank {} has another configuration hash", other);
  // Item j's text on every rank: the lengths, then the bytes (at most 200 of them).
  const std::string mine = items[j].substr(0, 200);
  const std::vector<int64_t> lengths = gather_all(r, {int64_t(mine.size())});
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<int64_t> bytes(size_t(longest), 0);
  for (size_t i = 0; i < mine.size(); ++i) bytes[i] = int64_t(uint8_t(mine[i]));
  const std::vector<int64_t> texts = gather_all(r, bytes);
  const auto text_of = [&](int rank) {
    std::string t;
    for (int64_t i = 0; i < lengths[size_t(rank)]; ++i)
      t += char(texts[size_t(rank * longest + i)]);
    return t + (int64_t(t.size()) == 200 ? "..." : "");
  };
  return fmt::format("rank {} has {} where rank 0 has {}", other, text_of(other), text_of(0));
}

}  // namespace

std::string config_fingerprint(const TrainRun& r) {
  return fmt::format("{}", fmt::join(config_items(r), " "));
}

void start_data_parallel(TrainRun& r) {
  if (!r.group) return;
  dist::ProcessGroup& g = *r.group;
  const int world = g.size();
  // Note [Control values on the run's device]
  Tensor hashes = Tensor::zeros({world}, DType::i64, r.device);  // (world): each rank's hash
  const Tensor mine =
      Tensor::from_vector(std::vector<int64_t>{fnv1a(config_fingerprint(r))}, {1}, DType::i64)
          .to(r.device);
  g.all_gather(mine, hashes);
  if (r.device.has_bytes()) {
    const Tensor host = hashes.to(Device::cpu());
    const int64_t* h = host.data<int64_t>();
    std::string differ;
    for (int k = 1; k < world; ++k)
      if (h[k] != h[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(k);
    if (!differ.empty())
      throw Error(fmt::format(
          "[train] the ranks of this job run different configurations: rank(s) {} differ from "
          "rank 0: {}; start every rank with the same command",
          differ, first_difference(r, std::stoi(differ))));
  }
  // The same starting weights everywhere, as DDP's constructor broadcasts them: every
  // parameter (int8 weights' scales and zeros too), or a LoRA run's adapters over the base
  // each rank loaded. The buckets average the gradients of those that train.
  const auto trained = r.lm.model->trainable_parameters();
  {
    autograd::NoGradGuard no_grad;
    for (const auto& [name, p] : r.lora ? trained : r.lm.model->named_parameters())
      g.broadcast(p, 0);
  }
  dist::DdpOptions options;
  options.bucket_cap_bytes = r.a.ddp_bucket_cap_mb << 20;
  r.ddp = std::make_unique<dist::GradBuckets>(g, trained, options);
  if (r.a.zero_stage == 0) return;
  // Note [ZeRO by whole parameters]
  r.zero = std::make_unique<dist::ZeroSharding>(g, *r.optimizer, int(r.a.zero_stage));
  if (r.a.zero_stage == 2) {
    std::vector<bool> dropped;
    for (const auto& [name, p] : trained) dropped.push_back(!r.zero->owns(name));
    r.ddp->drop_after_packing(std::move(dropped));
  }
}

double mean_over_ranks(TrainRun& r, double value) {
  if (!r.group) return value;
  Tensor t = Tensor::full({1}, value, DType::f32, r.device);  // Note [Control values ...]
  r.group->all_reduce(t, dist::ReduceOp::avg);
  return r.device.has_bytes() ? t.item() : value;
}

train::ObjectiveMetrics sum_over_ranks(TrainRun& r, const train::ObjectiveMetrics& metrics) {
  // Every rank's objective adds the same names (ObjectiveMetrics), so the ranks reduce alike.
  if (!r.group || metrics.empty()) return metrics;
  train::ObjectiveMetrics out = metrics;
  std::vector<double> values;
  for (const auto& [name, v] : out.sums()) values.insert(values.end(), {v.first, v.second});
  // Note [Control values on the run's device]; f32 holds these sums to a part in 10^7.
  Tensor t = Tensor::from_vector(values, {int64_t(values.size())}, DType::f32, r.device);
  r.group->all_reduce(t, dist::ReduceOp::sum);
  if (!r.device.has_bytes()) return metrics;
  const std::vector<double> summed = t.to_vector<double>();
  size_t i = 0;
  for (auto& [name, v] : out.sums()) {
    v = {summed[i], summed[i + 1]};
    i += 2;
  }
  return out;
}

int agreed_signal(TrainRun& r, int signal) {
  if (!r.group) return signal;
  Tensor t = Tensor::full({1}, signal != 0 ? 1.0 : 0.0, DType::i32, r.device);
  r.group->all_reduce(t, dist::ReduceOp::sum);
  if (signal != 0 || !r.device.has_bytes()) return signal;
  return t.item() > 0 ? SIGTERM : 0;
}

}  // namespace fitgrad::train
