// The `fitgrad` command line (DESIGN.md, apps/). Subcommands: `train` (apps/train/),
// `generate` (apps/generate.h) and `inspect` (apps/inspect.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/generate.h"
#include "apps/inspect.h"
#include "apps/train/train_command.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  CLI::App app{"fitgrad: train transformer decoders where memory is the limit"};
  app.require_subcommand(1);
  std::string path;
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "List the tensors (name, dtype, shape, bytes) and metadata of a safetensors or GGUF file");
  inspect->add_option("FILE", path, "a .safetensors or .gguf file")->required();
  fitgrad::apps::add_generate_command(app);
  fitgrad::apps::add_train_command(app);
  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect) fitgrad::apps::inspect_file(path, std::cout);
  } catch (const fitgrad::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
