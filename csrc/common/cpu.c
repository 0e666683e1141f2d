/*
 * cpu.c — how many CPUs the process may run on (cpu.h), for the choices that depend on whether
 * its threads outnumber them: the PS client's default budget, gRPC's streams, RC waiters'
 * spinning; which vector levels it runs, for the kernels built per level; and the size of its
 * last-level cache, for the choice of copy of GET rows (copy.h).
 */
#define _GNU_SOURCE
#include "recstore/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

static unsigned cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;

static void count_cpus(void) {
    cpu_set_t set;
    long n = sched_getaffinity(getpid(), sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                : sysconf(_SC_NPROCESSORS_ONLN);
    cpus = n < 1 ? 1u : (unsigned)n;
}

unsigned rs_cpu_count(void) {
    pthread_once(&cpus_once, count_cpus);
    return cpus;
}

int rs_cpu_has_vec(int v) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (v == RS_CPU_VEC_AVX512) return __builtin_cpu_supports("avx512f") != 0;
    if (v == RS_CPU_VEC_AVX2) return __builtin_cpu_supports("avx2") != 0;
#endif
    return v == RS_CPU_VEC_BASE;
}

rs_cpu_vec rs_cpu_best_vec(void) {
    if (rs_cpu_has_vec(RS_CPU_VEC_AVX512)) return RS_CPU_VEC_AVX512;
    if (rs_cpu_has_vec(RS_CPU_VEC_AVX2)) return RS_CPU_VEC_AVX2;
    return RS_CPU_VEC_BASE;
}

static size_t llc;
static pthread_once_t llc_once = PTHREAD_ONCE_INIT;

/* "32768K" / "32M" / "1024" (bytes) as sysfs writes a cache size; 0 when unreadable */
static size_t read_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    char unit = 0;
    int got = fscanf(f, "%llu%c", &v, &unit);
    fclose(f);
    if (got < 1) return 0;
    if (unit == 'K') v <<= 10;
    if (unit == 'M') v <<= 20;
    return (size_t)v;
}

static void find_llc(void) {
    int best = 0;
    char path[96];
    for (int i = 0; i < 16; i++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int level = 0;
        int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        if (!ok || level < best) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        size_t sz = read_size(path);
        if (sz) {
            best = level;
            llc = sz;
        }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!llc) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        llc = v > 0 ? (size_t)v : 0;
    }
#endif
}

size_t rs_cpu_llc_bytes(void) {
    pthread_once(&llc_once, find_llc);
    return llc;
}
