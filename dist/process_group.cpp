// Shards of a flat tensor (process_group.h, Note [Collective semantics]).
#include "dist/process_group.h"

#include <algorithm>

namespace fitgrad::dist {

Shard shard_of(int64_t n, int rank, int world) {
  const int64_t chunk = (n + world - 1) / world;
  const int64_t begin = std::min(n, chunk * rank);
  return {begin, std::min(n, begin + chunk) - begin};
}

}  // namespace fitgrad::dist
