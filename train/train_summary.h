// The summary lines a `fitgrad train` run prints before its first step: the model and its
// parameters, the data, the steps and schedule, and the optimizer's declared state (GaLore's
// projections, APOLLO's rank where it outgrows a weight).
#pragma once
#include <cstdint>

#include "train/train_run.h"

namespace fitgrad::train {

// Prints them on r.out; `warmup` is the schedule's warmup steps.
void print_summary(TrainRun& r, int64_t warmup);

}  // namespace fitgrad::train
