// The confinement of a helper process, applied by the helper itself before it reads any frame.
#include "confine.h"

#if defined(__linux__)
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <vector>

#include "../threads.h"

namespace qjsn::helper {

#if defined(__linux__)

namespace {

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "no seccomp filter for this architecture"
#endif

// Everything the engine, the codec, the channel and their threads call. What is not here kills the
// process (SECCOMP_RET_KILL_PROCESS), except clone3, which answers ENOSYS so that glibc falls back
// to clone (checked below: threads only).
const int kAllowed[] = {
    __NR_read,
    __NR_write,
    __NR_close,
    __NR_mmap,
    __NR_munmap,
    __NR_mprotect,
    __NR_madvise,
    __NR_mremap,
    __NR_brk,
    __NR_futex,
    __NR_clock_gettime,
    __NR_clock_getres,
    __NR_clock_nanosleep,
    __NR_nanosleep,
    __NR_gettimeofday,
    __NR_getpid,
    __NR_gettid,
    __NR_exit,
    __NR_exit_group,
    __NR_rt_sigprocmask,
    __NR_rt_sigreturn,
    __NR_rt_sigaction,
    __NR_sched_yield,
    __NR_sched_getaffinity,
    __NR_setpriority,
    __NR_getpriority,
    __NR_set_robust_list,
    __NR_getrandom,
    __NR_restart_syscall,
    __NR_membarrier,
    __NR_prlimit64,
#if defined(__NR_rseq)
    __NR_rseq,  // glibc registers every thread once the main thread did (it aborts otherwise)
#endif
#if defined(__NR_futex_waitv)
    __NR_futex_waitv,
#endif
};

sock_filter stmt(uint16_t code, uint32_t k) { return sock_filter{code, 0, 0, k}; }
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return sock_filter{code, jt, jf, k}; }

bool installFilter() {
  std::vector<sock_filter> f;
  const uint32_t kill = SECCOMP_RET_KILL_PROCESS;
  // The architecture first: a syscall number means something else under another ABI.
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  f.push_back(stmt(BPF_RET | BPF_K, kill));
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  // x32 syscalls (bit 30 set) share the x86_64 architecture value.
  f.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  f.push_back(stmt(BPF_RET | BPF_K, kill));
#endif
  for (int nr : kAllowed) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
#if defined(__NR_clone3)
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
#endif
  // clone: threads only (CLONE_THREAD in the flags, the first argument on both architectures).
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3));
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
  f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(stmt(BPF_RET | BPF_K, kill));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  // TSYNC: every thread of the process, should one exist already, runs under the filter too.
  return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

bool closeOtherDescriptors(int channelFd) {
  int first = channelFd + 1;  // 0-2 are /dev/null (the parent spawned us so), then the channel
#if defined(__NR_close_range)
  if (syscall(__NR_close_range, first, ~0u, 0) == 0) return true;
#endif
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
  long last = r.rlim_cur == RLIM_INFINITY || r.rlim_cur > 1 << 20 ? 1 << 20 : static_cast<long>(r.rlim_cur);
  for (long fd = first; fd < last; fd++) close(static_cast<int>(fd));
  return true;
}

bool setLimit(int resource, rlim_t value) {
  rlimit r{value, value};
  return setrlimit(resource, &r) == 0;
}

}  // namespace

bool confine(int channelFd, uint64_t addressSpaceBytes) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return false;
  if (getppid() == 1) return false;  // the parent died before the line above took effect
  clearenv();
  if (!closeOtherDescriptors(channelFd)) return false;
  // One malloc arena, the main one: a thread arena reserves 64 MiB of address space (which
  // RLIMIT_AS counts), and shrinking one reads /proc/sys/vm/overcommit_memory, which the filter forbids.
  mallopt(M_ARENA_MAX, 1);
  if (!setLimit(RLIMIT_CORE, 0) || !setLimit(RLIMIT_NOFILE, static_cast<rlim_t>(channelFd + 1))) return false;
  if (addressSpaceBytes != 0 && !setLimit(RLIMIT_AS, static_cast<rlim_t>(addressSpaceBytes))) return false;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  disallowProcReads();  // the executor's load readings would open /proc
  return installFilter();
}

#else

bool confine(int, uint64_t) { return false; }

#endif

#if defined(QJSN_TEST_HOOKS)
void testHookRun(uint32_t what) {
  switch (what) {
    case 1: {
      volatile int* nowhere = nullptr;
      *nowhere = 1;
      break;
    }
#if defined(__linux__)
    case 2: {
      int fd = open("/etc/hostname", O_RDONLY);
      if (fd >= 0) close(fd);
      break;
    }
#endif
    case 3: std::abort();
    default: break;
  }
}
#endif

}  // namespace qjsn::helper
