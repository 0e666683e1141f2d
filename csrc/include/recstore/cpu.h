/*
 * cpu.h — the spin-wait hint every busy loop uses (pause on x86, yield on arm64), and how many
 * CPUs the process may run on.
 */
#ifndef RECSTORE_CPU_H
#define RECSTORE_CPU_H

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

#ifdef __cplusplus
}
#endif
#endif
