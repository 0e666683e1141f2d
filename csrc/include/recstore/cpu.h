/*
 * cpu.h — the spin-wait hint every busy loop uses (pause on x86, yield on arm64), how many
 * CPUs the process may run on, which vector instructions it has, and how big its last-level
 * cache is.
 */
#ifndef RECSTORE_CPU_H
#define RECSTORE_CPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline void rs_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The CPUs in the process's affinity mask (its main thread's: a client thread may have been bound
 * to one core before it asks), read once; the online CPUs when the mask cannot be read; >= 1. */
unsigned rs_cpu_count(void);

/* Vector levels, each a superset of the one before: the x86-64 baseline (SSE2; the only level
 * elsewhere), AVX2, AVX-512F. Kernels compiled per level are indexed by them (the kv row loops,
 * the streaming copy). */
typedef enum rs_cpu_vec {
    RS_CPU_VEC_BASE = 0,
    RS_CPU_VEC_AVX2 = 1,
    RS_CPU_VEC_AVX512 = 2
} rs_cpu_vec;
/* 1 when this CPU runs level v (RS_CPU_VEC_BASE always); 0 for anything else. */
int rs_cpu_has_vec(int v);
/* The highest level this CPU runs. */
rs_cpu_vec rs_cpu_best_vec(void);

/* Bytes of the last-level cache cpu0 sees (sysfs cache/indexN of the highest level, read once;
 * sysconf's level-3 size when sysfs has none); 0 when neither says. */
size_t rs_cpu_llc_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
