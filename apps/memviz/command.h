// `fitgrad memviz TRACE [-o PAGE.html] [--svg PICTURE.svg]`: the allocator trace that
// `fitgrad train` writes (memory_trace.json, or memory.json) drawn as a self-contained
// HTML page (page.h) and/or a static SVG of the stacked timeline (timeline.h).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace fitgrad::apps {

struct MemvizArgs {
  std::string input;  // memory_trace.json or memory.json
  std::string html;   // -o: the page
  std::string svg;    // --svg: the picture
};

// Reads the trace, writes what `args` asks for and says so on `out`. Throws
// fitgrad::Error "[memviz] ..." on bad input, naming the file.
void run_memviz(const MemvizArgs& args, std::ostream& out);

// Registers the `memviz` subcommand; it runs through run_guarded (apps/guard.h).
void add_memviz_command(CLI::App& app);

}  // namespace fitgrad::apps
