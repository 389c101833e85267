// Frees disposed runtimes that hold much memory on a thread of its own. Freeing a runtime walks
// every object the guest made: 0.1–1 s for a few hundred MB, which on the Node main thread would
// stall every other session. Small runtimes (the common case) are still freed where they are
// disposed, where it costs less than the hand-over.
#pragma once

#include <cstddef>
#include <memory>

#include "engine.h"

namespace qjsn {

// Runtimes using at most this much are freed by dispose() itself (well under a millisecond).
constexpr size_t kFreeInPlaceMaxBytes = 1u << 20;

// Takes the last reference to a disposed engine; its runtime is freed on the reaper thread (or
// here, should the system refuse to start that thread).
void freeOffThread(std::shared_ptr<Engine> engine);

struct ReaperBytes {
  size_t pending;  // handed over, not freed yet
  double freed;    // freed so far, over the process's life
};
ReaperBytes reaperBytes();

}  // namespace qjsn
