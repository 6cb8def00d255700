// The host-read counter (see host_reads.h).
#include "tensor/host_reads.h"

#include <atomic>

namespace fitgrad {

namespace {
std::atomic<uint64_t> reads{0};
}  // namespace

void count_host_read() { reads.fetch_add(1, std::memory_order_relaxed); }

uint64_t host_read_count() { return reads.load(std::memory_order_relaxed); }

}  // namespace fitgrad
