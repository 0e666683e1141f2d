/*
 * kv_rows.c — the row pass every batch read ends with (rs_kv_rows, kv_internal.h): prefetch each
 * row RS_KV_ROWS_AHEAD keys ahead of its copy (prefetcht1, whole lines) and copy it with the row
 * kernel. Compiled plain, for AVX2 and for AVX-512 with the 512-byte row as a constant
 * (RS_KV_ROW_LOOP).
 *
 * The pass does not look at an entry again after its copy: the caller's write epoch proves a
 * segment's copies whole when no write ran (kv_internal.h), and rs_kv_rows_recheck checks them
 * key by key when one did — the seqlock read of kv_internal.h spread over the lookup, the copy and
 * the re-check.
 *
 * Rows land out_stride bytes apart: the row size for flat output (that instance keeps the stride
 * a constant with the row), or more for a caller that interleaves rows with its own headers
 * (RecStore's row block: 12-byte item head + row, so a GET reply needs no second copy).
 */
#include "kv_internal.h"

RS_KV_INLINE size_t rows_body(const size_t vsz, const size_t ostride, const rs_kv_index_ops *ops,
                              void *ix, const rs_kv_vs *vs, const uint64_t *kk, size_t cnt,
                              const rs_kv_hit *q, uint8_t *out, uint8_t *found) {
    uint8_t *const data = vs->data;
    const size_t stride = vs->stride;
    size_t hits = 0;
    for (size_t i = 0; i < cnt + RS_KV_ROWS_AHEAD; i++) {
        if (i < cnt && q[i].st == RS_KV_HIT_ROW)
            rs_kv_prefetch_range(data + rs_kv_word_handle(q[i].w1) * stride, vsz);
        if (i < RS_KV_ROWS_AHEAD) continue;
        size_t k = i - RS_KV_ROWS_AHEAD;
        uint8_t *dst = out + k * ostride;
        int hit;
        if (__builtin_expect(q[k].st == RS_KV_HIT_ROW, 1)) {
            rs_kv_row_copy(dst, data + rs_kv_word_handle(q[k].w1) * stride, vsz);
            hit = 1;
        } else if (q[k].st == RS_KV_HIT_MISS) {
            memset(dst, 0, vsz);
            hit = 0;
        } else {
            hit = rs_kv_read_fixed_slow(ops, ix, vs, kk[k], dst);
        }
        if (found) found[k] = (uint8_t)hit;
        hits += (size_t)hit;
    }
    return hits;
}

/* flat output: the stride is the row size, a constant along with it */
RS_KV_INLINE size_t rows_flat(const size_t vsz, const rs_kv_index_ops *ops, void *ix,
                              const rs_kv_vs *vs, const uint64_t *kk, size_t cnt,
                              const rs_kv_hit *q, uint8_t *out, uint8_t *found) {
    return rows_body(vsz, vsz, ops, ix, vs, kk, cnt, q, out, found);
}

RS_KV_ROW_LOOP(rows_dispatch, rows_flat, vs->value_size,
               (const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs, const uint64_t *kk,
                size_t cnt, const rs_kv_hit *q, uint8_t *out, uint8_t *found),
               (ops, ix, vs, kk, cnt, q, out, found))

RS_KV_ROW_LOOP(rows_strided_dispatch, rows_body, vs->value_size,
               (size_t ostride, const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs,
                const uint64_t *kk, size_t cnt, const rs_kv_hit *q, uint8_t *out, uint8_t *found),
               (ostride, ops, ix, vs, kk, cnt, q, out, found))

size_t rs_kv_rows(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs, const uint64_t *kk,
                  size_t cnt, const rs_kv_hit *q, uint8_t *out, size_t out_stride, uint8_t *found) {
    if (out_stride == vs->value_size) return rows_dispatch(ops, ix, vs, kk, cnt, q, out, found);
    return rows_strided_dispatch(out_stride, ops, ix, vs, kk, cnt, q, out, found);
}

size_t rs_kv_rows_recheck(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs,
                          const uint64_t *kk, size_t cnt, const rs_kv_hit *q, uint8_t *out,
                          size_t out_stride, uint8_t *found, size_t hits) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the copies before the loads below */
    for (size_t k = 0; k < cnt; k++) {
        uint8_t *dst = out + k * out_stride;
        int was;
        if (q[k].st == RS_KV_HIT_ROW) {
            if (rs_kv_hit_holds(&q[k], kk[k])) continue;
            was = 1;
        } else if (q[k].st == RS_KV_HIT_MISS) {
            if (rs_kv_hit_valid(&q[k])) continue;
            was = 0;
        } else {
            continue; /* read by the slow path already */
        }
        int hit = rs_kv_read_fixed_slow(ops, ix, vs, kk[k], dst);
        if (found) found[k] = (uint8_t)hit;
        hits = hits - (size_t)was + (size_t)hit;
    }
    return hits;
}
