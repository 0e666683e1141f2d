/*
 * kv_cpu.c — which build of the row loops this process runs: the AVX-512 one where the CPU has
 * AVX-512F (decided once), else the plain one. Tests force the plain build to cover it on any CPU.
 */
#include "kv_internal.h"

static int kernel = -1; /* atomic: -1 not decided yet, 0 plain, 1 AVX-512 */

int rs_kv_cpu_avx512(void) {
    int k = __atomic_load_n(&kernel, __ATOMIC_RELAXED);
    if (k >= 0) return k;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    k = __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
    k = 0;
#endif
    __atomic_store_n(&kernel, k, __ATOMIC_RELAXED);
    return k;
}

void rs_kv_cpu_force_plain(int on) {
    if (on) {
        __atomic_store_n(&kernel, 0, __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(&kernel, -1, __ATOMIC_RELAXED);
        rs_kv_cpu_avx512();
    }
}

const char *rs_kv_row_kernel(void) {
    return rs_kv_cpu_avx512() ? "avx512" : "plain";
}
