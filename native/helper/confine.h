// How a helper process confines itself before it reads a frame (native/helper/confine.cc).
#pragma once

#include <cstdint>

namespace qjsn::helper {

// Linux: death with the parent, every descriptor but 0-2 (/dev/null) and `channelFd` closed,
// RLIMIT_CORE 0, RLIMIT_NOFILE minimal, RLIMIT_AS `addressSpaceBytes` (0: left alone), no new
// privileges, and a seccomp-bpf allowlist (the channel's reads and writes, memory mapping, futex,
// clocks, threads, exit). False when any step failed: the helper then exits without serving.
// Elsewhere: false (the parent refuses confined helpers there).
bool confine(int channelFd, uint64_t addressSpaceBytes);

#if defined(QJSN_TEST_HOOKS)
// Test builds only (CMake QJSN_TEST_HOOKS): 1 dereferences null, 2 calls open(), 3 aborts.
void testHookRun(uint32_t what);
#endif

}  // namespace qjsn::helper
