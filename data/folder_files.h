// The files a data folder contributes, as every reader of --data walks it: recursively,
// skipping hidden entries (a file or folder whose name starts with '.'), in byte order of
// their paths relative to the folder, so that a folder reads the same on every machine; and
// the kind of data a file holds by its extension (Note [One kind of data a folder]).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace fitgrad::data {

// The regular files under `folder` whose names `keep` accepts, as '/'-separated paths
// relative to it, sorted; `where` starts the error a folder that cannot be listed throws.
std::vector<std::string> folder_files(const std::filesystem::path& folder,
                                      const std::function<bool(const std::string&)>& keep,
                                      const std::string& where);

// The extension of `name`, lower-cased: ".jsonl" for "a.JSONL".
std::string data_extension(const std::string& name);

// What a data file holds by its extension, in any case: .jsonl and .json files hold records
// (data/sft_records.h), .txt files text (data/token_dataset.h).
enum class DataKind { none, records, text };
DataKind data_kind(const std::string& name);

// The kind of the data files under `folder`: none when it holds neither kind. A folder holding
// both is refused, naming files of each kind (Note [One kind of data a folder]).
DataKind folder_kind(const std::filesystem::path& folder, const std::string& where);

// The files of `kind` under `folder`, as folder_files lists them, after folder_kind's check.
std::vector<std::string> folder_files_of(const std::filesystem::path& folder, DataKind kind,
                                         const std::string& where);

}  // namespace fitgrad::data
