// The `fitgrad` command line (DESIGN.md, apps/). Subcommands: `train` (apps/train/),
// `generate` (apps/generate.h), `eval` (apps/eval.h), `inspect` (apps/inspect.h), `quantize` (apps/quantize.h),
// `export` (apps/export.h), `memplan` (apps/memplan/memplan_command.h), `memviz`
// (apps/memviz/command.h) and `launch` (apps/launch.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/eval.h"
#include "apps/export.h"
#include "apps/generate.h"
#include "apps/guard.h"
#include "apps/inspect.h"
#include "apps/launch.h"
#include "apps/memplan/memplan_command.h"
#include "apps/memviz/command.h"
#include "apps/quantize.h"
#include "apps/train/train_command.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/cpu_isa.h"
#include "tensor/error.h"

// Note [OpenMP wait policy]
// libgomp's threads spin after each parallel region, waiting for the next one, then sleep.
// When the GEMMs ran on OpenBLAS's own threads, the spinning OpenMP team took the cores those
// GEMMs needed: the demo model's training step measured 1.6x faster with
// OMP_WAIT_POLICY=passive on an idle 2-core machine (bench/RESULTS.md). Where the GEMMs run on
// oneDNN (the default backend of a build with it, tensor/cpu/gemm.cpp), they are OpenMP
// regions of the same team, and passive waits cost a futex wake per region instead: on a
// 2-core AMX Xeon (2026-12-04, issue 45) `generate --dtype bf16` on SmolLM2-135M decoded 19-20
// tokens/s passive against 40-43 spinning, and the demo's training step was 11% slower. A
// short spin keeps that and bounds what a waiting thread takes from another process (a
// second test, a loader) between regions. GOMP_SPINCOUNT=3000: decode (with the bf16 GEMV) at
// 72-77 tokens/s against 74-79 at libgomp's own 300000 and 60-63 at 1000; on a loaded machine (a
// build beside it) a 1500-step llama-tiny run took 45 s at 1000, 69 s at 10000 and 37 s
// passive. libgomp reads both variables when it is loaded, before main, so the command line
// sets the one it needs and executes itself again: passive where the GEMMs run on OpenBLAS
// (the CPU backend's rule gemm_threads_apart, tensor/backend/kernel_table.h), the short spin
// elsewhere.
// A user who sets OMP_WAIT_POLICY or GOMP_SPINCOUNT opts out.
static void choose_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  const bool openblas =
      fitgrad::backend::backend_rules(fitgrad::DeviceType::cpu).gemm_threads_apart;
  const char* name = openblas ? "OMP_WAIT_POLICY" : "GOMP_SPINCOUNT";
  ::setenv(name, openblas ? "passive" : "3000", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: run on with the default
  ::unsetenv(name);
}

// Note [Line-buffered progress]
// Every command reports its progress on standard output line by line ("target: ...",
// "memory record: ...", train's step lines), and a redirected log must show how far a
// command got when it was stopped or killed: standard output is line-buffered even when
// it is a file or a pipe (std::cout writes through stdio, which it is synchronised with).
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {  // a bad FITGRAD_CPU_ISA or FITGRAD_GEMM is one line before anything runs (Note [CPU ISA
         // levels], Note [GEMM backend per machine])
    fitgrad::cpu_isa();
    fitgrad::backend::backend_rules(fitgrad::DeviceType::cpu);  // chooses the GEMM library
  } catch (const fitgrad::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return fitgrad::apps::kExitBadInput;
  }
  choose_openmp_waits(argv);  // after the check: it reads the CPU backend's rules
  CLI::App app{"fitgrad: train transformer decoders where memory is the limit"};
  app.require_subcommand(1);
  std::string path;
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "List the tensors (name, dtype, shape, bytes) and metadata of a safetensors or GGUF file");
  inspect->add_option("FILE", path, "a .safetensors or .gguf file")->required();
  fitgrad::apps::ExportArgs export_args;
  CLI::App* export_cmd = fitgrad::apps::add_export_command(app, export_args);
  fitgrad::apps::QuantizeArgs quantize_args;
  CLI::App* quantize = fitgrad::apps::add_quantize_command(app, quantize_args);
  fitgrad::apps::add_generate_command(app);
  fitgrad::apps::add_eval_command(app);
  fitgrad::apps::add_train_command(app);
  fitgrad::apps::add_memplan_command(app);
  fitgrad::apps::add_memviz_command(app);
  fitgrad::apps::LaunchArgs launch_args;
  CLI::App* launch = fitgrad::apps::add_launch_command(app, launch_args);
  app.footer(
      "Exit codes: 0 done; 1 bad input (a flag, a file, a combination: one line names it); 3 "
      "out of memory in `train` (the allocator's report is printed, the newest checkpoint is "
      "intact); 128 + N after signal N (SIGINT, SIGTERM), on which every command stops within "
      "a second and says what it did (`train` saves a checkpoint of its last complete step "
      "first).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own code, its message already printed
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; any other parse error is bad input.
    const int code = app.exit(e);
    return code == 0 ? 0 : fitgrad::apps::kExitBadInput;
  }
  if (*launch)
    return fitgrad::apps::run_guarded("launch", std::cout, std::cerr, [&] {
      launch_args.command = launch->remaining();
      return fitgrad::apps::run_launch(launch_args, std::cerr);
    });
  if (*inspect)
    return fitgrad::apps::run_guarded("inspect", std::cout, std::cerr, [&] {
      fitgrad::apps::inspect_file(path, std::cout);
      return 0;
    });
  if (*export_cmd)
    return fitgrad::apps::run_guarded("export", std::cout, std::cerr, [&] {
      fitgrad::apps::export_merged(export_args, std::cout);
      return 0;
    });
  if (*quantize)
    return fitgrad::apps::run_guarded("quantize", std::cout, std::cerr, [&] {
      fitgrad::apps::quantize_model_file(quantize_args, std::cout);
      return 0;
    });
  return 0;
}
