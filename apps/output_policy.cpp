// The output policy of the commands (output_policy.h, Note [Output policy]).
#include "apps/output_policy.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "tensor/error.h"
#include "train/checkpoint_dir.h"

namespace fitgrad::apps {

using train::kCheckpointManifest;
namespace fs = std::filesystem;

struct OutputPolicy::Output {
  std::string flag, path;  // as the user typed them
  fs::path target;         // the real file: every symbolic link followed, its directory canonical
  bool to_stdout = false;
  bool existed = false;
  dev_t dev = 0;
  ino_t ino = 0;
  bool remove = false;  // stale(): removed by commit()
  std::optional<io::AtomicFile> file;
  std::string buffer;  // what goes to standard output
};

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_special_path(const fs::path& p) {
  const std::string s = fs::absolute(p).lexically_normal().string();
  for (const std::string root : {"/dev", "/proc", "/sys"})
    if (s == root || s.starts_with(root + "/")) return true;
  return false;
}

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// `path` with every symbolic link followed: the file a write through it reaches, which may
// not exist yet. Throws, starting with `who`, for a special file on the way, a loop or an
// unreadable link.
fs::path follow_links(const std::string& who, const std::string& path, const std::string& hint) {
  fs::path p = path;
  for (int hops = 0; hops <= 40; ++hops) {
    FG_CHECK(!is_special_path(p),
             "{} {} a special file (under /dev, /proc or /sys), not a regular file: {}", who,
             hops == 0 ? std::string("is") : fmt::format("leads to {},", p.string()), hint);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      FG_CHECK(errno == ENOENT, "{} cannot be examined: {}", who, std::strerror(errno));
      return p;
    }
    if (!S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    FG_CHECK(!ec, "{} cannot read the symbolic link {}: {}", who, p.string(), ec.message());
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw Error(fmt::format("{} is a chain of more than 40 symbolic links", who));
}

}  // namespace

std::string run_directory_evidence(const fs::path& dir) {
  std::error_code ec;
  for (const char* name :
       {".fitgrad.lock", "metrics.jsonl", "loss_curve.svg", "trainer_state.json",
        "training_args.bin", kCheckpointManifest, "optimizer.safetensors", "optimizer.pt"})
    if (fs::exists(fs::symlink_status(dir / name, ec))) return name;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    if (name.starts_with("overwritten-")) return name;
    for (const std::string_view prefix : {"checkpoint-", "tmp-checkpoint-", ".pruned-checkpoint-"})
      if (name.starts_with(prefix) && all_digits(std::string_view(name).substr(prefix.size())))
        return name;
  }
  return "";
}

OutputPolicy::OutputPolicy(std::string command, bool overwrite)
    : command_(std::move(command)), overwrite_(overwrite) {}

OutputPolicy::~OutputPolicy() {
  outputs_.clear();  // removes the temporary files (Note [All outputs or none])
  if (committed_) return;
  for (auto d = directories_.rbegin(); d != directories_.rend(); ++d)
    for (auto made = d->made.rbegin(); made != d->made.rend(); ++made) {
      std::error_code ec;
      fs::remove(*made, ec);  // only when still empty
    }
}

void OutputPolicy::input(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (!path.empty() && ::stat(path.c_str(), &st) == 0)
    inputs_.push_back({flag, path, st.st_dev, st.st_ino});
}

void OutputPolicy::check_outside_runs(const std::string& who, const fs::path& dir,
                                      bool is_the_directory) const {
  for (fs::path d = dir;; d = d.parent_path()) {
    const std::string evidence = run_directory_evidence(d);
    FG_CHECK(evidence.empty(),
             "{} is {}a training run's directory or a checkpoint (it holds {}): only `fitgrad "
             "train` writes there; choose a path outside it",
             who, d == dir && is_the_directory ? "" : fmt::format("inside {}, ", d.string()),
             evidence);
    if (d == d.root_path() || d.parent_path() == d) break;
  }
}

const OutputPolicy::Directory* OutputPolicy::created_directory(const fs::path& dir) const {
  for (const Directory& d : directories_)
    if (d.real == dir) return &d;
  return nullptr;
}

