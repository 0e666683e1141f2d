/*
 * cpu.h — the spin-wait hint every busy loop uses (pause on x86, yield on arm64).
 */
#ifndef RECSTORE_CPU_H
#define RECSTORE_CPU_H

static inline void rs_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
