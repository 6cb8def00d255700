// Parsing a large JSON document (a memory trace of millions of events) so that SIGINT and
// SIGTERM stop it (Note [Interruption points]): nlohmann's DOM parser, driven through SAX
// with an interruption point every few thousand values.
#pragma once

#include <istream>
#include <nlohmann/json.hpp>

namespace fitgrad::apps {

// The document on `in`; throws nlohmann::json::parse_error as json::parse does, and
// Interrupted on a signal.
nlohmann::json parse_json_interruptibly(std::istream& in);

}  // namespace fitgrad::apps
