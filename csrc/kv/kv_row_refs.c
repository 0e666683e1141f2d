/*
 * kv_row_refs.c — rs_kv_batch_row_refs: where each key's row lives in the value store, for
 * readers that move rows themselves (the RC transport's direct_sg GET gathers them straight into
 * the client's response slot).
 *
 * A reference is taken like a read (index find without locks, even value word, key re-checked,
 * index validate), but the bytes are not copied, so the seqlock cannot protect a later read
 * through the pointer: a concurrent write of the same key may be observed torn. That is the
 * contract RDMA direct reads of registered memory have too; callers that need whole rows under
 * concurrent writes use rs_kv_batch_get_flat. Added by the RC transport (not by the engine's
 * owner); it only reads the engine's structures.
 */
#include "kv_internal.h"

int rs_kv_batch_row_refs(rs_kv *kv, const uint64_t *keys, size_t n, const void **refs,
                         size_t *n_found) {
    if (n_found) *n_found = 0;
    if (!kv || !kv->value_size) return RS_EINVAL;
    if (n && (!keys || !refs)) return RS_EINVAL;
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        refs[i] = NULL;
        for (int attempt = 0; attempt < 64; attempt++) {
            rs_kv_slot s;
            int present = kv->ops->find(kv->ix, keys[i], &s);
            if (!present) {
                if (kv->ops->validate(kv->ix, &s)) break;
                continue;
            }
            uint64_t w = __atomic_load_n(s.word, __ATOMIC_ACQUIRE);
            if ((w & 1) || __atomic_load_n(s.keyp, __ATOMIC_ACQUIRE) != keys[i] ||
                !kv->ops->validate(kv->ix, &s)) {
                rs_kv_cpu_relax();
                continue;
            }
            refs[i] = rs_kv_vs_row(&kv->vs, w);
            hits++;
            break;
        }
    }
    if (n_found) *n_found = hits;
    return 0;
}

int rs_kv_value_region(rs_kv *kv, const void **base, size_t *len) {
    if (!kv || !kv->value_size || kv->vs.variable) return RS_EINVAL;
    pthread_mutex_lock(&kv->vs.lock); /* growth happens under it */
    *base = kv->vs.region.base;
    *len = kv->vs.region.backed;
    pthread_mutex_unlock(&kv->vs.lock);
    return 0;
}
