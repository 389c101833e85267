// Force-included into the engine's C files for the portable Linux prebuilds (CMakeLists.txt,
// QJSN_PORTABLE): glibc 2.29 gave exp, log, pow, exp2 and log2 new symbol versions, so a binary
// linked on a newer system would refuse to load on glibc 2.28. The old versions compute the same
// values (they differ only in SVID error handling), so bind the calls to them.
#pragma once
#if defined(__GLIBC__) || defined(__linux__)
#if defined(__x86_64__)
#define QJSN_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define QJSN_GLIBC_BASE "GLIBC_2.17"
#endif
#if defined(QJSN_GLIBC_BASE)
__asm__(".symver exp,exp@" QJSN_GLIBC_BASE);
__asm__(".symver log,log@" QJSN_GLIBC_BASE);
__asm__(".symver pow,pow@" QJSN_GLIBC_BASE);
__asm__(".symver exp2,exp2@" QJSN_GLIBC_BASE);
__asm__(".symver log2,log2@" QJSN_GLIBC_BASE);
#endif
#endif
