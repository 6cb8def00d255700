// `fitgrad train` under a launcher: the process group, the check that every rank runs the
// same configuration, and the few values the ranks agree on.
//
// Note [Data-parallel runs]
// When the launcher's variables are set (dist/rendezvous.h; `fitgrad launch`, torchrun, an
// mpirun or Slurm wrapper) a run is one rank of a data-parallel job: its process group is made
// over the device's backend (Gloo on cpu, NCCL on cuda) with --ddp_timeout, the ranks compare
// a hash of their configuration (model shape, world size, seed, every flag), rank 0's trained
// weights are broadcast to all, and each rank's loader gives it its shard of every global
// batch (Note [Data-parallel shards] in data/loader.h). The step averages the gradients in
// buckets during the backward (Note [DDP buckets] in dist/ddp.h), so every rank holds the
// same weights after every step. Rank 0 alone holds the output directory's lock and writes
// checkpoints, metrics.jsonl, loss_curve.svg and the usual memory record, and prints; the
// others are silent but for errors. Every rank writes its own ledger as
// memory.rank<k>.json. A logged training loss is the mean of the ranks' losses (one scalar
// all-reduce at a logging step), the loss of the global batch, and a preference run's logged
// rewards are those of the global batch's pairs (their sums, one all-reduce). Every rank evaluates the same
// validation batches, so the validation loss needs no collective. Whether to stop on a signal
// is agreed at the top of every step (one scalar all-reduce): a rank that stopped alone
// would leave the others waiting in a collective. A dry run (--device meta) plans one
// process and is refused under a launcher; memplan --world_size plans one rank (Note
// [Planning one rank] in dist/meta_group.h).
//
// Note [Control values on the run's device]
// The configuration hashes, the logged loss's mean and the stop flag travel in tensors on
// the run's device: NCCL takes only device memory, and on meta a plan makes the same
// allocations as the rank (the values are then not read: a plan's ranks agree by
// construction). Each is a few bytes, allocated and freed around its collective.
#pragma once
#include <string>

#include "train/train_run.h"

namespace fitgrad::train {

// Makes r.group from the environment, when a launcher set it; checks the flags that data
// parallelism refuses.
void setup_dist(TrainRun& r);
// After the model and the optimizer exist: compares the ranks' configuration hashes (throws
// naming the ranks that differ), broadcasts rank 0's trained weights, makes r.ddp.
void start_data_parallel(TrainRun& r);
// What the configuration hash covers (Note [Data-parallel runs]).
std::string config_fingerprint(const TrainRun& r);
// The mean of `value` over the ranks (value itself in one process).
double mean_over_ranks(TrainRun& r, double value);
// An objective's statistics summed over the ranks (this rank's in one process).
train::ObjectiveMetrics sum_over_ranks(TrainRun& r, const train::ObjectiveMetrics& metrics);
// The signal to stop on: this rank's, or SIGTERM when another rank received one.
int agreed_signal(TrainRun& r, int signal);

}  // namespace fitgrad::train
