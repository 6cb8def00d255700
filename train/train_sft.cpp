// load_sft_data (train_sft.h).
#include "train/train_sft.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "data/folder_files.h"
#include "data/hf_tokenizer.h"
#include "data/sft_cache.h"
#include "data/sft_records.h"
#include "io/content_hash.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"
#include "train/chat_prompt.h"
#include "train/objectives/registry.h"

namespace fitgrad::train {

namespace fs = std::filesystem;

namespace {

// What the encodings depend on (Note [Encoded examples in the token cache] in
// data/sft_cache.cpp).
std::string encoding_fingerprint(const TrainArgs& a, const LoadedModel& lm, bool add_bos) {
  const data::Tokenizer& tok = *lm.tokenizer;
  const std::string chat =
      a.chat_template.empty()
          ? lm.tokenizer_vocabulary.is_object() && lm.tokenizer_vocabulary.contains("chat_template")
                ? lm.tokenizer_vocabulary.at("chat_template").dump()
                : std::string()
          : fmt::format("{:016x}", io::file_content_hash(a.chat_template, "[train]"));
  std::string fp = fmt::format(
      "fitgrad sft cache\ntokenizer {} {}\nvocab {} bos {} eos {}\ntemplate {:016x}\n"
      "train_on {} add_bos {} format {} text_field {} skip_bad {} pairs {}\n",
      lm.tokenizer_id.size(), lm.tokenizer_id, tok.vocab_size(), tok.bos().value_or(-1),
      tok.eos().value_or(-1), io::content_hash(chat), a.train_on, add_bos, a.dataset_format,
      a.dataset_text_field, a.skip_bad_examples,
      objective_entry(a.objective).data != ObjectiveData::tokens);
  // Unpaired examples: which completion each mismatched row takes (Note [KTO's mismatched
  // completions] in train/objectives/kto.h).
  if (objective_entry(a.objective).data == ObjectiveData::unpaired)
    fp += fmt::format("unpaired chunks {} val_fraction {}\n", a.per_device_train_batch_size,
                      a.val_fraction);
  for (const std::string& source : {a.data, a.eval_data}) {
    if (source.empty()) continue;
    const data::SftReader reader(source);  // the files it reads, as paths to open
    for (const std::string& f : reader.files())
      fp += fmt::format("file {} {} {:016x}\n", f, fs::file_size(f),
                        io::file_content_hash(f, "[train]"));
  }
  return fp;
}

// The first validation example: the last ceil(--val_fraction x k) of the k examples that keep a
// trained token within --seq_len are the validation split, so that the examples left out (and
// reported) count in neither split (Note [Instruction data in a run]).
size_t validation_cut(const std::vector<data::SftTokens>& encoded, bool pairs, const TrainArgs& a,
                      data::Packing packing) {
  // A wrapped example is cut nowhere (data/sft_stream.h).
  const int64_t limit =
      packing == data::Packing::wrapped ? std::numeric_limits<int64_t>::max() : a.seq_len;
  const size_t n = pairs ? encoded.size() / 2 : encoded.size();
  const auto kept = [&](size_t i) {
    return pairs ? data::kept_targets(encoded[2 * i], limit) > 0 &&
                       data::kept_targets(encoded[2 * i + 1], limit) > 0
                 : data::kept_targets(encoded[i], limit) > 0;
  };
  int64_t k = 0;
  for (size_t i = 0; i < n; ++i) k += kept(i) ? 1 : 0;
  int64_t n_val =
      a.val_fraction > 0 ? std::min<int64_t>(k, int64_t(std::ceil(a.val_fraction * double(k)))) : 0;
  size_t cut = n;
  while (n_val > 0) n_val -= kept(--cut) ? 1 : 0;
  return cut;
}

}  // namespace

// Note [Instruction data in a run]
// The records are read whole (a malformed one is an error naming its file, line and field, or
// with --skip_bad_examples counted), the last ceil(--val_fraction x k) of the k that keep a
// trained token (in file order, as the text split takes the stream's tail) are the validation
// split, the others left out in either split, or with --eval_data
// that data's records are and all of --data trains, and each is encoded as
// data/sft_encode.h says: conversations through the chat template (the model's, or
// --chat_template's), the loss on --train_on's part; plain text and plain prompts start with
// the bos when the tokenizer adds one to a text (data::vocabulary_adds_bos). Each example takes
// a layout of data/sft_stream.h, --packing's (auto: bfd, or none when every record is plain
// text, as TRL packs conversational and prompt/completion data), padded with the tokenizer's
// pad (else its eos, else 0), the padding no target; an example with no target left is
// dropped and reported. The loss is the mean over the trained targets of the whole accumulated
// batch (Note [Loss over trained targets] in train/train_step.cpp). The encodings are cached beside
// the data (Note [Encoded examples in the token cache] in data/sft_cache.cpp).
//
namespace {

// Note [KTO's mismatched completions] (train/objectives/kto.h): the example whose completion
// example i's mismatched row takes: the one before it in its chunk of `chunk` examples of its
// split (the first n_train examples, then the rest), the chunk's last for its first.
size_t mismatched_partner(size_t i, size_t n_train, size_t chunk, size_t n) {
  const size_t split = i < n_train ? 0 : n_train, split_end = i < n_train ? n_train : n;
  const size_t start = split + (i - split) / chunk * chunk;
  return i > start ? i - 1 : std::min(start + chunk, split_end) - 1;
}

}  // namespace

// Note [Preference runs]
// With --objective dpo or orpo every record is a preference pair (data/sft_formats.h), and
// each answer is encoded as a prompt_completion example of its prompt, the answer trained, as
// TRL's DPOTrainer tokenizes the prompt and prompt + answer. The split counts pairs; the
// layout is data::layout_pairs (an answer a row, padded), and the loader batches B pairs as
// 2B answers (Note [Preference batches] in data/loader.h): with --packing bfd (auto) packed
// into rows of --seq_len (Note [Packed pairs] in data/loader.cpp), with none a row each. A
// pair whose answer has no target within --seq_len is dropped whole and reported.
SftData load_sft_data(const TrainArgs& a, const LoadedModel& lm, std::ostream& err,
                      const std::string& cache_dir) {
  FG_CHECK(lm.tokenizer, "[train] instruction data needs a tokenizer; {} has none", a.model);
  data::SftReadOptions ro;
  ro.format = data::parse_sft_format(a.dataset_format);
  ro.text_field = a.dataset_text_field;
  ro.skip_bad_examples = a.skip_bad_examples;
  data::SftReadReport report;
  std::vector<data::SftExample> examples = data::read_sft_examples(a.data, ro, &report);
  // With --eval_data every example of --data trains and the validation split is that data's.
  auto n_data = int64_t(examples.size());
  if (!a.eval_data.empty()) {
    data::SftReadReport eval_report;
    std::vector<data::SftExample> val = data::read_sft_examples(a.eval_data, ro, &eval_report);
    FG_CHECK(!val.empty(), "[train] --eval_data {} holds no example", a.eval_data);
    report.skipped += eval_report.skipped;
    for (const std::string& e : eval_report.first_errors)
      if (report.first_errors.size() < data::SftReadReport::kKeptErrors)
        report.first_errors.push_back(e);
    examples.insert(examples.end(), std::make_move_iterator(val.begin()),
                    std::make_move_iterator(val.end()));
  }
  std::map<std::string, int64_t> formats;
  bool conversational = false, all_text = true;
  // Preference objectives train on pairs (Note [Preference runs]), KTO on unpaired examples
  // laid out as pairs (Note [KTO's mismatched completions]), nothing else on either.
  const ObjectiveData kind = objective_entry(a.objective).data;
  const bool pairs = kind != ObjectiveData::tokens;
  for (const data::SftExample& e : examples) {
    ++formats[std::string(data::sft_format_name(e.format))];
    conversational |= e.conversational();
    all_text &= e.format == data::SftFormat::text;
    FG_CHECK(kind != ObjectiveData::pairs || e.format == data::SftFormat::preference,
             "[train] --objective {} trains on preference records (prompt, chosen, rejected); {} "
             "is a {} record",
             a.objective, e.where, data::sft_format_name(e.format));
    FG_CHECK(kind != ObjectiveData::unpaired || e.format == data::SftFormat::unpaired_preference,
             "[train] --objective {} trains on unpaired preference records (prompt, completion, "
             "label: true where the completion is desirable, false where it is not); {} is a {} "
             "record{}",
             a.objective, e.where, data::sft_format_name(e.format),
             e.format == data::SftFormat::prompt_completion ? ": give it a boolean \"label\"" : "");
    FG_CHECK(pairs || e.format != data::SftFormat::preference,
             "[train] {} is a preference record (prompt, chosen, rejected): train on it with "
             "--objective dpo or orpo",
             e.where);
    FG_CHECK(pairs || e.format != data::SftFormat::unpaired_preference,
             "[train] {} is an unpaired preference record (prompt, completion, label): train on "
             "it with --objective kto",
             e.where);
  }
  std::optional<data::ChatTemplate> chat;
  if (conversational) chat = model_chat_template(lm, a.chat_template, a.model, "train");
  data::SftEncodeOptions eo;
  eo.train_on = data::parse_train_on(a.train_on);
  eo.add_bos = data::vocabulary_adds_bos(lm.tokenizer_vocabulary);
  const data::SftEncoder encoder(*lm.tokenizer, chat ? &*chat : nullptr, a.model, eo);
  const data::Tokenizer& tok = *lm.tokenizer;
  const int32_t pad = tok.pad() ? *tok.pad() : tok.eos() ? *tok.eos() : 0;

  const std::string fingerprint = encoding_fingerprint(a, lm, eo.add_bos);
  const std::string cache =
      (fs::path(cache_dir) /
       fmt::format("sft-{:016x}.tokens", io::content_hash(fs::absolute(a.data).string() + '\0' +
                                                          a.eval_data + '\0' + lm.tokenizer_id)))
          .string();
  std::optional<std::vector<data::SftTokens>> encoded =
      data::read_sft_cache(cache, fingerprint, examples.size() * (pairs ? 2 : 1));
  const bool cached = encoded.has_value();
  bool any_bad = false;  // a record the template refused: no cache is written
  if (!cached) {
    encoded.emplace();
    // A record the template refuses (raise_exception, a type error) is a bad record too
    // (Note [Bad records] in data/sft_records.cpp): with --skip_bad_examples it is counted and
    // left out, and the cache is not written, so every run skips and reports the same ones.
    // An unpaired example's rows wait for the split (its mismatched partner depends on it):
    // here its own answer is encoded only to find whether the template takes it.
    std::vector<bool> bad(examples.size(), false);
    for (size_t i = 0; i < examples.size(); ++i) {
      interruption_point();  // Note [Interruption points]: loading stops at once
      const data::SftExample& e = examples[i];
      try {
        if (!pairs) {
          encoded->push_back(encoder.encode(e));
        } else if (kind == ObjectiveData::pairs) {
          const auto [chosen, rejected] = data::preference_answers(e);
          data::SftTokens c = encoder.encode(chosen);
          data::SftTokens r = encoder.encode(rejected);
          encoded->push_back(std::move(c));
          encoded->push_back(std::move(r));
        } else {
          encoder.encode(data::unpaired_answers(e, e).first);
        }
      } catch (const Error& error) {
        report.bad_record(error, a.skip_bad_examples);
        bad[i] = true;
      }
    }
    any_bad = std::find(bad.begin(), bad.end(), true) != bad.end();
    if (any_bad) {
      std::vector<data::SftExample> kept;
      for (size_t i = 0; i < examples.size(); ++i)
        if (!bad[i]) kept.push_back(std::move(examples[i]));
      n_data -= std::count(bad.begin(), bad.begin() + n_data, true);
      FG_CHECK(!kept.empty(),
               "[train] {} has no good record: all {} were bad (skip_bad_examples); the first: {}",
               a.data, report.skipped, report.first_errors.front());
      examples = std::move(kept);
    }
  }
  const auto n = int64_t(examples.size());
  const int64_t n_val = !a.eval_data.empty() ? n - n_data
                        : a.val_fraction > 0
                            ? std::min<int64_t>(n, int64_t(std::ceil(a.val_fraction * double(n))))
                            : 0;
  if (!cached && kind == ObjectiveData::unpaired)
    for (size_t i = 0; i < examples.size(); ++i) {
      interruption_point();
      const auto [chosen, rejected] = data::unpaired_answers(
          examples[i],
          examples[mismatched_partner(i, size_t(n - n_val), size_t(a.per_device_train_batch_size),
                                      examples.size())]);
      encoded->push_back(encoder.encode(chosen));
      encoded->push_back(encoder.encode(rejected));
    }
  if (!cached && !any_bad) {
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    FG_CHECK(!ec, "[train] cannot create the cache folder {}: {}", cache_dir, ec.message());
    data::write_sft_cache(cache, fingerprint, *encoded, "[train " + cache + "]");
  }
  SftData d;
  d.packing = a.packing != "auto" ? data::parse_packing(a.packing)
              : all_text && n > 0 ? data::Packing::none
                                  : data::Packing::bfd;
  // Unpaired examples were paired with their mismatched completions by the plain split above
  // (their partners depend on it); the others' split counts only the examples that keep a
  // trained token (validation_cut).
  const size_t n_train = !a.eval_data.empty() ? size_t(n_data)
                         : kind == ObjectiveData::unpaired
                             ? size_t(n - n_val)
                             : validation_cut(*encoded, pairs, a, d.packing);
  d.pairs = pairs;
  if (pairs) {
    FG_ASSERT(d.packing != data::Packing::wrapped);  // refused with the objective
    std::vector<data::SftTokens> chosen[2], rejected[2];
    for (size_t i = 0; i < size_t(n); ++i) {
      chosen[i < n_train ? 0 : 1].push_back((*encoded)[2 * i]);
      rejected[i < n_train ? 0 : 1].push_back((*encoded)[2 * i + 1]);
    }
    d.train = data::layout_pairs(chosen[0], rejected[0], a.seq_len, pad);
    d.val = data::layout_pairs(chosen[1], rejected[1], a.seq_len, pad);
    if (kind == ObjectiveData::unpaired)  // each laid-out example's label
      for (auto [s, first] : {std::pair{&d.train, size_t(0)}, std::pair{&d.val, n_train}}) {
        const std::set<size_t> left_out(s->dropped.begin(), s->dropped.end());
        const size_t count = first == 0 ? n_train : size_t(n) - n_train;
        for (size_t i = 0; i < count; ++i)
          if (!left_out.contains(i)) s->labels.push_back(examples[first + i].label ? 1 : 0);
      }
  } else {
    const std::vector<data::SftTokens> train(encoded->begin(),
                                             encoded->begin() + ptrdiff_t(n_train));
    const std::vector<data::SftTokens> val(encoded->begin() + ptrdiff_t(n_train), encoded->end());
    d.train = data::layout_examples(train, a.seq_len, pad, d.packing);
    d.val = data::layout_examples(val, a.seq_len, pad, d.packing);
  }
  std::vector<std::string> dropped;
  for (const size_t i : d.train.dropped) dropped.push_back(examples[i].where);
  for (const size_t i : d.val.dropped) dropped.push_back(examples[n_train + i].where);
  if (!dropped.empty())
    err << fmt::format(
        "warning: {} {} have no trained token within --seq_len {} and are left out: {}{}\n",
        dropped.size(), pairs ? "pairs (an answer)" : "examples", a.seq_len,
        fmt::join(dropped.begin(),
                  dropped.begin() + std::ptrdiff_t(std::min<size_t>(5, dropped.size())), "; "),
        dropped.size() > 5 ? "; ..." : "");
  if (report.skipped > 0)
    err << fmt::format("warning: --skip_bad_examples skipped {} records, the first: {}\n",
                       report.skipped, fmt::join(report.first_errors, "; "));
  std::string kinds;
  for (const auto& [format, count] : formats)
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", count, format);
  const auto share = [](const data::SftStream& s) {
    return s.real_tokens > 0 ? 100.0 * double(s.trained_tokens) / double(s.real_tokens) : 0.0;
  };
  // The packing efficiency: of the tokens a step computes (rows x --seq_len), the share
  // that are the examples' and the share the loss learns.
  const auto computed = double(std::max<int64_t>(1, d.train.rows * a.seq_len));
  d.summary = fmt::format(
      "data: {} -> {} examples ({}; {} train, {} validation; {} cut to --seq_len {}, {} left "
      "without a target), {} tokens of which {} trained ({:.1f}%), --train_on {}{}, tokenizer {}, "
      "encodings {} {}\n"
      "packing: {}: {} training {} in {} rows of {}; of the computed tokens {:.1f}% are "
      "the examples' and {:.1f}% trained",
      a.data, n, kinds, d.train.examples, d.val.examples, d.train.truncated + d.val.truncated,
      a.seq_len, dropped.size(), d.train.real_tokens + d.val.real_tokens,
      d.train.trained_tokens + d.val.trained_tokens, share(d.train), a.train_on,
      chat ? fmt::format(", chat template of {}",
                         a.chat_template.empty() ? a.model : a.chat_template)
           : std::string(),
      lm.tokenizer_id, cached ? "read from" : "cached in", cache,
      pairs ? d.packing == data::Packing::bfd ? "pairs, each batch's answers packed into rows (bfd)"
                                              : "pairs, an answer a row"
            : data::packing_name(d.packing),
      d.train.examples, pairs ? "pairs" : "examples", d.train.rows, a.seq_len,
      100.0 * double(d.train.real_tokens) / computed,
      100.0 * double(d.train.trained_tokens) / computed);
  return d;
}

}  // namespace fitgrad::train
