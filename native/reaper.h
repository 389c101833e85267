// Frees disposed runtimes that hold much memory on a thread of its own. Freeing a runtime walks
// every object the guest made: 0.1–1 s for a few hundred MB, which on the Node main thread would
// stall every other session. Small runtimes (the common case) are still freed where they are
// disposed, where it costs less than the hand-over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine.h"

namespace qjsn {

// Runtimes using at most this much are freed by dispose() itself (well under a millisecond).
constexpr size_t kFreeInPlaceMaxBytes = 1u << 20;

// Takes the last reference to a disposed engine; its runtime is freed on the reaper thread (or
// here, should the system refuse to start that thread).
void freeOffThread(std::shared_ptr<Engine> engine);

// Counts the bytes of freed runtimes, wherever they were freed (any thread); every 64 MiB, hands
// the allocator's free pages back to the system so a server's RSS follows its live sandboxes.
// Not after each free: trimming walks the whole heap under the allocator's locks, and the pages it
// gives back fault in again on the next allocations.
void returnMemoryToSystem(int64_t freedBytes);
// How many times returnMemoryToSystem has given pages back, over the process's life.
double heapTrims();

struct ReaperBytes {
  size_t pending;  // handed over, not freed yet
  double freed;    // freed so far, over the process's life
};
ReaperBytes reaperBytes();

}  // namespace qjsn
