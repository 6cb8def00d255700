// The count of host reads: the points where host code waits for a value a device computed
// (issue 26). On a GPU each one drains the queue of kernels, so a training step makes none
// except the logging read every --logging_steps (Note [Host reads]).
//
// Note [Host reads]
// A read is counted where a tensor's value reaches host control flow, whatever the device:
// Tensor::item, Tensor::at, Tensor::to_vector, ops::sum_squares (a double), and a
// device-to-host Tensor::to. A CPU run counts the same reads that the same code makes on a
// card, where they would stall, so a CPU test (tests/train/host_reads_test.cpp) holds the
// step to "no read outside logging". Code that reads a CPU tensor's bytes through data<T>()
// is host code by construction and is not counted; front-ends never do that for values that
// a kernel computed.
#pragma once

#include <cstdint>

namespace fitgrad {

// Counts one host read (thread-safe).
void count_host_read();
// Host reads since the process started.
uint64_t host_read_count();

}  // namespace fitgrad