void OutputPolicy::directory(const std::string& flag, const std::string& path) {
  const std::string who = fmt::format("[{}] {} {}", command_, flag, path);
  FG_CHECK(!path.empty(), "[{}] {} is empty: give a directory", command_, flag);
  const fs::path real = follow_links(who, path, "give a directory");
  struct stat st {};
  Directory d{flag, path, {}, {}};
  if (::stat(real.c_str(), &st) == 0) {
    FG_CHECK(S_ISDIR(st.st_mode), "{} is {}, not a directory", who, kind_of(st.st_mode));
    d.real = fs::canonical(real);
    check_outside_runs(who, d.real, /*is_the_directory=*/true);
  } else {
    d.real = fs::weakly_canonical(fs::absolute(real));
    if (d.real.filename().empty()) d.real = d.real.parent_path();  // "dir/" -> "dir"
    fs::path up = d.real.parent_path();
    std::error_code ec;
    while (!fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
    FG_CHECK(fs::is_directory(up, ec), "{} cannot be created: {} is not a directory", who,
             up.string());
    check_outside_runs(who, fs::canonical(up), /*is_the_directory=*/false);
  }
  directories_.push_back(std::move(d));
}

size_t OutputPolicy::output(const std::string& flag, const std::string& path, bool stdout_ok) {
  const std::string who = fmt::format("[{}] {} {}", command_, flag, path);
  FG_CHECK(!path.empty(), "[{}] {} is empty: give a file path", command_, flag);
  auto o = std::make_unique<Output>();
  o->flag = flag;
  o->path = path;
  if (path == "-") {
    FG_CHECK(stdout_ok, "{}: this output cannot go to standard output; give a file path", who);
    for (const auto& other : outputs_)
      FG_CHECK(!other->to_stdout, "{}: {} goes to standard output already; give a file path", who,
               other->flag);
    o->to_stdout = true;
    outputs_.push_back(std::move(o));
    return outputs_.size() - 1;
  }
  const std::string hint = stdout_ok ? "give a regular file's path, or - for standard output"
                                     : "give a regular file's path";
  const fs::path target = follow_links(who, path, hint);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    const fs::path real_dir = fs::canonical(dir);
    o->target = real_dir / target.filename();
    FG_CHECK(!is_special_path(o->target),
             "{} is a special file (under /dev, /proc or /sys), not a regular file: {}", who, hint);
    check_outside_runs(who, real_dir, /*is_the_directory=*/false);
    FG_CHECK(::access(real_dir.c_str(), W_OK | X_OK) == 0,
             "{} cannot be written: the directory {} is not writable ({})", who, dir.string(),
             std::strerror(errno));
  } else {
    const Directory* made = created_directory(fs::weakly_canonical(fs::absolute(dir)));
    FG_CHECK(made != nullptr, "{}: the directory {} does not exist", who, dir.string());
    o->target = made->real / target.filename();
  }
  struct stat st {};
  if (::stat(o->target.c_str(), &st) == 0) {
    FG_CHECK(S_ISREG(st.st_mode), "{} is {}, not a regular file: {}", who, kind_of(st.st_mode),
             hint);
    for (const Input& in : inputs_)
      FG_CHECK(in.dev != st.st_dev || in.ino != st.st_ino,
               "{} is the input {} {}: writing it would overwrite what the command reads; "
               "choose another output path",
               who, in.flag, in.path);
    for (const auto& other : outputs_)
      FG_CHECK(!other->existed || other->dev != st.st_dev || other->ino != st.st_ino,
               "{} is the same file as {} {}; give each output its own path", who, other->flag,
               other->path);
    FG_CHECK(st.st_nlink == 1,
             "{} has {} hard links: replacing it would leave its other names with the old "
             "contents, so it is never replaced (not even with --overwrite); remove this name "
             "first or choose another path",
             who, st.st_nlink);
    const bool writable =
        (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) != 0 && ::access(o->target.c_str(), W_OK) == 0;
    FG_CHECK(writable,
             "{} is write-protected: it is never replaced, not even with --overwrite; make it "
             "writable or choose another path",
             who);
    FG_CHECK(overwrite_, "{} exists; pass --overwrite to replace it", who);
    o->existed = true;
    o->dev = st.st_dev;
    o->ino = st.st_ino;
  } else {
    FG_CHECK(errno == ENOENT, "{} cannot be examined: {}", who, std::strerror(errno));
  }
  for (const auto& other : outputs_)
    FG_CHECK(other->to_stdout || other->target != o->target,
             "{} is the same file as {} {}; give each output its own path", who, other->flag,
             other->path);
  outputs_.push_back(std::move(o));
  return outputs_.size() - 1;
}

bool OutputPolicy::to_stdout(size_t i) const { return outputs_.at(i)->to_stdout; }

std::string OutputPolicy::where(size_t i) const {
  const Output& o = *outputs_.at(i);
  return fmt::format("[{}] {} {}:", command_, o.flag, o.path);
}

io::AtomicFile& OutputPolicy::file(size_t i) {
  Output& o = *outputs_.at(i);
  FG_CHECK(!o.to_stdout, "{} standard output is not a file", where(i));
  if (!o.file) {
    for (Directory& d : directories_) {
      std::error_code ec;
      if (d.real != o.target.parent_path() || fs::is_directory(d.real, ec)) continue;
      std::vector<fs::path> missing;
      for (fs::path up = d.real; !fs::exists(up, ec) && up != up.parent_path();
           up = up.parent_path())
        missing.insert(missing.begin(), up);
      fs::create_directories(d.real, ec);
      FG_CHECK(!ec && fs::is_directory(d.real), "[{}] {} {}: cannot create the directory ({})",
               command_, d.flag, d.path, ec ? ec.message() : "not a directory");
      d.made = std::move(missing);
    }
    o.file.emplace(o.target.string(), where(i));
  }
  return *o.file;
}

void OutputPolicy::text(size_t i, std::string_view text) {
  Output& o = *outputs_.at(i);
  if (o.to_stdout)
    o.buffer.append(text);
  else
    file(i).write(text.data(), text.size());
}

size_t OutputPolicy::stale(const std::string& flag, const std::string& path) {
  const size_t i = output(flag, path);
  outputs_[i]->remove = true;
  return i;
}

void OutputPolicy::commit(std::ostream& out) {
  for (const auto& o : outputs_)
    if (o->file) o->file->sync();
  for (const auto& o : outputs_)
    if (o->file) o->file->commit();
  for (const auto& o : outputs_) {
    std::error_code ec;
    FG_CHECK(!o->remove || fs::remove(o->target, ec) || !ec,
             "[{}] {} {}: cannot remove this file of an earlier output ({}); the new outputs are "
             "in place beside it",
             command_, o->flag, o->path, ec.message());
  }
  committed_ = true;
  for (const auto& o : outputs_)
    if (o->to_stdout) out << o->buffer << std::flush;
}

}  // namespace fitgrad::apps
