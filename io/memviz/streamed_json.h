// Reading a large JSON document without holding all of it: the elements of chosen arrays
// (a trace's events) are handed to a callback one at a time as they are parsed, and the
// rest of the document (a few records) is kept as usual, with those arrays left empty.
//
// Note [memviz streams its events]
// A trace of 2,000,001 events took 5.7 GB as one nlohmann document (about 2.8 KB an event)
// before memviz read a field of it. Parsed through SAX, each event is a small document of
// its own, read into a VizEvent and dropped, so the reader holds the VizEvents (about 150
// bytes each, and only up to kKeptEvents: Note [Traces past the kept bound are
// summarised]) and one event's document at a time. The parse reads the interrupt flag
// every few thousand values (Note [Interruption points]).
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fitgrad::io {

// A path of object keys from the root to an array, {"trace", "events"}.
using JsonPath = std::vector<std::string>;

// Parses `in`; each element of an array at one of `streamed` goes to
// on_element(which path, the element, its index, the kept document so far) instead of
// into the result; the document so far holds every value that closed before the element
// (memory.json's "peak" comes before its "trace"). Throws nlohmann::json::parse_error as
// json::parse does, and Interrupted on a signal.
nlohmann::json parse_streamed_json(
    std::istream& in, const std::vector<JsonPath>& streamed,
    const std::function<void(size_t path, const nlohmann::json& element, size_t index,
                             const nlohmann::json& so_far)>& on_element);

}  // namespace fitgrad::io
