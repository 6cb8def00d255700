// TrainRun: what every phase of a run shares, and where its micro-batches come from.
#include "train/train_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "tensor/memory/scope.h"

namespace fitgrad::train {

TrainRun::TrainRun(const TrainArgs& args, std::ostream& out_stream, std::ostream& err_stream)
    : a(args),
      out(out_stream),
      err(err_stream),
      device(Device::parse(args.device)),
      dry_run(device.type == DeviceType::meta),
      alloc(allocator_for(device)),
      progress(err_stream, args.progress, &err_stream == &std::cerr),
      capacity_before(alloc.capacity()),
      mode_before(alloc.mode()),
      tf32(args.tf32) {
  if (dry_run && args.planned_profile) meta_target.emplace(*args.planned_profile);
}

TrainRun::~TrainRun() {
  alloc.set_capacity(capacity_before);
  alloc.set_mode(mode_before);
}

train::MicroBatch micro_batch(data::Batch&& b) {
  return {std::move(b.ids),
          std::move(b.targets),
          b.trained_targets,
          {std::move(b.segments), {std::move(b.positions), b.longest_example}},
          std::move(b.row_targets),
          std::move(b.spans)};
}

train::MicroBatch TrainRun::next_batch() {
  if (!dry_run) return pair_batch(loader->next(), reference.train, train_data);
  // Note [Dry run on meta]: the loader's batch gives the shapes only.
  if (loader) return meta_of(loader->next(), "data.train");
  return meta_batch(a.per_device_train_batch_size, "data.train", packed);
}

namespace {

// Meta ids and targets of `shape` (R, T), and with packed rows their positions and segments,
// allocated in the loader's order under its label.
train::MicroBatch meta_tensors(const Shape& shape, bool packed_rows, int64_t longest,
                               const char* label, Device device) {
  const MemoryContextScope scope({Category::data, intern_label(label)});
  train::MicroBatch m;
  m.ids = Tensor::empty(shape, DType::i64, device);
  m.targets = Tensor::empty(shape, DType::i64, device);
  if (packed_rows) {  // as the loader builds them (Note [Packed batches] in data/loader.cpp)
    m.packed.positions = {Tensor::empty(shape, DType::i32, device), longest};
    m.packed.segments = Tensor::empty({2, shape[0], shape[1]}, DType::i32, device);
  }
  return m;
}

}  // namespace

train::MicroBatch TrainRun::meta_batch(int64_t batch, const char* label, bool packed_rows) const {
  const int64_t rows = objective->rows_per_example() * batch;  // Note [Preference batches]
  train::MicroBatch m = meta_tensors({rows, a.seq_len}, packed_rows, a.seq_len, label, device);
  m.trained_targets = rows * a.seq_len;
  if (rows > batch) m.row_targets.assign(size_t(rows), a.seq_len);
  // --precompute_ref_log_probs: the steps make no reference pass.
  if (a.precompute_ref_log_probs) m.ref_nll.assign(size_t(rows), 0.0);
  objective->plan_batch(m, batch);
  return m;
}

train::MicroBatch TrainRun::meta_of(const data::Batch& b, const char* label) const {
  train::MicroBatch m =
      meta_tensors(b.ids.shape(), b.positions.defined(), b.longest_example, label, device);
  m.trained_targets = b.trained_targets;
  m.row_targets = b.row_targets;
  m.spans = b.spans;
  if (a.precompute_ref_log_probs) m.ref_nll.assign(m.row_targets.size(), 0.0);
  objective->plan_batch(m, int64_t(m.row_targets.size()) / 2);
  return m;
}

double TrainRun::epoch_at(int64_t s) const {
  if (batches_per_epoch == 0) return 0.0;
  return double(s * a.gradient_accumulation_steps) / double(batches_per_epoch);
}

std::string TrainRun::loss_curve_title() const {
  return fmt::format("{} on {}", a.model, std::filesystem::path(a.data).filename().string());
}

int64_t TrainRun::optimized_parameters() const {
  int64_t n = 0;
  for (const optim::ParamGroup& g : optimizer->groups())
    for (const auto& [name, p] : g.params) n += p.numel();
  return std::max<int64_t>(1, n);
}

}  // namespace fitgrad::train
