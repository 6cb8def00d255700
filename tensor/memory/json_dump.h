// A large JSON document (a trace of millions of events, a memviz page's data) as text, in
// pieces that read the interrupt flag (Note [Interruption points]): nlohmann's serializer
// writing through an output that checks the flag every 64 KiB, so SIGINT stops a command
// while it writes its memory record, as it does while it plans.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fitgrad {

// json::dump(-1, ' ', false, handler): compact, invalid UTF-8 as `handler` says.
std::string dump_interruptibly(
    const nlohmann::json& doc,
    nlohmann::json::error_handler_t handler = nlohmann::json::error_handler_t::strict);

}  // namespace fitgrad
