// The files a data folder contributes, as every reader of --data walks it: recursively,
// skipping hidden entries (a file or folder whose name starts with '.'), in byte order of
// their paths relative to the folder, so that a folder reads the same on every machine.
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

}  // namespace fitgrad::data
