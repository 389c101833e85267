// The operating-system services the addon needs beyond standard C++ and threads.h (threads and CPU
// clocks): the stack and heap queries, so POSIX/Windows differences stay in these two files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qjsn::platform {

// Lowest address of the calling thread's stack, or 0 when the system does not say.
uintptr_t currentThreadStackLow();

// The allocator's usable size of a block from malloc (0 for null).
size_t mallocUsableSize(void* p);

// Hands the allocator's free pages back to the system where the allocator supports it.
void releaseFreeHeap();

}  // namespace qjsn::platform
