/*
 * kv_cpu.c — which build of the row loops this process runs (kv_internal.h, RS_KV_ROW_LOOP; and
 * of DRAM_PET_HASH's batch lookup, whose AVX2 build serves the AVX-512 kernel too): the AVX-512
 * one where the CPU has AVX-512F, else the AVX2 one where it has AVX2, else the plain one
 * (decided once). rs_kv_row_kernel_select() forces a build the CPU supports, so a benchmark can
 * measure what a CPU without AVX-512 runs, and tests cover every build the CPU has.
 */
#include <strings.h>

#include "kv_internal.h"

static int kernel = -1; /* atomic: -1 not decided yet, else RS_KV_KERNEL_* */
static const char *const names[] = {"plain", "avx2", "avx512"};

int rs_kv_cpu_supports(int k) {
    return rs_cpu_has_vec(k); /* RS_KV_KERNEL_* are the rs_cpu_vec levels */
}

static int best(void) {
    return (int)rs_cpu_best_vec();
}

int rs_kv_cpu_kernel(void) {
    int k = __atomic_load_n(&kernel, __ATOMIC_RELAXED);
    if (k >= 0) return k;
    k = best();
    __atomic_store_n(&kernel, k, __ATOMIC_RELAXED);
    return k;
}

int rs_kv_row_kernel_select(const char *name, rs_error *err) {
    if (name && strcasecmp(name, "auto") == 0) {
        __atomic_store_n(&kernel, best(), __ATOMIC_RELAXED);
        return 0;
    }
    for (int k = 0; name && k < (int)(sizeof names / sizeof *names); k++) {
        if (strcasecmp(name, names[k]) != 0) continue;
        if (!rs_kv_cpu_supports(k))
            return rs_error_set(err, RS_ENOTSUP, "row kernel %s: this CPU lacks %s", names[k],
                                k == RS_KV_KERNEL_AVX512 ? "AVX-512F" : "AVX2");
        __atomic_store_n(&kernel, k, __ATOMIC_RELAXED);
        return 0;
    }
    return rs_error_set(err, RS_EINVAL, "row kernel '%s' is unknown (auto, plain, avx2, avx512)",
                        name ? name : "(null)");
}

const char *rs_kv_row_kernel(void) {
    return names[rs_kv_cpu_kernel()];
}
