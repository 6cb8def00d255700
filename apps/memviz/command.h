// `fitgrad memviz TRACE [-o PAGE.html] [--svg PICTURE.svg] [--overwrite]`: the allocator
// trace that `fitgrad train` writes (memory_trace.json, or memory.json) drawn as a
// self-contained HTML page (page.h) and/or a static SVG of the stacked timeline
// (timeline.h). The outputs follow Note [Output policy] (apps/output_policy.h): either may
// be "-" for standard output, and both appear or neither does.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace fitgrad::apps {

struct MemvizArgs {
  std::string input;  // memory_trace.json or memory.json
  std::string html;   // -o: the page
  std::string svg;    // --svg: the picture
  bool overwrite = false;
};

// Reads the trace, writes what `args` asks for and says so on `out` (on std::cerr when an
// output is "-", which goes to `out`). Throws fitgrad::Error "[memviz] ..." on bad input,
// naming the file, and for an output the policy refuses, before anything is written.
void run_memviz(const MemvizArgs& args, std::ostream& out);

// Registers the `memviz` subcommand; it runs through run_guarded (apps/guard.h).
void add_memviz_command(CLI::App& app);

}  // namespace fitgrad::apps
