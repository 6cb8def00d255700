// SftReader: list the dataset files, stream their records (a .jsonl file a line at a time, a
// .json array whole), settle each file's format and turn records into examples, throwing for
// bad records or counting them (data/sft_records.h).
#include "data/sft_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data/folder_files.h"
#include "io/json_depth.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::data {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// Note [Bad records]
// A dataset of a million records with three broken ones should neither stop a run without
// saying which three nor lose them unseen. So a bad record throws by default, naming the
// file, the record and the field, and the message says how to go on (fix it, or
// --skip_bad_examples); with skip_bad_examples the reader counts it, keeps the first few
// messages for the caller to print, and reads on. Detection is part of a record's checks: a
// first record whose keys fit no format is a bad record, and the next one decides. What is
// wrong with the source itself (no such file, a .json file that is not an array, no good
// record at all) is never skipped.

namespace {

bool dataset_file(const std::string& name) { return data_kind(name) == DataKind::records; }

std::vector<std::string> list_files(const std::string& source) {
  const std::string where = fmt::format("[sft {}]", source);
  std::error_code ec;
  const fs::file_status status = fs::status(source, ec);
  FG_CHECK(fs::exists(status), "{} no such file or folder", where);
  if (fs::is_regular_file(status)) {
    FG_CHECK(dataset_file(source),
             "{} is not a dataset file: name it .jsonl (one JSON object a line) or .json (an "
             "array of objects)",
             where);
    return {source};
  }
  FG_CHECK(fs::is_directory(status), "{} is neither a regular file nor a folder", where);
  const std::vector<std::string> relative = folder_files_of(source, DataKind::records, where);
  FG_CHECK(!relative.empty(), "{} the folder holds no .jsonl or .json file", where);
  std::vector<std::string> files;
  for (const std::string& r : relative) files.push_back((fs::path(source) / r).string());
  return files;
}

}  // namespace

struct SftReader::Open {
  std::string path;
  bool array = false;
  std::ifstream in;  // a .jsonl file
  int64_t line = 0;  // the last line read
  json records;      // a .json file's array
  size_t index = 0;  // the next record of `records`
  SftFormat format = SftFormat::auto_detect;
  std::string why;  // where the format came from, for errors
};

SftReader::SftReader(const std::string& source, SftReadOptions options)
    : source_(source), options_(std::move(options)), files_(list_files(source)) {}

SftReader::~SftReader() = default;
SftReader::SftReader(SftReader&&) noexcept = default;
SftReader& SftReader::operator=(SftReader&&) noexcept = default;

bool SftReader::open_next_file() {
  if (next_file_ == files_.size()) return false;
  auto open = std::make_unique<Open>();
  open->path = files_[next_file_++];
  open->array = data_extension(open->path) == ".json";
  open->in.open(open->path, std::ios::binary);
  FG_CHECK(open->in.is_open(), "[sft {}] cannot open the file", open->path);
  if (open->array) {
    const std::string text(std::istreambuf_iterator<char>(open->in), {});
    try {
      open->records = io::parse_json<json>(text, fmt::format("[sft {}]", open->path));
    } catch (const json::exception& e) {
      throw Error(fmt::format("[sft {}] invalid JSON: {}", open->path, e.what()));
    }
    open->in.close();
    FG_CHECK(open->records.is_array(),
             "[sft {}] a .json dataset must be an array of records, not {}; write one object "
             "a line to a .jsonl file instead",
             open->path, open->records.type_name());
  }
  open->format = options_.format;
  if (options_.format != SftFormat::auto_detect)
    open->why = fmt::format("format {} forced by --dataset_format", sft_format_name(open->format));
  open_ = std::move(open);
  return true;
}

