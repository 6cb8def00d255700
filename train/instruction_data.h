// Whether a run's --data is instruction or chat data (records the data layer reads,
// data/sft_records.h) or text: what the run's data (train_sft.h) and the SFT objective
// (train/objectives/sft.h) both ask.
#pragma once

#include "train/train_args.h"

namespace fitgrad::train {

// Whether --data is instruction or chat data: a .jsonl or .json file, a folder holding such
// files (and no .txt), or any data with --dataset_format other than auto.
bool is_sft_data(const TrainArgs& a);

}  // namespace fitgrad::train
