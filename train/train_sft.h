// A run's instruction and chat data (issue "Instruction and chat fine-tuning"): --data given
// as .jsonl / .json records (data/sft_records.h) in one of the formats of data/sft_formats.h,
// encoded with the model's tokenizer and chat template into ids and loss masks
// (data/sft_encode.h), and laid out, packed or one a row (data/sft_stream.h), for the loader.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "data/sft_stream.h"
#include "train/instruction_data.h"
#include "train/model_source.h"
#include "train/train_args.h"

namespace fitgrad::train {

struct SftData {
  data::SftStream train, val;  // the validation split: the last examples, by --val_fraction
  data::Packing packing = data::Packing::none;
  bool pairs = false;   // preference pairs (--objective dpo, orpo): two rows each
  std::string summary;  // the run's data lines
};

// Reads, encodes and splits the records (Note [Instruction data in a run] in train_sft.cpp);
// examples left without a trained token are reported on `err` by their file and line. The
// encodings are cached in `cache_dir` (data/sft_cache.h).
SftData load_sft_data(const TrainArgs& a, const LoadedModel& lm, std::ostream& err,
                      const std::string& cache_dir);

}  // namespace fitgrad::train
