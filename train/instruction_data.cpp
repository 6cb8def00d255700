// is_sft_data (instruction_data.h).
#include "train/instruction_data.h"

#include <filesystem>

#include "data/folder_files.h"

namespace fitgrad::train {

namespace fs = std::filesystem;

bool is_sft_data(const TrainArgs& a) {
  std::error_code ec;
  const data::DataKind kind = fs::is_directory(a.data, ec)
                                  ? data::folder_kind(a.data, "[data " + a.data + "]")
                                  : data::data_kind(a.data);
  return a.dataset_format != "auto" || kind == data::DataKind::records;
}

}  // namespace fitgrad::train
