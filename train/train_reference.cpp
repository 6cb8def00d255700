// --precompute_ref_log_probs: the reference model's log-probabilities of every pair, computed
// once before training and kept with the run (Note [Precomputed reference]).
//
// Note [Precomputed reference]
// As TRL's precompute_ref_log_probs: before the first step one pass over the training and
// validation pairs has the reference model (the base under a LoRA adapter, the adapter off;
// the initial weights of a full fine-tune) compute each answer's summed NLL, so that the
// steps run the policy alone. The pass reads the pairs in order, --per_device_eval_batch_size
// pairs a forward and the rest one at a time, without a gradient, under the run's precision.
// The values go to <output_dir>/reference_log_probs.bin with a fingerprint of what they depend
// on (the model, --init, --quantize, --lora_target, --seq_len and the pairs' tokens and
// masks), and a rerun or a resume into that directory reads them back when the fingerprint
// matches. A full fine-tune's resume must read them: its reference, the initial weights, is
// gone once the checkpoint is loaded. A dry run plans the pass's forwards on meta, the same
// number of batches of the same shapes, and writes nothing.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/autocast.h"
#include "io/atomic_file.h"
#include "io/content_hash.h"
#include "tensor/error.h"
#include "train/metrics.h"
#include "train/train_run.h"

namespace fitgrad::train {

namespace fs = std::filesystem;

train::MicroBatch pair_batch(data::Batch&& batch, const std::vector<double>& ref,
                             const TrainRun::Split& split) {
  const std::vector<int64_t> rows = batch.rows;
  train::MicroBatch b = micro_batch(std::move(batch));
  if (!ref.empty())
    for (const int64_t row : rows) b.ref_nll.push_back(ref[size_t(row)]);
  // Example w is rows 2w and 2w + 1; the batch's first half are its examples' own rows.
  if (!split.labels.empty())
    for (size_t k = 0; k < rows.size() / 2; ++k)
      b.labels.push_back(split.labels[size_t(rows[k] / 2)]);
  return b;
}

namespace {

constexpr char kMagic[8] = {'F', 'G', 'R', 'E', 'F', 'L', 'P', '1'};

std::string split_hash(const TrainRun::Split& s) {
  return fmt::format(
      "{} {:016x} {:016x}", s.tokens.size(),
      io::content_hash({reinterpret_cast<const char*>(s.tokens.data()), s.tokens.size_bytes()}),
      io::content_hash({reinterpret_cast<const char*>(s.trained.data()), s.trained.size_bytes()}));
}

std::string fingerprint(const TrainRun& r) {
  const TrainArgs& a = r.a;
  return fmt::format(
      "fitgrad reference log-probabilities\nmodel {}\ninit {}\nquantize {} {} {}\nlora {} {}\n"
      "seq_len {}\nprecision {}\ntrain {}\nvalidation {}\n",
      a.model, a.init, a.quantize, a.bnb_4bit_quant_type, a.bnb_4bit_use_double_quant, a.lora_r,
      a.lora_target, a.seq_len, dtype_name(compute_dtype(a)), split_hash(r.train_data),
      split_hash(r.val_data));
}

// The values stored for this fingerprint, or nullopt when the file is missing or another's.
std::optional<std::pair<std::vector<double>, std::vector<double>>> read_stored(
    const fs::path& path, const std::string& fp) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  char magic[8];
  uint64_t fp_size = 0, n[2] = {0, 0};
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 ||
      !in.read(reinterpret_cast<char*>(&fp_size), 8) || fp_size != fp.size())
    return std::nullopt;
  std::string stored(fp_size, '\0');
  if (!in.read(stored.data(), std::streamsize(fp_size)) || stored != fp ||
      !in.read(reinterpret_cast<char*>(n), 16))
    return std::nullopt;
  std::pair<std::vector<double>, std::vector<double>> v{std::vector<double>(n[0]),
                                                        std::vector<double>(n[1])};
  for (std::vector<double>* x : {&v.first, &v.second})
    if (!in.read(reinterpret_cast<char*>(x->data()), std::streamsize(x->size() * 8)))
      return std::nullopt;
  return v;
}

