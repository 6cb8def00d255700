// The memory record of a training run as the run-equality tests compare it: the ledger's
// events after the "train: start" mark (kind, size, requested bytes, category, label) and
// the peaks above that mark, read from the memory.json a run writes (docs/memory.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fitgrad::apps {

struct Trace {
  std::vector<std::string> events;  // "kind size requested category label", from the start
  int64_t peak_above_start = 0;     // the run's peak allocated minus allocated at its start
  int64_t reserved_peak_above_start = 0;
  uint64_t peak_events_after_start = 0;
};

inline Trace read_trace(const std::filesystem::path& dir) {
  std::ifstream in(dir / "memory.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  const nlohmann::json& events = m.at("trace").at("events");
  EXPECT_FALSE(events.empty()) << dir;
  size_t start = events.size();
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].at("kind") == "mark" && events[i].at("label") == "train: start") start = i;
  EXPECT_LT(start, events.size()) << "no start mark in " << dir;
  Trace t;
  if (start == events.size()) return t;
  for (size_t i = start + 1; i < events.size(); ++i) {
    const nlohmann::json& e = events[i];
    auto text = [&](const char* key) {
      return e.at(key).is_null() ? std::string("-") : e.at(key).dump();
    };
    t.events.push_back(text("kind") + " " + text("size") + " " + text("requested") + " " +
                       text("category") + " " + text("label"));
  }
  const nlohmann::json& peak = m.at("peak");
  t.peak_above_start =
      peak.at("allocated").get<int64_t>() - events[start].at("allocated_after").get<int64_t>();
  t.peak_events_after_start =
      peak.at("seq").get<uint64_t>() - events[start].at("seq").get<uint64_t>();
  t.reserved_peak_above_start =
      m.at("stats").at("reserved_bytes").at("all").at("peak").get<int64_t>() -
      events[start].at("reserved_after").get<int64_t>();
  return t;
}

}  // namespace fitgrad::apps
