// `fitgrad memviz` (command.h): options, the run, and the line that says what it wrote.
#include "apps/memviz/command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "apps/guard.h"
#include "apps/output_policy.h"
#include "io/memviz/memviz_trace.h"
#include "io/memviz/page.h"
#include "io/memviz/timeline.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::apps {

using io::build_timeline;
using io::memviz_page;
using io::MemvizTrace;
using io::read_memviz_trace;
using io::timeline_svg;

void run_memviz(const MemvizArgs& a, std::ostream& out) {
  FG_CHECK(!a.html.empty() || !a.svg.empty(),
           "[memviz] say what to write: -o PAGE.html, --svg PICTURE.svg, or both");
  OutputPolicy outputs("memviz", a.overwrite);
  outputs.input("TRACE", a.input);
  constexpr size_t kNone = size_t(-1);
  const size_t html = a.html.empty() ? kNone : outputs.output("-o", a.html, /*stdout_ok=*/true);
  const size_t svg = a.svg.empty() ? kNone : outputs.output("--svg", a.svg, /*stdout_ok=*/true);
  std::ostream& said = a.html == "-" || a.svg == "-" ? std::cerr : out;
  said << fmt::format("reading {}\n", a.input);  // Note [Line-buffered progress]
  const MemvizTrace t = read_memviz_trace(a.input);
  if (html != kNone) outputs.text(html, memviz_page(t));
  if (svg != kNone) outputs.text(svg, timeline_svg(t, build_timeline(t)));
  outputs.commit(out);
  std::string wrote = a.html == "-" ? "the page to standard output" : a.html;
  if (!a.svg.empty())
    wrote += (wrote.empty() ? "" : " and ") +
             (a.svg == "-" ? std::string("the SVG to standard output") : a.svg);
  const std::string mark =
      t.peak["mark"].is_string() ? fmt::format(" ({})", t.peak["mark"].get<std::string>()) : "";
  said << fmt::format("wrote {}: {} events of {} ({} dropped), peak {} allocated at event #{}{}\n",
                      wrote, t.window, t.total_events, t.dropped,
                      format_bytes(t.peak["allocated"].get<int64_t>()),
                      t.peak["seq"].get<uint64_t>(), mark);
}

void add_memviz_command(CLI::App& app) {
  auto args = std::make_shared<MemvizArgs>();
  CLI::App* cmd = app.add_subcommand(
      "memviz",
      "Draw an allocator trace (memory_trace.json or memory.json) as a self-contained HTML "
      "page and/or a static SVG");
  cmd->add_option("TRACE", args->input,
                  "memory_trace.json (the Chrome trace `fitgrad train` writes) or memory.json")
      ->required();
  cmd->add_option("-o,--output", args->html,
                  "write the page here (one HTML file, inline CSS and script, no network); - "
                  "for standard output");
  cmd->add_option("--svg", args->svg,
                  "write the stacked timeline with the peak marker here as a static SVG; - for "
                  "standard output");
  cmd->add_flag("--overwrite", args->overwrite, "replace an existing -o or --svg file");
  cmd->footer(
      "Give -o, --svg or both. The page shows live bytes by category over the events, with "
      "the trace's marks (\"step 3 / backward\") and the peak; the event under the pointer "
      "(label, size, category); the allocator's segments and blocks after the event chosen "
      "with the slider or a click on the timeline, replayed from the trace; and the peak's "
      "breakdown by category, by label and reserved-but-free. A trace of more than "
      "1200 events is thinned for drawing, never at the peak; one of more than 131072 events "
      "is summarised while it is read (bounded memory), and its page shows the allocator "
      "state at the peak only. `fitgrad train` writes the "
      "page as memory.html beside memory_trace.json. docs/memory.md describes the inputs. An "
      "output is never an input, never inside a training run's directory and never a special "
      "file; an existing one is replaced only with --overwrite (docs/run_promises.md).");
  cmd->callback([args] {
    const int code = run_guarded("memviz", std::cout, std::cerr, [&] {
      run_memviz(*args, std::cout);
      return 0;
    });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace fitgrad::apps