void write_stored(const fs::path& path, const std::string& fp, const std::vector<double>& train,
                  const std::vector<double>& val) {
  std::string bytes(kMagic, 8);
  const auto put = [&](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  const uint64_t header[3] = {fp.size(), train.size(), val.size()};
  put(&header[0], 8);
  bytes += fp;
  put(&header[1], 16);
  put(train.data(), train.size() * 8);
  put(val.data(), val.size() * 8);
  io::write_file_atomic(path.string(), bytes, "[train " + path.string() + "]");
}

// The reference's NLL of every row of a split of `pairs` pairs ("train" or "validation"),
// in batches laid out as the steps' are; a dry run plans the same batches on meta (without
// data, rows of --seq_len) and returns zeros.
std::vector<double> reference_of(TrainRun& r, const TrainRun::Split& split, int64_t pairs,
                                 const std::string& what) {
  const int64_t B = std::max<int64_t>(1, std::min(r.a.per_device_eval_batch_size, pairs));
  const std::string label = "data." + what;
  std::vector<double> out(size_t(2 * pairs), 0.0);
  const auto run = [&](int64_t batch, int64_t first_pair) {
    if (split.tokens.empty()) {
      for (int64_t p = first_pair; p + batch <= pairs; p += batch)
        train::reference_nll(*r.lm.model, r.meta_batch(batch, label.c_str(), r.packed));
      return;
    }
    data::LoaderOptions lopt;
    lopt.batch_size = batch;
    lopt.seq_len = r.a.seq_len;
    lopt.order = data::DataOrder::sequential;
    lopt.device = r.dry_run ? Device::cpu() : r.device;
    lopt.pairs = true;
    lopt.pack_pairs = r.packed;
    data::Loader loader(split.tokens, lopt, what, split.trained, {}, split.lengths);
    loader.restore({0, first_pair / batch, lopt.seed});
    for (int64_t p = first_pair; p + batch <= pairs; p += batch) {
      data::Batch b = loader.next();
      if (r.dry_run) {
        train::reference_nll(*r.lm.model, r.meta_of(b, label.c_str()));
        continue;
      }
      const std::vector<int64_t> rows = b.rows;
      const std::vector<double> nll = train::reference_nll(*r.lm.model, micro_batch(std::move(b)));
      for (size_t k = 0; k < rows.size(); ++k) out[size_t(rows[k])] = nll[k];
    }
  };
  if (pairs == 0) return out;
  run(B, 0);
  if (pairs % B != 0) run(1, pairs - pairs % B);
  return out;
}

}  // namespace

void precompute_reference(TrainRun& r) {
  const TrainArgs& a = r.a;
  if (!a.precompute_ref_log_probs) return;
  r.alloc.mark("reference log-probabilities");
  const autograd::AutocastGuard autocast(compute_dtype(a));
  // Without --data a dry run stands for one batch of each split.
  const int64_t train_pairs = r.sft ? r.sft->train.examples : a.per_device_eval_batch_size;
  const int64_t val_pairs = r.sft ? r.sft->val.examples : a.per_device_eval_batch_size;
  if (r.dry_run) {
    reference_of(r, r.train_data, train_pairs, "train");
    reference_of(r, r.val_data, val_pairs, "validation");
    return;
  }
  const fs::path path = r.dir / "reference_log_probs.bin";
  const std::string fp = fingerprint(r);
  if (auto stored = read_stored(path, fp)) {
    r.reference.train = std::move(stored->first);
    r.reference.val = std::move(stored->second);
    r.progress.message(fmt::format("reference log-probabilities read from {}", path.string()));
    return;
  }
  FG_CHECK(r.resume_dir.empty() || r.lora,
           "[train] resuming a full fine-tune with --precompute_ref_log_probs needs the reference "
           "log-probabilities its first run stored in {} (computed from the initial weights, "
           "which the checkpoint replaced); that file is missing or belongs to other data or "
           "flags: start the run again without --resume_from_checkpoint",
           path.string());
  r.reference.train = reference_of(r, r.train_data, train_pairs, "train");
  r.reference.val = reference_of(r, r.val_data, val_pairs, "validation");
  if (r.writes_outputs()) write_stored(path, fp, r.reference.train, r.reference.val);
  r.progress.message(fmt::format("reference log-probabilities of {} pairs computed into {}",
                                 train_pairs + val_pairs, path.string()));
}

}  // namespace fitgrad::train
