// is_sft_data (instruction_data.h).
#include "train/instruction_data.h"

#include <filesystem>

#include "data/folder_files.h"

namespace fitgrad::train {

namespace fs = std::filesystem;

bool is_sft_data(const TrainArgs& a) {
  if (a.dataset_format != "auto") return true;
  const auto records = [](const std::string& name) {
    return name.ends_with(".jsonl") || name.ends_with(".json");
  };
  std::error_code ec;
  if (!fs::is_directory(a.data, ec)) return records(a.data);
  const std::string where = "[data " + a.data + "]";
  return !data::folder_files(a.data, records, where).empty() &&
         data::folder_files(
             a.data, [](const std::string& n) { return n.ends_with(".txt"); }, where)
             .empty();
}

}  // namespace fitgrad::train
