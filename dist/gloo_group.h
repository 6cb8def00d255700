// The Gloo backend of dist::ProcessGroup (process_group.h): collectives on cpu tensors over
// Gloo's TCP transport, Debian's libgloo-dev. Rendezvous goes through one of Gloo's own
// stores (dist/rendezvous.h chooses it): its FileStore on one host, its RedisStore across
// hosts.
//
// Note [Gloo collectives on one worker thread]
// Gloo's collectives are blocking calls. The group runs them, in the order they were
// called, on one worker thread of its own, so an all-reduce started from a gradient hook
// runs while the backward goes on (Note [DDP buckets] in dist/ddp.h); the blocking calls
// queue behind it and wait. Each collective gets the next tag of a counter that every rank
// advances alike. Gloo's reductions know f32, f64, i32 and i64; bf16 and f16 are summed by
// a reduce function of ours (widened to f32, rounded back). The worker never allocates: a
// collective's buffers are the tensors given, allocated by the caller (DDP's buckets under
// Category::collective), and reduce-scatter's staging buffer is allocated by the calling
// thread before it is queued.
//
// Note [Reduce-scatter as an all-reduce]
// Gloo's option-style API (the one with per-call timeouts and tags) has reduce, all-reduce,
// all-gather(v), broadcast and barrier but no reduce-scatter; its ReduceScatterHalvingDoubling
// is of the older algorithm-object kind, allocates its own buffers outside the allocator
// and takes no timeout. reduce_scatter is therefore an all-reduce of the input into a
// staging copy (Category::collective, "dist.reduce_scatter") whose own shard is copied out:
// the same result with N times the traffic of a true reduce-scatter, which NCCL's backend
// has. ZeRO's memory is the shard's; the staging buffer is transient.
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"

namespace fitgrad::dist {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  std::string store;     // "file:<dir>" or "redis:<host>:<port>" (dist/rendezvous.h)
  std::string hostname;  // the address this rank's transport listens on
  std::chrono::milliseconds timeout{std::chrono::seconds(1800)};
  // A file store's directory that rank 0 removes when the group ends (the job's own store:
  // Note [Rendezvous stores] in dist/rendezvous.h), or "".
  std::string remove_at_end;
};

// Connects to every other rank (a full mesh through the store) and returns the group.
// Throws fitgrad::Error "[dist] ..." when the rendezvous fails or times out.
std::unique_ptr<ProcessGroup> make_gloo_group(const GlooOptions& options);

}  // namespace fitgrad::dist
