// Unicode Normalization Form C (see nfc.h).
//
// Note [NFC in three passes]
// 1. Decompose: each code point is replaced by its full canonical decomposition (the table's
//    one-step mappings applied until none applies; a Hangul syllable arithmetically into its
//    leading consonant, vowel and optional trailing consonant).
// 2. Order: within each run of non-starters (combining class > 0), the marks are sorted by
//    class, stably.
// 3. Compose: walking from the start, each character C after the last starter S composes
//    with it when S + C is a primary composite (or a Hangul L + V or LV + T) and C is not
//    blocked (no character between them has class 0 or a class >= C's).
// Text already in NFC (nearly all text) comes back byte for byte; a quick pass first checks
// for a code point that could change and returns the input when there is none.
#include "data/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/unicode_nfc_tables.h"
#include "data/utf8.h"

namespace fitgrad::data {
namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  const auto* begin = detail::kCombiningClasses;
  const auto* end = begin + detail::kCombiningClassCount;
  const auto* it = std::lower_bound(
      begin, end, cp, [](const detail::CombiningClass& c, char32_t v) { return c.cp < v; });
  return it != end && it->cp == cp ? it->ccc : 0;
}

const detail::Decomposition* decomposition(char32_t cp) {
  const auto* begin = detail::kDecompositions;
  const auto* end = begin + detail::kDecompositionCount;
  const auto* it = std::lower_bound(
      begin, end, cp, [](const detail::Decomposition& d, char32_t v) { return d.cp < v; });
  return it != end && it->cp == cp ? it : nullptr;
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* begin = detail::kCompositions;
  const auto* end = begin + detail::kCompositionCount;
  const auto* it =
      std::lower_bound(begin, end, std::pair{a, b},
                       [](const detail::Composition& c, std::pair<char32_t, char32_t> v) {
                         return c.first != v.first ? c.first < v.first : c.second < v.second;
                       });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const detail::Decomposition* d = decomposition(cp)) {
    decompose(d->first, out);
    if (d->second != 0) decompose(d->second, out);
    return;
  }
  out.push_back(cp);
}

// The code points that are the second of some composition pair, sorted.
const std::vector<char32_t>& second_parts() {
  static const std::vector<char32_t> seconds = [] {
    std::vector<char32_t> v;
    for (size_t i = 0; i < detail::kCompositionCount; ++i)
      v.push_back(detail::kCompositions[i].second);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }();
  return seconds;
}

// Whether cp could change under NFC or change what precedes it: it decomposes, is a mark,
// is the second of a composition, or is a Hangul jamo or syllable.
bool may_change(char32_t cp) {
  if (cp < 0x300) return false;  // below the first combining mark nothing changes
  return combining_class(cp) != 0 || decomposition(cp) != nullptr ||
         (cp >= kLBase && cp < kTBase + kTCount) || (cp >= kSBase && cp < kSBase + kSCount) ||
         std::binary_search(second_parts().begin(), second_parts().end(), cp);
}

// NFC of a run of well-formed code points, appended to out as UTF-8.
void normalize_run(const std::vector<char32_t>& run, std::string& out) {
  std::vector<char32_t> d;
  for (char32_t cp : run) decompose(cp, d);
  // Canonical ordering: insertion sort of each run of non-starters by class (stable).
  for (size_t i = 1; i < d.size(); ++i) {
    const uint8_t c = combining_class(d[i]);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0 && combining_class(d[j - 1]) > c) {
      std::swap(d[j - 1], d[j]);
      --j;
    }
  }
  // Composition.
  std::vector<char32_t> r;
  size_t starter = SIZE_MAX;
  uint8_t last = 0;
  for (char32_t cp : d) {
    const uint8_t c = combining_class(cp);
    if (starter != SIZE_MAX) {
      const bool blocked = r.size() - 1 != starter && (last == 0 || last >= c);
      if (!blocked) {
        if (const char32_t composite = compose(r[starter], cp)) {
          r[starter] = composite;
          continue;
        }
      }
    }
    if (c == 0) {
      starter = r.size();
      last = 0;
    } else {
      last = c;
    }
    r.push_back(cp);
  }
  for (char32_t cp : r) append_utf8(out, cp);
}

}  // namespace

std::string nfc(std::string_view text) {
  bool any = false;
  for (size_t pos = 0; pos < text.size() && !any;) {
    const Utf8Char c = decode_utf8(text, pos);
    any = c.cp != kInvalidCodePoint && may_change(c.cp);
    pos += c.length;
  }
  if (!any) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::vector<char32_t> run;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.cp == kInvalidCodePoint) {
      normalize_run(run, out);
      run.clear();
      out.push_back(text[pos]);
    } else {
      run.push_back(c.cp);
    }
    pos += c.length;
  }
  normalize_run(run, out);
  return out;
}

const char* nfc_unicode_version() { return detail::kNfcUnicodeVersion; }

}  // namespace fitgrad::data
