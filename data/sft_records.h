// Instruction and chat dataset files read record by record: a ".jsonl" file (one JSON object
// a line, blank lines skipped), a ".json" file (a top-level array of objects), or a folder of
// them, each record turned into an SftExample (data/sft_formats.h).
//
//   SftReader reader("data/chat/", {.format = SftFormat::auto_detect});
//   while (std::optional<SftExample> ex = reader.next()) encoder.encode(*ex);
//
// Sources. A folder contributes every regular file whose name ends in ".jsonl" or ".json" (in
// any case), found recursively, skipping hidden entries (a name starting with '.'), in byte
// order of their paths relative to the folder, as data/token_dataset.h lists ".txt" files; a
// folder that also holds .txt files is refused, naming them (Note [One kind of data a folder]
// in data/folder_files.cpp). A ".jsonl"
// file streams: one line is in memory at a time. A ".json" file is parsed whole. Keys keep
// their order (nlohmann::ordered_json), so a template that walks a message's keys sees them
// as written.
//
// Formats. Each file has one format: options.format when given (--dataset_format), else the
// one its first record's keys say (detect_sft_format). A record that does not fit its file's
// format is a bad record.
//
// Bad records (Note [Bad records] in sft_records.cpp). A record that is not valid JSON, not an
// object, lacks a field or has one of the wrong type, names an unknown role or holds an empty
// conversation throws fitgrad::Error naming the file, the record (the 1-based line of a .jsonl
// file, the 0-based index of a .json array) and the field; with skip_bad_examples it is
// counted in report() instead, with the first few messages kept, and never skipped silently.
// A source that cannot be read (missing, not a .jsonl/.json file, a folder without any, a
// .json file that is not an array) always throws, as does a source with no good record.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/sft_formats.h"
#include "tensor/error.h"

namespace fitgrad::data {

struct SftReadOptions {
  // auto_detect: each file's first record decides.
  SftFormat format = SftFormat::auto_detect;
  // The field of a text record (--dataset_text_field).
  std::string text_field = "text";
  // Count bad records in the report instead of throwing (--skip_bad_examples).
  bool skip_bad_examples = false;
};

struct SftReadReport {
  static constexpr size_t kKeptErrors = 5;
  int64_t examples = 0;  // good records returned so far
  int64_t skipped = 0;   // bad records skipped (skip_bad_examples)
  // The messages of the first kKeptErrors skipped records.
  std::vector<std::string> first_errors;

  // A bad record's error (Note [Bad records] in sft_records.cpp): counted when `skip`, else
  // thrown again with the way on (fix the record, or --skip_bad_examples).
  void bad_record(const Error& e, bool skip);
};

class SftReader {
 public:
  // Lists the source's files; throws fitgrad::Error "[sft <source>] ..." when it is missing,
  // not a .jsonl or .json file, or a folder without one.
  explicit SftReader(const std::string& source, SftReadOptions options = {});
  ~SftReader();
  SftReader(SftReader&&) noexcept;
  SftReader& operator=(SftReader&&) noexcept;

  // The next good record, or nullopt after the last. Throws for a bad record (unless
  // skip_bad_examples) and, at the end, when the source held no good record.
  std::optional<SftExample> next();

  const SftReadReport& report() const { return report_; }
  // The files in reading order.
  const std::vector<std::string>& files() const { return files_; }

 private:
  struct Open;  // the file being read

  bool open_next_file();
  struct Record {
    nlohmann::ordered_json value;
    std::string where;
    std::string parse_error;  // a .jsonl line that is not JSON: the parser's message
  };
  // The next record of the open file, or nullopt at its end.
  std::optional<Record> read_record();
  // The record's example; throws for a bad record.
  SftExample example(const Record& record);

  std::string source_;
  SftReadOptions options_;
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::unique_ptr<Open> open_;
  SftReadReport report_;
};

// Every good record of `source`, with the reader's report in *report when not null.
std::vector<SftExample> read_sft_examples(const std::string& source,
                                          const SftReadOptions& options = {},
                                          SftReadReport* report = nullptr);

}  // namespace fitgrad::data
