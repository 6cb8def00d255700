// Whether a process of this host still runs, as the rendezvous (a stale store's keys, two
// processes claiming one rank) and a failed collective (a peer that died) ask it of a pid
// that a rank wrote down; and this host's name, which a rank writes down beside its pid.
//
// Note [A pid is a process's]
// kill(pid, 0) also succeeds for a thread's id, and thread ids come from the same counter as
// process ids: once the counter wraps, a pid written down by a rank that died can be the id
// of some thread of a live process, this one's included, and a dead rank would be taken for
// alive. So a pid runs only when /proc/<pid> is a thread group's leader (its Tgid is the
// pid) that is not a zombie. Where /proc cannot be read, kill's answer stands.
#pragma once

#include <cstdint>
#include <string>

namespace fitgrad::dist {

bool process_runs(int64_t pid);

// gethostname's answer: the name a pid is qualified by.
std::string host_name();

}  // namespace fitgrad::dist
