// Gloo's rendezvous stores as the ranks of a job use them (Note [Rendezvous stores] in
// dist/rendezvous.h): opened from FITGRAD_STORE's spec, with waits that stop on a signal, and
// the first meeting of the ranks, which names a stale store, two ranks claiming one RANK and
// ranks that disagree on WORLD_SIZE before Gloo's own keys can collide.
//
// Note [Waits that stop]
// A rank that waits in the rendezvous for a peer that never comes waits up to --ddp_timeout
// (30 minutes by default). Gloo's stores block for the whole wait, so the store handed to
// Gloo waits in slices of 100 ms and reads the interrupt flag between them
// (tensor/interrupt.h): a Ctrl-C or SIGTERM stops the rank within a slice, with the guard's
// usual exit code. A key read is always preceded by a wait with the group's timeout, so
// Gloo's own 30 s default never applies.
//
// Note [Meeting in the store]
// Before Gloo writes its keys, each rank writes "fitgrad.rank.<r>" = "<pid> <host>
// <world size>" and reads every other rank's. The key being there already means another
// process claims the same RANK (its pid is alive on this host) or the store holds an earlier
// job's keys (its pid is gone): the first is refused naming both processes, the second
// naming the store and how to clear it. A peer's key whose process on this host is gone is
// stale too, and a peer with another WORLD_SIZE is refused naming both values. Gloo's own
// message for each of these was "File already exists" or a timeout. Across hosts a pid
// cannot be checked: the message then gives both causes.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>

namespace fitgrad::dist {

// The store that `spec` names ("file:<dir>" or "redis:<host>:<port>"), its waits in slices
// (Note [Waits that stop]); `timeout` bounds a wait that gives none. Throws fitgrad::Error
// on a spec of another form or a Redis store this Gloo cannot open.
std::shared_ptr<gloo::rendezvous::Store> open_store(const std::string& spec,
                                                    std::chrono::milliseconds timeout);

// Note [Meeting in the store]: returns once every rank of `world_size` has written a key
// that agrees, or throws fitgrad::Error naming the culprit and the fix.
void meet_in_store(gloo::rendezvous::Store& store, const std::string& spec, int rank,
                   int world_size, std::chrono::milliseconds timeout);

}  // namespace fitgrad::dist
