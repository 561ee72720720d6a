// Runtime SIMD dispatch for the core's hot loops.
//
// The wheels are built for baseline x86-64 (SSE2), but the loops here are where the time goes and
// numpy, the baseline users compare against, dispatches to AVX2/AVX-512 at run time
// (x86-64-v3 is AVX2 + FMA, x86-64-v4 adds AVX-512). GCC and
// Clang can do the same: target_clones compiles one copy of a function per target and picks one
// at load time (an ifunc), so a single binary runs everywhere and uses the widest vectors the CPU
// has. Elsewhere (other architectures, other compilers) the macro is empty and the baseline
// build is used.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__) && \
    !defined(KVBRIDGE_NO_SIMD_CLONES)
#define KVBRIDGE_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define KVBRIDGE_HAS_SIMD_CLONES 1
#else
#define KVBRIDGE_SIMD_CLONES
#endif
