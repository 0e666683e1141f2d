/*
 * rc_kv_mr.c — the value store as a source of direct_sg writes: which lkey covers a row.
 *
 * direct_sg GETs gather rows straight from the shard's value store into the client's response
 * slot, so the fabric needs those rows registered. Two ways, chosen at server start:
 *   implicit ODP   one on-demand-paging MR over the whole address space (NICs that have it; the
 *                  shm fabric, which needs no keys, takes this branch too);
 *   pinned chunks  where the device lacks implicit ODP (rxe, many RoCE NICs): the value store's
 *                  usable region registered as ordinary pinned MRs. The store reserves its address
 *                  range once and only grows in place (kv_region.c), so a chunk, once registered,
 *                  stays valid; when a row lies beyond the registered end, the newly usable part
 *                  is registered as one more chunk (under `lock`, at most RC_KV_MR_CHUNKS).
 * A row that no chunk covers (chunks full, registration failed, a row straddling two chunks)
 * makes that GET fall back to the staging copy, counted as get_direct_sg_fallback.
 */
#include <stdio.h>
#include <string.h>

#include "rc_server_internal.h"

int rs_rc_kv_mr_open(rs_rc_server *s) {
    rc_kv_mr *m = &s->kv_mr;
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    if (!s->h.kv) return 0;
    rs_error e = {0};
    if (s->fab->reg_local(s->f, NULL, SIZE_MAX, &m->odp, &e) == 0) {
        m->mode = RC_KV_MR_ODP;
        return 0;
    }
    const void *base;
    size_t len;
    if (rs_kv_value_region(s->h.kv, &base, &len) != 0) {
        fprintf(stderr,
                "component=rdma_rc_server event=direct_sg_unavailable shard=%u reason=\"%s; and "
                "the value store has no fixed-row region to pin\"\n",
                s->h.shard_id, e.msg);
        return 0;
    }
    m->mode = RC_KV_MR_PINNED;
    uint32_t lkey;
    int ok = rs_rc_kv_mr_lkey(s, base, 1, &lkey) == 0;
    fprintf(stderr,
            "component=rdma_rc_server event=direct_sg_pinned shard=%u registered_bytes=%zu "
            "reason=\"%s: the value store is registered as pinned memory regions instead\"%s\n",
            s->h.shard_id, ok ? len : (size_t)0, e.msg,
            ok ? "" : " warning=\"first registration failed: direct_sg falls back to copy\"");
    return 0;
}

static int find(rc_kv_mr *m, uintptr_t lo, uintptr_t hi, uint32_t *lkey) {
    uint32_t n = __atomic_load_n(&m->n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (m->chunk[i].lo <= lo && hi <= m->chunk[i].hi) {
            *lkey = m->chunk[i].r.lkey;
            return 0;
        }
    return 1;
}

int rs_rc_kv_mr_lkey(rs_rc_server *s, const void *p, uint32_t len, uint32_t *lkey) {
    rc_kv_mr *m = &s->kv_mr;
    if (m->mode == RC_KV_MR_ODP) {
        *lkey = m->odp.lkey;
        return 0;
    }
    if (m->mode != RC_KV_MR_PINNED) return 1;
    uintptr_t lo = (uintptr_t)p, hi = lo + len;
    if (find(m, lo, hi, lkey) == 0) return 0;
    int rc = 1;
    pthread_mutex_lock(&m->lock);
    if (find(m, lo, hi, lkey) == 0) {
        rc = 0;
        goto out;
    }
    const void *base;
    size_t usable;
    if (m->n >= RC_KV_MR_CHUNKS || rs_kv_value_region(s->h.kv, &base, &usable) != 0) goto out;
    uintptr_t start = m->n ? m->chunk[m->n - 1].hi : (uintptr_t)base;
    uintptr_t end = (uintptr_t)base + usable;
    if (end <= start || hi > end) goto out;
    rs_error e = {0};
    rs_rc_region *r = &m->chunk[m->n].r;
    if (s->fab->reg_local(s->f, (void *)start, end - start, r, &e) != 0) {
        fprintf(stderr,
                "component=rdma_rc_server event=direct_sg_pin_failed shard=%u bytes=%zu "
                "reason=\"%s\"\n",
                s->h.shard_id, (size_t)(end - start), e.msg);
        goto out;
    }
    m->chunk[m->n].lo = start;
    m->chunk[m->n].hi = end;
    __atomic_store_n(&m->n, m->n + 1, __ATOMIC_RELEASE);
    rc = find(m, lo, hi, lkey);
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void rs_rc_kv_mr_close(rs_rc_server *s) {
    rc_kv_mr *m = &s->kv_mr;
    if (m->mode == RC_KV_MR_ODP) s->fab->dereg_local(s->f, &m->odp);
    for (uint32_t i = 0; i < m->n; i++)
        s->fab->dereg_local(s->f, &m->chunk[i].r);
    m->n = 0;
    m->mode = RC_KV_MR_NONE;
    pthread_mutex_destroy(&m->lock);
}
