/*
 * kv_verify.c — the full consistency check of an engine (rs_kv_verify) and the repair of the row
 * accounting after a crash (rs_kv_repair_rows), which share one walk: every index entry, through
 * the index's scan op, marks the row its word names.
 *
 * rs_kv_verify checks, for every index type: every key appears once; every word is even and names
 * a row below the value store's high-water mark (fixed rows: no two keys share a row); the engine's
 * count equals the entries found; the free list visits only rows nobody uses, once each, and used
 * plus free rows account for every row ever handed out (nothing leaked). For CCEH it adds the
 * index structure (rs_kv_cceh_verify: journal, segment ranges, directory, probe windows). It must
 * not run concurrently with writers (a row being allocated would count as leaked); the PS runs it
 * inside the shard's exclusive section.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kv_internal.h"

typedef struct walk {
    rs_kv *kv;
    uint64_t bump;
    uint8_t *used; /* fixed rows: 1 = referenced; NULL in variable mode */
    int want_keys;
    uint64_t *keys; /* want_keys: every key found */
    size_t n, cap;
    rs_error *err;
} walk;

static int walk_entry(void *ctx, const rs_kv_slot *s) {
    walk *w = ctx;
    uint64_t word = __atomic_load_n(s->word, __ATOMIC_ACQUIRE);
    uint64_t key = __atomic_load_n(s->keyp, __ATOMIC_RELAXED);
    if (word & 1)
        return rs_error_set(w->err, RS_EVERIFY, "key %llu has an odd (unfinished) value word",
                            (unsigned long long)key);
    uint64_t h = rs_kv_word_handle(word);
    if (h >= w->bump)
        return rs_error_set(
            w->err, RS_EVERIFY, "key %llu names row %llu, beyond the %llu rows ever handed out",
            (unsigned long long)key, (unsigned long long)h, (unsigned long long)w->bump);
    if (h < w->kv->vs.first)
        return rs_error_set(w->err, RS_EVERIFY,
                            "key %llu names row %llu, which the value store never hands out",
                            (unsigned long long)key, (unsigned long long)h);
    if (w->used) {
        if (w->used[h])
            return rs_error_set(w->err, RS_EVERIFY, "key %llu shares row %llu with another key",
                                (unsigned long long)key, (unsigned long long)h);
        w->used[h] = 1;
    }
    if (w->want_keys) {
        if (w->n == w->cap) {
            size_t nc = w->cap ? 2 * w->cap : 4096;
            uint64_t *nk = realloc(w->keys, nc * sizeof *nk);
            if (!nk) return rs_error_set(w->err, RS_ENOMEM, "verify: %zu keys", nc);
            w->keys = nk;
            w->cap = nc;
        }
        w->keys[w->n] = key;
    }
    w->n++;
    return 0;
}

/* Walk every entry; fills w (caller frees w->used and w->keys). */
static int walk_all(rs_kv *kv, int want_keys, walk *w, rs_error *err) {
    *w = (walk){.kv = kv, .bump = kv->vs.meta->bump, .want_keys = want_keys, .err = err};
    if (!kv->ops->scan)
        return rs_error_set(err, RS_ENOTSUP, "%s cannot be scanned",
                            rs_kv_index_type_name(kv->type));
    if (kv->value_size && !(w->used = calloc(w->bump ? w->bump : 1, 1)))
        return rs_error_set(err, RS_ENOMEM, "verify: row map of %llu rows",
                            (unsigned long long)w->bump);
    if (!kv->value_size) w->bump = RS_KV_HANDLE_MAX; /* block offsets: no row map */
    return kv->ops->scan(kv->ix, walk_entry, w);
}

int rs_kv_repair_rows(rs_kv *kv, rs_error *err) {
    if (!kv->value_size) return 0; /* variable blocks: a crash may leak some; not rebuilt */
    walk w;
    int rc = walk_all(kv, 0, &w, err);
    if (rc == 0) rs_kv_vs_rebuild_free(&kv->vs, w.used);
    free(w.used);
    free(w.keys);
    return rc;
}

static int key_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int rs_kv_verify(rs_kv *kv, char *report, size_t cap, rs_error *err) {
    char ixrep[256] = "";
    int rc;
    if (!kv) return rs_error_set(err, RS_EINVAL, "kv is NULL");
    if (kv->type == RS_KV_INDEX_CCEH &&
        (rc = rs_kv_cceh_verify(kv->ix, &kv->vs, ixrep, sizeof ixrep, err)))
        return rc;
    walk w;
    rc = walk_all(kv, 1, &w, err);
    if (rc) goto out;
    if (w.n) qsort(w.keys, w.n, sizeof *w.keys, key_cmp);
    for (size_t i = 1; i < w.n; i++)
        if (w.keys[i] == w.keys[i - 1]) {
            rc = rs_error_set(err, RS_EVERIFY, "key %llu has two index entries",
                              (unsigned long long)w.keys[i]);
            goto out;
        }
    uint64_t count = __atomic_load_n(&kv->count, __ATOMIC_RELAXED);
    if (count != w.n) {
        rc = rs_error_set(err, RS_EVERIFY, "the engine counts %llu keys, the index holds %zu",
                          (unsigned long long)count, w.n);
        goto out;
    }
    uint64_t nfree = 0, leaked = 0;
    if (w.used) {
        for (uint64_t f = kv->vs.meta->free_head[0]; f; nfree++) {
            uint64_t h = f - 1;
            if (h >= w.bump || h < kv->vs.first || w.used[h]) {
                rc = rs_error_set(err, RS_EVERIFY, "the free list reaches row %llu, which is %s",
                                  (unsigned long long)h,
                                  h >= w.bump        ? "beyond the rows handed out"
                                  : h < kv->vs.first ? "never handed out"
                                  : w.used[h] == 1   ? "in use by a key"
                                                     : "on the free list twice");
                goto out;
            }
            w.used[h] = 2;
            memcpy(&f, kv->vs.data + h * kv->vs.stride, 8);
        }
        leaked = w.bump - kv->vs.first - w.n - nfree;
        if (leaked) {
            rc = rs_error_set(
                err, RS_EVERIFY, "%llu of %llu rows are neither used nor free (leaked)",
                (unsigned long long)leaked, (unsigned long long)(w.bump - kv->vs.first));
            goto out;
        }
    }
    snprintf(report, cap, "ok index_type=%s keys=%zu rows_used=%zu rows_free=%llu%s%s",
             rs_kv_index_type_name(kv->type), w.n, w.used ? w.n : 0, (unsigned long long)nfree,
             ixrep[0] ? " " : "", ixrep);
out:
    free(w.used);
    free(w.keys);
    return rc;
}
