// Atomic, verified checkpoint directories (Notes [Atomic checkpoints] and [Verified
// checkpoints] in checkpoint_dir.h).
#include "train/checkpoint_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/content_hash.h"
#include "io/json_file.h"
#include "tensor/error.h"
#include "train/metrics.h"

namespace fitgrad::train {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr std::string_view kPrefix = "checkpoint-";
constexpr const char* kFormat = "fitgrad-checkpoint";

void sync_path(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw Error(fmt::format("[checkpoint {}] cannot open to sync", p.string()));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("[checkpoint {}] fsync failed", p.string()));
}

// The step of a directory named checkpoint-<digits>; -1 otherwise.
int64_t step_of(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size() ||
      name.size() > kPrefix.size() + 18)
    return -1;
  int64_t step = 0;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

// The manifest of `dir`, or a null json when it has none that parses.
json read_manifest(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kCheckpointManifest, ec)) return json();
  std::ifstream in(dir / kCheckpointManifest);
  json m = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || m.value("format", "") != kFormat || !m.contains("files") ||
      !m["files"].is_object() || !m.contains("step") || !m["step"].is_number_integer())
    return json();
  return m;
}

bool is_checkpoint(const fs::path& dir, int64_t step) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  const json m = read_manifest(dir);
  return !m.is_null() && m["step"].get<int64_t>() == step;
}

void write_manifest(const fs::path& dir, int64_t step) {
  json files = json::object();
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string where = fmt::format("[checkpoint {}]", e.path().string());
    files[name] = {
        {"bytes", uint64_t(e.file_size())},
        {"hash", fmt::format("{:016x}", io::file_content_hash(e.path().string(), where))}};
  }
  const json m = {{"format", kFormat}, {"version", 1}, {"step", step}, {"files", files}};
  write_file_atomic((dir / kCheckpointManifest).string(), io::json_text(m, 1) + "\n");
}

// Note [Fault hook]
// tests/apps/train_kill.sh proves that a SIGKILL in the middle of pruning loses nothing. A
// random kill rarely lands there, so with FITGRAD_FAULT_KILL_IN_PRUNE set, pruning deletes
// one file of the renamed checkpoint and then kills its own process, as `strace -e
// inject=unlinkat:signal=SIGKILL` would. Without the variable this does nothing.
void kill_here_for_tests(const fs::path& doomed) {
  if (std::getenv("FITGRAD_FAULT_KILL_IN_PRUNE") == nullptr) return;
  std::error_code ec;
  fs::remove(doomed / "config.json", ec);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace

std::string commit_checkpoint(const std::string& output_dir, int64_t step,
                              const std::function<void(const std::string& dir)>& write) {
  fs::path root(output_dir);
  fs::path tmp = root / fmt::format("tmp-{}{}", kPrefix, step);
  fs::path final_dir = root / fmt::format("{}{}", kPrefix, step);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(final_dir, ec)) && !is_checkpoint(final_dir, step))
    throw Error(fmt::format(
        "[checkpoint {}] exists and is not a fitgrad checkpoint (no {}): fitgrad does not "
        "replace it; move it away",
        final_dir.string(), kCheckpointManifest));
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(fmt::format("[checkpoint {}] cannot create: {}", tmp.string(), ec.message()));
  write(tmp.string());
  write_manifest(tmp, step);
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.is_regular_file()) sync_path(e.path());
  sync_path(tmp);
  if (fs::exists(final_dir)) {
    // Replacing a checkpoint of the same step: move the old one aside first, so a crash
    // between the renames still leaves one complete copy on disk.
    fs::path old = root / fmt::format(".old-{}{}", kPrefix, step);
    fs::remove_all(old, ec);
    fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, final_dir, ec);
    if (ec)
      throw Error(fmt::format("[checkpoint {}] cannot rename into place: {}", final_dir.string(),
                              ec.message()));
  }
  sync_path(root);
  return final_dir.string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return out;
  fs::directory_iterator it(output_dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const int64_t step = step_of(it->path().filename().string());
    if (step >= 0 && is_checkpoint(it->path(), step)) out.emplace_back(step, it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void verify_checkpoint(const std::string& dir) {
  const json m = read_manifest(dir);
  FG_CHECK(!m.is_null(), "[checkpoint {}] is not a fitgrad checkpoint: no valid {}", dir,
           kCheckpointManifest);
  for (const auto& [name, entry] : m["files"].items()) {
    const fs::path p = fs::path(dir) / name;
    const std::string where = fmt::format("[checkpoint {}]", p.string());
    std::error_code ec;
    FG_CHECK(fs::is_regular_file(p, ec), "{} is missing", where);
    const uint64_t bytes = fs::file_size(p, ec);
    FG_CHECK(entry.is_object() && entry.value("bytes", uint64_t(0)) == bytes,
             "{} has {} bytes, the manifest says {}: the file is damaged", where, bytes,
             entry.is_object() ? entry.value("bytes", json()).dump() : "nothing");
    const std::string hash = fmt::format("{:016x}", io::file_content_hash(p.string(), where));
    FG_CHECK(entry.value("hash", "") == hash,
             "{} does not match its content hash in the manifest: the file is damaged", where);
  }
}

void verify_before_reading(const std::string& path, const std::string& what, bool skip) {
  std::error_code ec;
  if (skip || !fs::is_regular_file(fs::path(path) / kCheckpointManifest, ec)) return;
  try {
    verify_checkpoint(path);
  } catch (const Error& e) {
    throw Error(fmt::format("[{} {}] {}; to read it anyway, add {}", what, path, e.what(),
                            kSkipVerificationFlag));
  }
}

std::vector<std::string> prune_checkpoints(const std::string& output_dir, int64_t keep) {
  std::vector<std::string> problems;
  if (keep <= 0) return problems;
  // What an earlier kill left half-deleted (only pruning makes these names) goes first.
  std::error_code it_ec;
  for (fs::directory_iterator it(output_dir, it_ec); !it_ec && it != fs::directory_iterator();
       it.increment(it_ec))
    if (it->path().filename().string().starts_with(".pruned-")) {
      std::error_code ec;
      fs::remove_all(it->path(), ec);
    }
  const auto all = list_checkpoints(output_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) {
    const fs::path dir(all[i].second);
    const fs::path doomed = dir.parent_path() / fmt::format(".pruned-{}", dir.filename().string());
    std::error_code ec;
    fs::remove_all(doomed, ec);
    fs::rename(dir, doomed, ec);
    if (!ec) kill_here_for_tests(doomed);
    if (!ec) fs::remove_all(doomed, ec);
    if (ec)
      problems.push_back(
          fmt::format("cannot delete {} for --save_total_limit: {}", dir.string(), ec.message()));
  }
  return problems;
}

std::string resolve_resume_dir(const std::string& arg, const std::string& output_dir,
                               bool skip_verification) {
  std::string dir = arg;
  if (arg == "last" || arg == "true" || arg == "True") {
    auto all = list_checkpoints(output_dir);
    if (all.empty())
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: no checkpoint-<step> directory in --output_dir {}",
          arg, output_dir));
    dir = all.back().second;
  } else {
    std::error_code ec;
    if (!fs::is_directory(arg, ec))
      throw Error(fmt::format("[train] --resume_from_checkpoint {}: no such directory", arg));
    if (read_manifest(arg).is_null())
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: not a complete fitgrad checkpoint (no valid {})",
          arg, kCheckpointManifest));
  }
  verify_before_reading(dir, "train --resume_from_checkpoint", skip_verification);
  return dir;
}

}  // namespace fitgrad::train
