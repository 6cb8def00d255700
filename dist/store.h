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
// Note [A store that stops answering]
// Gloo's RedisStore reads each reply with no timeout, so a store behind a link that went down
// (or a server that hangs) would hold a rank for ever: in the rendezvous, or in the marks a
// failing collective leaves there (Note [Naming the failed peer] in dist/gloo_group.cpp).
// So every request runs on a helper thread that the rank waits for in 100 ms slices, reading
// the stop flag, for at most 10 s (a healthy store answers in milliseconds; a wait gets its
// slice on top). A request not answered by then fails, naming the store, and makes the store
// gone for this process: the helper stays blocked on the dead connection, holding the store,
// and every later request fails at once, since one connection cannot serve a second request
// beside it. A store that answers with an error (a Redis server killed, a connection reset)
// fails the request at once with that error, instead of being waited on as a key not yet
// there.
//
// Note [A job removes its keys]
// A Redis server outlives the job that met in it, and a second job there would find the
// first one's keys: Gloo's, and fitgrad's own, which Note [Meeting in the store] refuses as
// stale. So each rank of a job that ends without a failed collective deletes the keys it set
// (its group's destructor); a rank whose collective failed keeps its marks, which the other
// ranks read to name the peer that failed (Note [Naming the failed peer] in
// dist/gloo_group.cpp), and a job that died leaves its keys to be refused with the fix. A
// file store is a directory: the job's own is removed whole (Note [Rendezvous stores]).
//
// Note [Meeting in the store]
// Before Gloo writes its keys, each rank writes "fitgrad.rank.<r>" = "<pid> <host>
// <world size>" and reads every other rank's. The key being there already means another
// process claims the same RANK (its pid is alive on this host) or the store holds an earlier
// job's keys (its pid is gone): the first is refused naming both processes, the second
// naming the store and how to clear it. A peer with another WORLD_SIZE is refused naming
// both values, and this is checked before whether the peer is gone: a peer that read this
// rank's key, found the disagreement and exited is gone by the time its key is read here,
// and "an earlier job's keys" would then blame the store for the disagreement (the message
// adds how to clear the store unless the peer runs on this host). A peer's
// key with the same WORLD_SIZE whose process on this host is gone is stale. Gloo's own
// message for each of these was "File already exists" or a timeout. Across hosts a pid
// cannot be checked: the message then gives both causes.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace fitgrad::dist {

// A Redis server's address, "HOST:PORT" (FITGRAD_STORE's redis:HOST:PORT, launch's
// --rdzv_endpoint), the port in [1, 65535]; nullopt for any other text.
struct Endpoint {
  std::string host;
  int port = 0;
};
std::optional<Endpoint> parse_endpoint(const std::string& text);

// The store that `spec` names ("file:<dir>" or "redis:<host>:<port>"), its waits in slices
// (Note [Waits that stop]); `timeout` bounds a wait that gives none. Throws fitgrad::Error
// on a spec of another form or a Redis store this Gloo cannot open.
std::shared_ptr<gloo::rendezvous::Store> open_store(const std::string& spec,
                                                    std::chrono::milliseconds timeout);

// Note [A job removes its keys]: the keys this process set in `store` (one open_store made),
// deleted from a Redis server; nothing for a file store.
void remove_own_keys(gloo::rendezvous::Store& store);

// Note [Meeting in the store]: returns once every rank of `world_size` has written a key
// that agrees, or throws fitgrad::Error naming the culprit and the fix.
void meet_in_store(gloo::rendezvous::Store& store, const std::string& spec, int rank,
                   int world_size, std::chrono::milliseconds timeout);

}  // namespace fitgrad::dist