std::optional<SftReader::Record> SftReader::read_record() {
  Open& f = *open_;
  if (f.array) {
    if (f.index == f.records.size()) return std::nullopt;
    const size_t i = f.index++;
    return Record{std::move(f.records[i]), fmt::format("{} index {}", f.path, i), {}};
  }
  std::string line;
  while (std::getline(f.in, line)) {
    ++f.line;
    if (line.ends_with('\r')) line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    Record record{json(), fmt::format("{} line {}", f.path, f.line), {}};
    try {
      io::check_json_depth(line, "");
      record.value = json::parse(line);
    } catch (const json::exception& e) {
      record.parse_error = e.what();
    } catch (const Error& e) {
      record.parse_error = e.what();
    }
    return record;
  }
  FG_CHECK(f.in.eof(), "[sft {}] read error after line {}", f.path, f.line);
  return std::nullopt;
}

SftExample SftReader::example(const Record& record) {
  FG_CHECK(record.parse_error.empty(), "[sft {}] invalid JSON: {}", record.where,
           record.parse_error);
  Open& f = *open_;
  if (f.format == SftFormat::auto_detect) {
    const SftFormat detected = detect_sft_format(record.value, options_.text_field);
    if (detected == SftFormat::auto_detect) {
      std::string keys;
      if (record.value.is_object())
        for (const auto& [key, value] : record.value.items())
          keys += fmt::format("{}'{}'", keys.empty() ? "" : ", ", key);
      // Note [Preference records] in sft_formats.cpp: the prompt is never guessed.
      FG_CHECK(!record.value.is_object() || !record.value.contains("chosen") ||
                   !record.value.contains("rejected") || record.value.contains("prompt"),
               "[sft {}] a preference record needs its prompt in a field 'prompt', with "
               "'chosen' and 'rejected' holding only the answers (as TRL's explicit-prompt "
               "preference datasets); this one has the keys {}",
               record.where, keys);
      throw Error(fmt::format(
          "[sft {}] cannot tell the dataset format from {}: expected a field 'messages', "
          "'conversations', 'prompt' with 'completion' (or with 'chosen' and 'rejected'), "
          "'instruction' or '{}' (the text field, --dataset_text_field); or name the format "
          "with --dataset_format",
          record.where,
          record.value.is_object()
              ? fmt::format("the keys {}", keys.empty() ? "(none)" : keys)
              : fmt::format("a record that is {}, not an object", record.value.type_name()),
          options_.text_field));
    }
    f.format = detected;
    f.why = fmt::format("the file's format, {}, detected from {}", sft_format_name(detected),
                        record.where.substr(f.path.size() + 1));
  }
  return sft_example_from_json(record.value, f.format, options_.text_field, record.where, f.why);
}

void SftReadReport::bad_record(const Error& e, bool skip) {
  if (!skip)
    throw Error(fmt::format(
        "{}; fix the record, or pass --skip_bad_examples to count and skip bad records", e.what()));
  ++skipped;
  if (first_errors.size() < kKeptErrors) first_errors.push_back(e.what());
}

std::optional<SftExample> SftReader::next() {
  for (;;) {
    interruption_point();  // Note [Interruption points]: each record read
    if (!open_ && !open_next_file()) {
      if (report_.examples > 0) return std::nullopt;
      FG_CHECK(report_.skipped == 0,
               "[sft {}] has no good record: all {} were bad (skip_bad_examples); the first: {}",
               source_, report_.skipped, report_.first_errors.front());
      throw Error(fmt::format("[sft {}] has no records", source_));
    }
    const std::optional<Record> record = read_record();
    if (!record) {
      open_.reset();
      continue;
    }
    try {
      SftExample ex = example(*record);
      ++report_.examples;
      return ex;
    } catch (const Error& e) {
      report_.bad_record(e, options_.skip_bad_examples);
    }
  }
}

std::vector<SftExample> read_sft_examples(const std::string& source, const SftReadOptions& options,
                                          SftReadReport* report) {
  SftReader reader(source, options);
  std::vector<SftExample> examples;
  while (std::optional<SftExample> ex = reader.next()) examples.push_back(std::move(*ex));
  if (report != nullptr) *report = reader.report();
  return examples;
}

}  // namespace fitgrad::data
