// `fitgrad memviz` (apps/memviz/command.h): the command writes the page and the SVG of a
// trace, and says where; the page and the trace reader have their own tests in tests/io/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/memviz/command.h"
#include "tensor/error.h"
#include "tensor/memory/export.h"
#include "tests/io/memviz_fixture.h"

namespace fitgrad::apps {
namespace {

using namespace io::memviz_test;

TEST_F(MemvizTest, CommandWritesThePageAndTheSvg) {
  const auto trace = temp_path("memory_trace.json"), html = temp_path("out.html"),
             svg = temp_path("out.svg");
  write_chrome_trace(a_, trace.string());
  std::ostringstream out;
  run_memviz({trace.string(), html.string(), svg.string()}, out);
  EXPECT_NE(out.str().find("wrote " + html.string() + " and " + svg.string()), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(step 2 / forward)"), std::string::npos) << out.str();
  std::ifstream page(html), picture(svg);
  std::stringstream page_text, svg_text;
  page_text << page.rdbuf();
  svg_text << picture.rdbuf();
  EXPECT_EQ(page_data(page_text.str())["peak"]["allocated"], peak_report_json(a_)["allocated"]);
  EXPECT_EQ(svg_text.str().rfind("<svg", 0), 0u);
  EXPECT_THROW(run_memviz({trace.string(), "", ""}, out), Error);
  for (const auto& p : {trace, html, svg}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace fitgrad::apps
