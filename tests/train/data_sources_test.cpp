// --data and --eval_data as a run reads them (train/train_sft.h, data/folder_files.h): a folder
// of record files is read as its files are, wherever the working directory is, and its
// encodings' cache follows an edit of a file in the folder (not of a file of the same name in
// the working directory); a folder of records and text is refused naming both kinds; the
// extensions count in any case; the validation split is cut among the examples that keep a
// trained token; --objective dpo on text asks for preference records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/folder_files.h"
#include "data/sft_records.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/train/sft_model_folder.h"
#include "tests/train/train_fixture.h"
#include "train/model_source.h"
#include "train/train_sft.h"
#include "train/trainer.h"

namespace fitgrad::apps::test_train {
namespace {

using fitgrad::testing::expect_error;
using train::is_sft_data;
using train::load_model;
using train::load_sft_data;
using train::LoadedModel;
using train::SftData;
using train::TrainArgs;

class DataSources : public TrainFixture {
 protected:
  // A copy of the golden record file `name` (tests/golden/sft/records/) at root_/`to`.
  std::string copy_records(const std::string& name, const std::string& to) {
    const fs::path p = root_ / to;
    fs::create_directories(p.parent_path());
    fs::copy_file(fs::path(FITGRAD_GOLDEN_DIR) / "sft" / "records" / name, p,
                  fs::copy_options::overwrite_existing);
    return p.string();
  }
  TrainArgs sft_args(const std::string& data) {
    TrainArgs a = args(data, "out");
    a.model = fitgrad::testing::write_sft_model_folder(root_ / "model");
    a.seq_len = 256;
    a.val_fraction = 0.25;
    return a;
  }
  SftData load(const TrainArgs& a, const LoadedModel& lm, const std::string& cache) {
    std::ostringstream err;
    return load_sft_data(a, lm, err, (root_ / cache).string());
  }
};

// Runs the scope in another working directory.
struct InDirectory {
  fs::path old = fs::current_path();
  explicit InDirectory(const fs::path& dir) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(old); }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;
};

TEST_F(DataSources, AFolderOfRecordFilesIsReadAndAnEditedFileEncodedAgain) {
  copy_records("messages.jsonl", "recs/a.JSONL");
  copy_records("sharegpt.jsonl", "recs/sub/b.jsonl");
  // The working directory holds files of the same relative names: the run must not read them.
  copy_records("messages.jsonl", "cwd/a.JSONL");
  copy_records("sharegpt.jsonl", "cwd/sub/b.jsonl");
  const InDirectory cwd(root_ / "cwd");
  const TrainArgs a = sft_args((root_ / "recs").string());
  ASSERT_TRUE(is_sft_data(a));
  const LoadedModel lm = load_model(a.model, "", {});
  const SftData first = load(a, lm, "cache");
  EXPECT_NE(first.summary.find("8 examples (4 messages, 4 sharegpt; 6 train, 2 validation"),
            std::string::npos)
      << first.summary;
  EXPECT_NE(first.summary.find("encodings cached in"), std::string::npos) << first.summary;
  EXPECT_NE(load(a, lm, "cache").summary.find("encodings read from"), std::string::npos);

  // An edit of the folder's file (its first record dropped) is encoded again, as a fresh cache
  // encodes it.
  std::ifstream in(root_ / "recs" / "a.JSONL");
  std::string line, rest;
  std::getline(in, line);
  for (; std::getline(in, line);) rest += line + "\n";
  in.close();
  std::ofstream(root_ / "recs" / "a.JSONL", std::ios::trunc) << rest;
  const SftData edited = load(a, lm, "cache");
  EXPECT_NE(edited.summary.find("encodings cached in"), std::string::npos) << edited.summary;
  const SftData fresh = load(a, lm, "fresh-cache");
  EXPECT_EQ(edited.train.tokens, fresh.train.tokens);
  EXPECT_EQ(edited.val.tokens, fresh.val.tokens);
  EXPECT_NE(edited.summary.find("7 examples"), std::string::npos) << edited.summary;

  // The folder as --eval_data: its records are the validation split.
  TrainArgs e = sft_args(copy_records("text.jsonl", "text.jsonl"));
  e.eval_data = (root_ / "recs").string();
  const SftData with_eval = load(e, lm, "eval-cache");
  EXPECT_EQ(with_eval.train.examples, int64_t(data::read_sft_examples(e.data).size()));
  EXPECT_EQ(with_eval.val.examples, 7);
}

// Note [One kind of data a folder] in data/folder_files.cpp.
TEST_F(DataSources, AFolderOfRecordsAndTextIsRefusedNamingBoth) {
  copy_records("messages.jsonl", "mixed/a.jsonl");
  write_file("mixed/notes.txt", "what these records are");
  TrainArgs a = sft_args((root_ / "mixed").string());
  expect_error([&] { is_sft_data(a); }, "[data ", "a.jsonl) and text files (.txt: notes.txt)");
  a.dataset_format = "messages";
  expect_error([&] { data::read_sft_examples(a.data); }, "[sft ", "notes.txt");
  // A README is no data: the folder trains on its records.
  fs::remove(root_ / "mixed" / "notes.txt");
  write_file("mixed/README.md", "what these records are");
  a.dataset_format = "auto";
  EXPECT_TRUE(is_sft_data(a));
}

TEST_F(DataSources, ExtensionsCountInAnyCase) {
  EXPECT_TRUE(is_sft_data(sft_args(copy_records("messages.jsonl", "m.JSONL"))));
  const std::string alpaca = copy_records("alpaca.json", "a.Json");
  EXPECT_TRUE(is_sft_data(sft_args(alpaca)));
  EXPECT_EQ(data::read_sft_examples(alpaca).size(),
            data::read_sft_examples(copy_records("alpaca.json", "a.json")).size());
  EXPECT_EQ(data::data_kind("notes.TXT"), data::DataKind::text);
  EXPECT_EQ(data::data_kind("notes.md"), data::DataKind::none);
  fs::create_directories(root_ / "texts");
  write_file("texts/A.TXT", "some text");
  EXPECT_EQ(data::folder_kind(root_ / "texts", "[data]"), data::DataKind::text);
  EXPECT_FALSE(is_sft_data(sft_args((root_ / "texts").string())));
}

// The held-out examples are the last of those that keep a trained token: a last record whose
// completion --seq_len cuts away is left out (and reported), not the whole validation split:
// of 5 records 1 is held out, but of the 4 that keep a target.
TEST_F(DataSources, TheValidationSplitIsCutAmongTheExamplesThatKeepATarget) {
  std::string records;
  for (const char* country : {"France", "Italy", "Spain", "Japan"})
    records += std::string(R"({"prompt": "The capital of )") + country +
               R"( is", "completion": " a city."})" + "\n";
  const std::string data =
      write_file("pc.jsonl", records + R"({"prompt": ")" + std::string(400, 'x') +
                                 R"(", "completion": " cut away"})" + "\n");
  TrainArgs a = sft_args(data);
  a.seq_len = 32;
  a.val_fraction = 0.2;  // 1 of 5 records, or of the 4 that keep a target
  const LoadedModel lm = load_model(a.model, "", {});
  const SftData d = load(a, lm, "cache");
  EXPECT_EQ(d.train.examples, 3);
  EXPECT_EQ(d.val.examples, 1);
  EXPECT_EQ(d.val.dropped, std::vector<size_t>{1});
}

TEST_F(DataSources, DpoOnTextAsksForPreferenceRecords) {
  TrainArgs a = args(write_text("t.txt", 500, 8), "dpo");
  a.objective = "dpo";
  std::ostringstream out, err;
  expect_error([&] { train::run_train(a, out, err); }, "[train] --objective dpo",
               "needs preference records");
}

}  // namespace
}  // namespace fitgrad::apps::test_train
