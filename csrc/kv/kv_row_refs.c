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
 * owner); it only reads the engine's structures. The keys go through the index's pipelined batch
 * lookup (batch_lookup), not one find after another: a find per key waited for each key's misses
 * in turn (for EH three dependent ones), which made direct_sg GETs 3x slower than a copy.
 */
#include "kv_internal.h"

/* One key the way a read takes it: find, even word, key re-checked, validate. */
static const void *ref_one(rs_kv *kv, uint64_t key) {
    for (int attempt = 0; attempt < 64; attempt++) {
        rs_kv_slot s;
        int present = kv->ops->find(kv->ix, key, &s);
        if (!present) {
            if (kv->ops->validate(kv->ix, &s)) return NULL;
            continue;
        }
        uint64_t w = __atomic_load_n(s.word, __ATOMIC_ACQUIRE);
        if (!rs_kv_word_readable(&kv->vs, w) || __atomic_load_n(s.keyp, __ATOMIC_ACQUIRE) != key ||
            !kv->ops->validate(kv->ix, &s)) {
            rs_kv_cpu_relax();
            continue;
        }
        return rs_kv_vs_row(&kv->vs, w);
    }
    return NULL;
}

/* A segment through the index's pipelined lookup (the batch read's, without the rows): a hit
 * whose word, key and version still hold is a reference, a trusted miss is NULL, anything a
 * writer disturbed goes through ref_one. With no write during the lookup (the write epoch,
 * kv_internal.h) every hit and miss holds without looking again. */
static size_t refs_segment(rs_kv *kv, const uint64_t *keys, size_t cnt, const void **refs) {
    /* cnt <= lookup_max <= RS_KV_LOOKUP_MAX */
    rs_kv_hit q[RS_KV_LOOKUP_MAX];
    uint64_t snap[RS_KV_EPOCH_STRIPES];
    int quiet = rs_kv_epoch_snap(kv, snap);
    kv->ops->batch_lookup(kv->ix, keys, cnt, q);
    /* its acquire fence also orders the per-key checks below after the lookup */
    const int held = rs_kv_epoch_held(kv, snap) && quiet;
    size_t hits = 0;
    for (size_t k = 0; k < cnt; k++) {
        if (q[k].st == RS_KV_HIT_ROW && (held || rs_kv_hit_holds(&q[k], keys[k])))
            refs[k] = rs_kv_vs_row(&kv->vs, q[k].w1);
        else if (q[k].st == RS_KV_HIT_MISS && (held || rs_kv_hit_valid(&q[k])))
            refs[k] = NULL;
        else
            refs[k] = ref_one(kv, keys[k]);
        hits += refs[k] != NULL;
    }
    return hits;
}

int rs_kv_batch_row_refs(rs_kv *kv, const uint64_t *keys, size_t n, const void **refs,
                         size_t *n_found) {
    if (n_found) *n_found = 0;
    if (!kv || !kv->value_size) return RS_EINVAL;
    if (n && (!keys || !refs)) return RS_EINVAL;
    size_t hits = 0;
    const size_t seg = kv->ops->batch_lookup ? kv->ops->lookup_max : n;
    for (size_t base = 0; base < n; base += seg) {
        size_t cnt = n - base < seg ? n - base : seg;
        if (kv->ops->batch_lookup) {
            hits += refs_segment(kv, keys + base, cnt, refs + base);
            continue;
        }
        for (size_t i = base; i < base + cnt; i++) {
            refs[i] = ref_one(kv, keys[i]);
            hits += refs[i] != NULL;
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
