// The memory record of a training run as the run-equality tests compare it: the ledger's
// events after the "train: start" mark (kind, size, requested bytes, category, label; and
// apart, each block's segment and offset, so that the order of frees counts too) and the peaks
// above that mark, read from the memory.json a run writes (docs/memory.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fitgrad::apps {

struct Trace {
  std::vector<std::string> events;  // "kind size requested category label", from the start
  // Each event's "segment:offset", the segment numbered by its first use after the start.
  std::vector<std::string> places;
  int64_t peak_above_start = 0;  // the run's peak allocated minus allocated at its start
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
  std::map<std::string, size_t> segments;
  for (size_t i = start + 1; i < events.size(); ++i) {
    const nlohmann::json& e = events[i];
    auto text = [&](const char* key) {
      return e.at(key).is_null() ? std::string("-") : e.at(key).dump();
    };
    t.events.push_back(text("kind") + " " + text("size") + " " + text("requested") + " " +
                       text("category") + " " + text("label"));
    // Segments by their order of first use after the start: their ids count the segments
    // made before it, which differ between a run and its dry run.
    const std::string segment = text("segment");
    const auto known = segments.emplace(segment, segments.size()).first;
    t.places.push_back(std::to_string(known->second) + ":" + text("offset"));
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

// A dry run's record (in `dry_dir`) equals the real run's (in `real_dir`) event for event after
// the start mark, and so does its peak; the real run's trace is no stub.
inline void expect_dry_run_is_the_run(const std::filesystem::path& real_dir,
                                      const std::filesystem::path& dry_dir) {
  const Trace real = read_trace(real_dir), dry = read_trace(dry_dir);
  EXPECT_GT(real.events.size(), 100u) << real_dir;
  for (size_t i = 0; i < std::min(real.events.size(), dry.events.size()); ++i) {
    ASSERT_EQ(dry.events[i], real.events[i]) << "event " << i << " of " << dry_dir;
    ASSERT_EQ(dry.places[i], real.places[i]) << "event " << i << " of " << dry_dir;
  }
  ASSERT_EQ(dry.events.size(), real.events.size()) << dry_dir;
  EXPECT_EQ(dry.peak_above_start, real.peak_above_start) << dry_dir;
}

}  // namespace fitgrad::apps
