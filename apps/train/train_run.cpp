// TrainRun: what every phase of a run shares, and where its micro-batches come from.
#include "apps/train/train_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "tensor/memory/scope.h"

namespace fitgrad::apps {

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
      tf32(args.tf32) {}

TrainRun::~TrainRun() {
  alloc.set_capacity(capacity_before);
  alloc.set_mode(mode_before);
}

train::MicroBatch micro_batch(data::Batch&& b) {
  return {std::move(b.ids),
          std::move(b.targets),
          b.trained_targets,
          {std::move(b.segments), {std::move(b.positions), b.longest_example}},
          std::move(b.row_targets)};
}

train::MicroBatch TrainRun::next_batch() {
  if (!dry_run) return pair_batch(loader->next(), ref_train);
  // Note [Dry run on meta]: the loader's batch gives the shape only.
  const int64_t length = loader ? loader->next().ids.size(1) : a.seq_len;
  return meta_batch(a.per_device_train_batch_size, "data.train", packed, length);
}

train::MicroBatch TrainRun::meta_batch(int64_t batch, const char* label, bool packed_rows,
                                       int64_t length) const {
  const MemoryContextScope scope({Category::data, intern_label(label)});
  const int64_t rows = preference ? 2 * batch : batch;  // Note [Preference batches]
  const int64_t T = length > 0 ? length : a.seq_len;
  const Shape shape{rows, T};
  train::MicroBatch b{Tensor::empty(shape, DType::i64, device),
                      Tensor::empty(shape, DType::i64, device),
                      rows * T,
                      {},
                      preference ? std::vector<int64_t>(size_t(rows), T) : std::vector<int64_t>(),
                      // --precompute_ref_log_probs: the steps make no reference pass.
                      preference && a.precompute_ref_log_probs
                          ? std::vector<double>(size_t(rows), 0.0)
                          : std::vector<double>()};
  if (packed_rows) {  // as the loader builds them (Note [Packed batches] in data/loader.cpp)
    b.packed.positions = {Tensor::empty(shape, DType::i32, device), a.seq_len};
    b.packed.segments = Tensor::empty({2, batch, a.seq_len}, DType::i32, device);
  }
  return b;
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

}  // namespace fitgrad::apps
