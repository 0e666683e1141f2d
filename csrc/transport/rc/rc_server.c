/*
 * rc_server.c — the RC slot-protocol server for one shard: control plane thread, poll threads,
 * optional GET workers, response modes, profile lines.
 *
 * Lanes: a client attaches over the control plane with one endpoint per QP; the server creates
 * one lane per client QP (a region of `slots` request slots followed by `slots` response staging
 * slots, and an endpoint connected to the client's region) and gives it to poller
 * (client_id + qp) % thread_num. The TCP connection of the attach is the lanes' lifetime: when it
 * closes (client exit or crash) the lanes are taken from the pollers, and freed once every poller
 * has acknowledged the new lane generation and no GET worker still holds one of their slots. So a
 * killed client leaves no lane behind and never stops the server.
 *
 * Pollers scan their lanes' commit words (the last 8 bytes of each request slot hold the seq; an
 * acquire load that sees a new seq sees the whole request). A slot is served when its seq is
 * non-zero and differs from the last seq seen in it; a seq not above the highest handled there is
 * a duplicate (counted, not answered). Every answer is: optional payload write, then the status
 * word (seq last) as a signaled publish write to the client's response slot, whose address the
 * server derives from the lane geometry and checks against the descriptor. A poller with no lanes
 * sleeps on a condition variable; an idle one backs off (rc_poll.c).
 *
 * Hot-path counters are per poller/worker (cache-line separated); the profile thread reads them
 * racily and prints interval deltas.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/rc.h"

#include "transport/rc/rc_server_internal.h"


/* ---- responses ------------------------------------------------------------------------------- */

static inline uint64_t lane_resp_addr(const srv_lane *ln, uint32_t slot) {
    return ln->peer.region_addr + (uint64_t)slot * (ln->resp_bytes + ln->req_bytes);
}

static inline uint8_t *lane_staging(const srv_lane *ln, uint32_t slot) {
    return ln->region.addr + (size_t)ln->slots * ln->req_bytes + (size_t)slot * ln->resp_bytes;
}

/* Post a write, draining completions while the send queue is full. Caller holds ln->wlock. */
static int lane_write(rs_rc_server *s, srv_lane *ln, const rs_rc_sge *sg, int n, uint64_t addr,
                      unsigned flags) {
    rs_error err = {0};
    rs_rc_wc wc[16];
    for (int tries = 0;; tries++) {
        int rc = s->fab->write(ln->ep, sg, n, addr, ln->peer.rkey, flags, 0, &err);
        if (rc != RS_EBUSY || tries > 1000000)
            return rc;
        s->fab->poll(ln->ep, wc, 16);
    }
}

/* Write `hdr_len` bytes at src (rows then header, already in staging) unless they are already in
 * place (window), then publish the status word. */
static void finish(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq, int32_t status,
                   const uint8_t *src, uint32_t bytes, uint32_t msg_bytes, int in_place,
                   rc_prof *pf) {
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    uint64_t raddr = lane_resp_addr(ln, slot);
    /* built in the staging slot's registered tail, so a non-inline write can read it */
    rs_rc_status_word *w =
        (rs_rc_status_word *)(lane_staging(ln, slot) + ln->resp_bytes - sizeof *w);
    *w = (rs_rc_status_word){.status = status,
                             .response_bytes = bytes,
                             .msg_bytes = msg_bytes,
                             .state = RS_RC_STATE_DONE,
                             .seq = seq};
    rs_rc_wc wc[16];
    pthread_spin_lock(&ln->wlock);
    if (bytes && !in_place) {
        rs_rc_sge sg = {src, bytes, ln->region.lkey};
        unsigned fl = bytes <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0;
        if (lane_write(s, ln, &sg, 1, raddr, fl) == 0)
            BUMP(pf->response_payload_writes, 1);
    }
    rs_rc_sge sw = {w, sizeof *w, ln->region.lkey};
    unsigned fl = RS_RC_WR_SIGNALED | RS_RC_WR_PUBLISH |
                  (sizeof *w <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0);
    if (lane_write(s, ln, &sw, 1, raddr + ln->resp_bytes - sizeof *w, fl) == 0)
        BUMP(pf->response_status_writes, 1);
    s->fab->poll(ln->ep, wc, 16);
    pthread_spin_unlock(&ln->wlock);
    BUMP(pf->response_payload_bytes, bytes);
    if (t0) {
        BUMP(pf->complete_ns, rs_now_ns() - t0);
        BUMP(pf->complete_count, 1);
    }
}

static void respond_error(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                          int32_t status, const char *why, rc_prof *pf) {
    rs_ps_response r;
    memset(&r, 0, offsetof(rs_ps_response, error));
    r.status = status;
    r.value_size = s->h.value_size;
    snprintf(r.error, sizeof r.error, "%s", why);
    r.reply[0] = '\0';
    uint8_t *st = lane_staging(ln, slot);
    size_t hl = rs_ps_response_encode_header(&r, 1, st);
    finish(s, ln, slot, seq, status, st, (uint32_t)hl, (uint32_t)hl, 0, pf);
}

/* Send a handled response whose rows (rows_len bytes) are at buf; encode the header after them. */
static void respond(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq, rs_ps_response *r,
                    uint8_t *buf, size_t room, int in_place, rc_prof *pf) {
    size_t hl = rs_ps_response_header_size(r, 1);
    if (r->rows_len + hl > room) {
        respond_error(s, ln, slot, seq, RS_PS_BATCH_TOO_LARGE,
                      "response does not fit the response slot", pf);
        return;
    }
    rs_ps_response_encode_header(r, 1, buf + r->rows_len);
    finish(s, ln, slot, seq, r->status, buf, (uint32_t)(r->rows_len + hl), (uint32_t)hl, in_place,
           pf);
}

/* ---- GET paths --------------------------------------------------------------------------------
 */

/* direct_sg: gather rows straight from the value store into the client's response slot. Returns
 * 0 when done, 1 when the caller must fall back to the staging copy. */
static int get_direct_sg(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                         const rs_ps_request *req, size_t room, rc_prof *pf) {
    /* a server configured with get_response_mode=staging_copy serves every GET by copy */
    if (!s->h.kv || !s->kv_mr_ok || s->o.get_mode == RS_RC_GET_STAGING_COPY)
        return 1;
    uint32_t n = req->num_keys, vs = s->h.value_size;
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    const void **refs = malloc((size_t)(n ? n : 1) * sizeof *refs);
    uint64_t *keys = malloc((size_t)(n ? n : 1) * 8);
    if (!refs || !keys) {
        free(refs);
        free(keys);
        return 1;
    }
    for (uint32_t i = 0; i < n; i++)
        keys[i] = rs_ps_key(req->keys, i);
    size_t found = 0;
    int rc = rs_kv_batch_row_refs(s->h.kv, keys, n, refs, &found);
    uint64_t t1 = t0 ? rs_now_ns() : 0;
    if (t0)
        BUMP(pf->get_index_lookup_ns, t1 - t0);
    if (rc != 0 || found != n) {
        BUMP(pf->get_missing_rows, n - (rc == 0 ? found : 0));
        free(refs);
        free(keys);
        return 1;
    }
    uint64_t raddr = lane_resp_addr(ln, slot);
    rs_rc_sge sg[RS_RC_MAX_SGE];
    int k = 0, wrs = 0, failed = 0;
    uint64_t off = 0, wr_off = 0;
    pthread_spin_lock(&ln->wlock);
    for (uint32_t i = 0; i < n && !failed; i++) {
        if (k > 0 && (const uint8_t *)sg[k - 1].addr + sg[k - 1].len == refs[i]) {
            sg[k - 1].len += vs; /* adjacent rows merge into one SGE */
        } else {
            if (k == RS_RC_MAX_SGE) {
                if (lane_write(s, ln, sg, k, raddr + wr_off, 0))
                    failed = 1;
                wrs++;
                wr_off = off;
                k = 0;
            }
            sg[k++] = (rs_rc_sge){refs[i], vs, s->kv_mr.lkey};
        }
        off += vs;
    }
    if (!failed && k > 0) {
        if (lane_write(s, ln, sg, k, raddr + wr_off, 0))
            failed = 1;
        wrs++;
    }
    pthread_spin_unlock(&ln->wlock);
    free(refs);
    free(keys);
    if (failed)
        return 1; /* nothing published yet: the staging copy overwrites the partial rows */
    BUMP(pf->get_direct_sg, 1);
    BUMP(pf->get_direct_sg_wr, (uint64_t)wrs);
    BUMP(pf->response_payload_sg_writes, 1);
    BUMP(pf->response_payload_sg_wrs, (uint64_t)wrs);
    BUMP(pf->get_rows, n);
    BUMP(pf->get_value_bytes, (uint64_t)n * vs);
    if (t0)
        BUMP(pf->get_direct_sg_ns, rs_now_ns() - t1);
    /* header after the rows, then the status */
    rs_ps_response r;
    memset(&r, 0, offsetof(rs_ps_response, error));
    r.status = RS_PS_OK;
    r.value_size = vs;
    r.num_found = n;
    r.rows_len = (size_t)n * vs;
    r.error[0] = r.reply[0] = '\0';
    uint8_t *st = lane_staging(ln, slot);
    size_t hl = rs_ps_response_encode_header(&r, 1, st);
    if (r.rows_len + hl > room)
        return 1;
    pthread_spin_lock(&ln->wlock);
    rs_rc_sge hs = {st, (uint32_t)hl, ln->region.lkey};
    lane_write(s, ln, &hs, 1, raddr + r.rows_len, hl <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0);
    pthread_spin_unlock(&ln->wlock);
    BUMP(pf->response_payload_writes, 1);
    finish(s, ln, slot, seq, RS_PS_OK, NULL, (uint32_t)(r.rows_len + hl), (uint32_t)hl, 1, pf);
    return 0;
}

static void serve_get(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                      const rs_rc_desc *d, const rs_ps_request *req, unsigned tslot, rc_prof *pf) {
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    size_t room = d->response_bytes;
    uint32_t vs = s->h.value_size, n = req->num_keys;
    rs_ps_response r;
    memset(&r, 0, offsetof(rs_ps_response, error));
    r.error[0] = r.reply[0] = '\0';
    r.value_size = vs;
    uint8_t *win = s->fab->remote_window
                       ? s->fab->remote_window(ln->ep, lane_resp_addr(ln, slot), room)
                       : NULL;
    uint8_t *buf = win ? win : lane_staging(ln, slot);
    BUMP(pf->handled_get, 1);
    switch (s->o.fake_get) {
    case RS_RC_FAKE_STATUS_ONLY:
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf);
        goto done;
    case RS_RC_FAKE_INDEX_ONLY:
        if (!s->h.kv) {
            respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD,
                          "index_only needs the shard's KV engine", pf);
            goto done;
        }
        for (uint32_t i = 0; i < n; i++) {
            size_t len = 0;
            if (rs_kv_get(s->h.kv, rs_ps_key(req->keys, i), NULL, 0, &len) != RS_ENOTFOUND)
                r.num_found++;
        }
        if (t0)
            BUMP(pf->get_index_lookup_ns, rs_now_ns() - t0);
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf);
        goto done;
    case RS_RC_FAKE_PAYLOAD_MEMSET:
        memset(buf, 0, (size_t)n * vs);
        r.rows_len = (size_t)n * vs;
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf);
        goto done;
    case RS_RC_FAKE_NONE:
        break;
    }
    if (d->flags & RS_RC_FLAG_GET_DIRECT_SG) {
        if (get_direct_sg(s, ln, slot, seq, req, room, pf) == 0)
            goto done;
        BUMP(pf->get_direct_sg_fallback, 1);
        if (!(d->flags & RS_RC_FLAG_GET_ALLOW_FALLBACK_COPY)) {
            respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD,
                          "direct_sg unavailable (missing row or no row references) and fallback "
                          "copy not allowed",
                          pf);
            goto done;
        }
    }
    {
        uint64_t tb = t0 ? rs_now_ns() : 0;
        int rc = s->h.handle(s->h.ctx, req, &r, buf, room - RS_RC_RESP_HDR_ROOM, tslot);
        if (t0)
            BUMP(pf->get_batch_get_ns, rs_now_ns() - tb);
        if (rc != 0) {
            respond_error(s, ln, slot, seq, RS_PS_INTERNAL, "shard handler failed", pf);
            goto done;
        }
        if (r.status == RS_PS_OK) {
            BUMP(pf->get_rows, n);
            BUMP(pf->get_value_bytes, r.rows_len);
            BUMP(pf->get_missing_rows, n - r.num_found);
        }
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf);
    }
done:
    if (t0)
        BUMP(pf->handle_get_ns, rs_now_ns() - t0);
}

/* ---- one slot -------------------------------------------------------------------------------- */

static void serve_slot(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq, unsigned tslot,
                       rc_prof *pf) {
    const uint8_t *rs = ln->region.addr + (size_t)slot * ln->req_bytes;
    rs_rc_desc d;
    memcpy(&d, rs, sizeof d);
    const rs_rc_commit_word *cw = (const rs_rc_commit_word *)(rs + ln->req_bytes - sizeof *cw);
    char why[256];
    if (__atomic_load_n(&cw->state, __ATOMIC_ACQUIRE) != RS_RC_STATE_READY) {
        BUMP(pf->invalid_descriptor, 1);
        snprintf(why, sizeof why, "commit word state %u is not READY", cw->state);
        respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD, why, pf);
        return;
    }
    uint64_t raddr = lane_resp_addr(ln, slot);
    rs_rc_slot_expect x = {.shard_id = s->h.shard_id,
                           .client_id = ln->client_id,
                           .qp_index = ln->qp,
                           .value_size = s->h.value_size,
                           .max_keys = s->h.max_keys,
                           .request_slot_bytes = ln->req_bytes,
                           .response_room = ln->resp_bytes - RS_RC_TAIL_BYTES,
                           .response_addr = raddr,
                           .status_addr = raddr + ln->resp_bytes - sizeof(rs_rc_status_word),
                           .rkey = ln->peer.rkey};
    int st = rs_rc_desc_check(&d, &x, why, sizeof why);
    if (st == RS_PS_OK && d.seq != seq) {
        st = RS_PS_INVALID_PAYLOAD;
        snprintf(why, sizeof why, "descriptor seq %" PRIu64 " differs from commit seq %" PRIu64,
                 d.seq, seq);
    }
    if (st != RS_PS_OK) {
        if (st == RS_PS_WRONG_SHARD)
            BUMP(pf->wrong_shard, 1);
        else
            BUMP(pf->invalid_descriptor, 1);
        respond_error(s, ln, slot, seq, st, why, pf);
        return;
    }
    BUMP(pf->bytes_in, RS_RC_DESC_BYTES + d.payload_bytes);
    rs_ps_request req;
    rs_error err = {0};
    const uint8_t *msg = rs + RS_RC_DESC_BYTES;
    int rc = rs_ps_request_decode((rs_ps_op)d.op, msg, d.msg_bytes, msg + d.msg_bytes,
                                  d.payload_bytes - d.msg_bytes, &req, &err);
    if (rc == 0 && req.num_keys != d.key_count) {
        rc = RS_EPROTO;
        snprintf(err.msg, sizeof err.msg, "payload holds %u keys, descriptor says %u", req.num_keys,
                 d.key_count);
    }
    if (rc != 0) {
        BUMP(pf->invalid_descriptor, 1);
        respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD, err.msg, pf);
        return;
    }
    if (d.op == RS_PS_GET) {
        serve_get(s, ln, slot, seq, &d, &req, tslot, pf);
        return;
    }
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    rs_ps_response r;
    uint8_t *buf = lane_staging(ln, slot);
    rc = s->h.handle(s->h.ctx, &req, &r, buf, 0, tslot);
    if (rc != 0) {
        respond_error(s, ln, slot, seq, RS_PS_INTERNAL, "shard handler failed", pf);
        return;
    }
    r.rows_len = 0;
    respond(s, ln, slot, seq, &r, buf, d.response_bytes, 0, pf);
    uint64_t dt = t0 ? rs_now_ns() - t0 : 0;
    if (d.op == RS_PS_PUT) {
        BUMP(pf->handled_put, 1);
        BUMP(pf->handle_put_ns, dt);
    } else if (d.op == RS_PS_UPDATE) {
        BUMP(pf->handled_update, 1);
        BUMP(pf->handle_update_ns, dt);
    } else {
        BUMP(pf->handled_command, 1);
        BUMP(pf->handle_command_ns, dt);
    }
}

/* ---- GET workers ------------------------------------------------------------------------------
 */

static int task_push(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq) {
    pthread_mutex_lock(&s->lock);
    if (s->t_tail - s->t_head >= TASK_RING) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    atomic_store_explicit(&ln->busy[slot], 1, memory_order_relaxed);
    atomic_fetch_add(&ln->inflight, 1);
    s->ring[s->t_tail++ % TASK_RING] = (task){ln, slot, seq};
    pthread_cond_signal(&s->tasks_cv);
    pthread_mutex_unlock(&s->lock);
    return 1;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    rs_rc_server *s = w->s;
    rs_rc_bind_thread(s->o.bind_core_offset, s->o.bind_core_stride, s->nthreads + w->idx,
                      s->o.numa_node);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->t_head == s->t_tail && !atomic_load(&s->stop))
            pthread_cond_wait(&s->tasks_cv, &s->lock);
        if (s->t_head == s->t_tail)
            break;
        task t = s->ring[s->t_head++ % TASK_RING];
        pthread_mutex_unlock(&s->lock);
        serve_slot(s, t.lane, t.slot, t.seq, s->nthreads + w->idx, &w->prof);
        atomic_store_explicit(&t.lane->busy[t.slot], 0, memory_order_release);
        pthread_mutex_lock(&s->lock);
        if (atomic_fetch_sub(&t.lane->inflight, 1) == 1)
            pthread_cond_broadcast(&s->ack);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- pollers -----------------------------------------------------------------------------------
 */

static void poller_refresh(poller *p) {
    rs_rc_server *s = p->s;
    pthread_mutex_lock(&s->lock);
    uint64_t g = atomic_load(&s->gen);
    uint32_t n = s->plen[p->idx];
    if (n > p->cap) {
        srv_lane **nl = realloc(p->lanes, n * sizeof *nl);
        if (nl) {
            p->lanes = nl;
            p->cap = n;
        }
    }
    if (n <= p->cap) {
        if (n)
            memcpy(p->lanes, s->plist[p->idx], n * sizeof *p->lanes);
        p->nlanes = n;
    }
    p->gen_seen = g;
    atomic_store(&p->acked_gen, g);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
}

static void *poller_main(void *arg) {
    poller *p = arg;
    rs_rc_server *s = p->s;
    rc_prof *pf = &p->prof;
    int core =
        rs_rc_bind_thread(s->o.bind_core_offset, s->o.bind_core_stride, p->idx, s->o.numa_node);
    printf("component=rdma_server event=polling_thread_ready transport=%s shard=%u thread_id=%u "
           "core=%d poll_mode=%s\n",
           s->fab->name, s->h.shard_id, p->idx, core,
           s->o.poll_mode == RS_RC_POLL_BUSY ? "busy" : "adaptive");
    fflush(stdout);
    pthread_mutex_lock(&s->lock);
    s->pollers_ready++;
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
    rs_rc_backoff bo;
    rs_rc_backoff_init(&bo, s->o.poll_mode);
    int workers = s->o.get_workers > 0;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&s->gen, memory_order_acquire) != p->gen_seen)
            poller_refresh(p);
        if (p->nlanes == 0) {
            pthread_mutex_lock(&s->lock);
            while (s->plen[p->idx] == 0 && !atomic_load(&s->stop)) {
                atomic_store(&p->acked_gen, atomic_load(&s->gen));
                pthread_cond_broadcast(&s->ack);
                pthread_cond_wait(&s->cond, &s->lock);
            }
            pthread_mutex_unlock(&s->lock);
            p->gen_seen = UINT64_MAX; /* force a refresh */
            continue;
        }
        uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
        uint64_t ready = 0;
        for (uint32_t i = 0; i < p->nlanes; i++) {
            srv_lane *ln = p->lanes[i];
            for (uint32_t k = 0; k < ln->slots; k++) {
                const uint8_t *tail = ln->region.addr + (size_t)(k + 1) * ln->req_bytes - 8;
                uint64_t seq = __atomic_load_n((const uint64_t *)tail, __ATOMIC_ACQUIRE);
                BUMP(pf->scanned_slots, 1);
                if (seq == 0 || seq == ln->seen[k]) {
                    BUMP(pf->not_ready_slots, 1);
                    continue;
                }
                if (workers && atomic_load_explicit(&ln->busy[k], memory_order_acquire)) {
                    BUMP(pf->inflight_seq_ready, 1);
                    continue;
                }
                ln->seen[k] = seq;
                if (seq <= ln->high[k]) {
                    BUMP(pf->duplicate_seq_ready, 1);
                    continue;
                }
                ln->high[k] = seq;
                ready++;
                const rs_rc_desc *d =
                    (const rs_rc_desc *)(ln->region.addr + (size_t)k * ln->req_bytes);
                int is_get = __atomic_load_n(&d->op, __ATOMIC_RELAXED) == RS_PS_GET;
                BUMP(pf->found_get, (uint64_t)is_get);
                if (workers && is_get && task_push(s, ln, k, seq))
                    continue;
                serve_slot(s, ln, k, seq, p->idx, pf);
            }
        }
        BUMP(pf->scan_rounds, 1);
        BUMP(pf->ready_slots, ready);
        if (ready > pf->max_ready_per_round)
            __atomic_store_n(&pf->max_ready_per_round, ready, __ATOMIC_RELAXED);
        if (t0)
            BUMP(pf->poll_loop_ns, rs_now_ns() - t0);
        if (ready) {
            rs_rc_backoff_busy(&bo);
        } else {
            BUMP(pf->empty_scan_rounds, 1);
            rs_rc_backoff_idle(&bo);
        }
    }
    /* a poller that is gone acknowledges every later generation: retirement never waits on it */
    pthread_mutex_lock(&s->lock);
    atomic_store(&p->acked_gen, UINT64_MAX);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- lanes: create, publish to pollers, retire ------------------------------------------------
 */

static void lane_free(rs_rc_server *s, srv_lane *ln) {
    if (ln->ep)
        s->fab->ep_destroy(ln->ep);
    if (ln->region.addr)
        s->fab->free_region(s->f, &ln->region);
    free(ln->seen);
    free(ln->high);
    free((void *)ln->busy);
    pthread_spin_destroy(&ln->wlock);
    ln->ep = NULL;
}

/* Take the client's lanes away from the pollers and free them. Called by the control thread. */
static void client_retire(rs_rc_server *s, srv_client *cl) {
    pthread_mutex_lock(&s->lock);
    if (cl->attached) {
        for (uint32_t q = 0; q < cl->qps; q++) {
            srv_lane *ln = &cl->lanes[q];
            unsigned p = ln->poller;
            for (uint32_t i = 0; i < s->plen[p]; i++)
                if (s->plist[p][i] == ln) {
                    s->plist[p][i] = s->plist[p][--s->plen[p]];
                    break;
                }
        }
        uint64_t g = atomic_fetch_add(&s->gen, 1) + 1;
        pthread_cond_broadcast(&s->cond);
        for (;;) {
            int all = 1;
            for (uint32_t i = 0; i < s->nthreads; i++)
                if (s->pollers[i].started && atomic_load(&s->pollers[i].acked_gen) < g)
                    all = 0;
            for (uint32_t q = 0; q < cl->qps && all; q++)
                if (atomic_load(&cl->lanes[q].inflight))
                    all = 0;
            if (all)
                break;
            pthread_cond_wait(&s->ack, &s->lock);
        }
        atomic_fetch_sub(&s->lanes_open, cl->qps);
        atomic_fetch_sub(&s->clients_open, 1);
    }
    pthread_mutex_unlock(&s->lock);
    if (cl->lanes)
        for (uint32_t q = 0; q < cl->qps; q++)
            lane_free(s, &cl->lanes[q]);
    free(cl->lanes);
    if (cl->fd >= 0)
        close(cl->fd);
    free(cl);
}

static void send_error(int fd, int code, const char *reason) {
    uint8_t body[4 + 256];
    uint32_t c = (uint32_t)code;
    memcpy(body, &c, 4);
    memset(body + 4, 0, 256);
    memcpy(body + 4, reason, strnlen(reason, 255));
    rs_rc_ctrl_send(fd, RS_RC_MSG_ERROR, body, sizeof body, NULL);
}

/* Validate an attach request, build the lanes and reply. Returns 0 (attached) or an error code
 * after sending the reason (the caller closes the connection). */
static int client_attach(rs_rc_server *s, srv_client *cl, const uint8_t *body, uint32_t len) {
    rs_rc_attach_req *rq = malloc(sizeof *rq);
    rs_rc_attach_rep *rp = calloc(1, sizeof *rp);
    uint8_t *out = NULL;
    rs_error err = {0};
    int rc;
    if (!rq || !rp) {
        rc = rs_error_set(&err, RS_ENOMEM, "server out of memory");
        goto reject;
    }
    if ((rc = rs_rc_ctrl_decode_attach_req(body, len, rq, &err)))
        goto reject;
    if (cl->attached) {
        rc = rs_error_set(&err, RS_EPROTO, "this connection already attached client %u", cl->id);
        goto reject;
    }
    if (strcmp(rq->fabric, s->fab->name) != 0) {
        rc = rs_error_set(&err, RS_EINVAL, "client speaks fabric '%s', this server '%s'",
                          rq->fabric, s->fab->name);
        goto reject;
    }
    if (rq->shard_id != s->h.shard_id) {
        rc = rs_error_set(&err, RS_EINVAL, "client wants shard %u, this server serves shard %u",
                          rq->shard_id, s->h.shard_id);
        goto reject;
    }
    if (rq->slots < 1 || rq->slots > 1024 || rq->request_slot_bytes < 4096 ||
        rq->response_slot_bytes < 4096 || rq->request_slot_bytes % 64 ||
        rq->response_slot_bytes % 64 || rq->request_slot_bytes > (1u << 30) ||
        rq->response_slot_bytes > (1u << 30)) {
        rc = rs_error_set(&err, RS_EINVAL,
                          "bad geometry: %u slots of %u/%u bytes (1..1024 slots, 4 KiB..1 GiB, "
                          "multiples of 64)",
                          rq->slots, rq->request_slot_bytes, rq->response_slot_bytes);
        goto reject;
    }
    uint64_t lane_len = (uint64_t)rq->slots * (rq->request_slot_bytes + rq->response_slot_bytes);
    if (lane_len * rq->qps > (64ull << 30)) {
        rc = rs_error_set(&err, RS_EINVAL,
                          "%u QPs x %" PRIu64 " bytes exceed the 64 GiB per-client limit", rq->qps,
                          lane_len);
        goto reject;
    }
    cl->qps = rq->qps;
    cl->lanes = calloc(rq->qps, sizeof *cl->lanes);
    if (!cl->lanes) {
        rc = rs_error_set(&err, RS_ENOMEM, "server out of memory");
        goto reject;
    }
    pthread_mutex_lock(&s->lock);
    cl->id = s->next_client_id++;
    pthread_mutex_unlock(&s->lock);
    for (uint32_t q = 0; q < rq->qps; q++) {
        srv_lane *ln = &cl->lanes[q];
        ln->cl = cl;
        ln->client_id = cl->id;
        ln->qp = q;
        ln->slots = rq->slots;
        ln->req_bytes = rq->request_slot_bytes;
        ln->resp_bytes = rq->response_slot_bytes;
        ln->poller = (cl->id + q) % s->nthreads;
        pthread_spin_init(&ln->wlock, PTHREAD_PROCESS_PRIVATE);
        ln->seen = calloc(rq->slots, 8);
        ln->high = calloc(rq->slots, 8);
        ln->busy = calloc(rq->slots, sizeof *ln->busy);
        if (!ln->seen || !ln->high || !ln->busy) {
            rc = rs_error_set(&err, RS_ENOMEM, "server out of memory");
            goto reject;
        }
        if (rq->lanes[q].region_len != lane_len) {
            rc = rs_error_set(&err, RS_EINVAL,
                              "client lane %u region is %" PRIu64 " bytes, geometry needs %" PRIu64,
                              q, rq->lanes[q].region_len, lane_len);
            goto reject;
        }
        if ((rc = s->fab->alloc_region(s->f, lane_len, &ln->region, &err)))
            goto reject;
        if ((rc = s->fab->ep_create(s->f, &ln->region, &ln->ep, &rp->lanes[q], &err)))
            goto reject;
        if ((rc = s->fab->ep_connect(ln->ep, &rq->lanes[q], &err)))
            goto reject;
        ln->peer = rq->lanes[q];
    }
    rp->status = 0;
    rp->client_id = cl->id;
    rp->shard_id = s->h.shard_id;
    rp->value_size = s->h.value_size;
    rp->max_keys = s->h.max_keys;
    rp->qps = rq->qps;
    size_t cap = RS_RC_CTRL_HDR + 300 + (size_t)rq->qps * 128;
    out = malloc(cap);
    int n = out ? rs_rc_ctrl_encode_attach_rep(rp, out, cap) : RS_ENOMEM;
    if (n < 0) {
        rc = rs_error_set(&err, RS_ENOMEM, "cannot encode the attach reply");
        goto reject;
    }
    if (send(cl->fd, out, (size_t)n, MSG_NOSIGNAL) != n) {
        rc = RS_ECONN;
        goto fail_quiet;
    }
    pthread_mutex_lock(&s->lock);
    for (uint32_t q = 0; q < cl->qps; q++) {
        srv_lane *ln = &cl->lanes[q];
        unsigned p = ln->poller;
        if (s->plen[p] == s->pcap[p]) {
            uint32_t nc = s->pcap[p] ? s->pcap[p] * 2 : 16;
            srv_lane **nl = realloc(s->plist[p], nc * sizeof *nl);
            if (!nl)
                continue; /* not reachable in practice; the lane just stays unserved */
            s->plist[p] = nl;
            s->pcap[p] = nc;
        }
        s->plist[p][s->plen[p]++] = ln;
    }
    cl->attached = 1;
    atomic_fetch_add(&s->gen, 1);
    atomic_fetch_add(&s->clients_attached, 1);
    atomic_fetch_add(&s->clients_open, 1);
    atomic_fetch_add(&s->lanes_open, cl->qps);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    free(out);
    free(rq);
    free(rp);
    return 0;
reject:
    if (rp) {
        rs_rc_attach_rep e = {.status = rc ? rc : RS_EINVAL};
        snprintf(e.reason, sizeof e.reason, "%s", err.msg);
        uint8_t small[RS_RC_CTRL_HDR + 300];
        int n2 = rs_rc_ctrl_encode_attach_rep(&e, small, sizeof small);
        if (n2 > 0)
            (void)!send(cl->fd, small, (size_t)n2, MSG_NOSIGNAL);
    }
    fprintf(stderr, "component=rdma_rc_server event=attach_rejected shard=%u reason=\"%s\"\n",
            s->h.shard_id, err.msg);
fail_quiet:
    atomic_fetch_add(&s->ctrl_rejected, 1);
    free(out);
    free(rq);
    free(rp);
    return rc ? rc : RS_EINVAL;
}

/* ---- control thread ---------------------------------------------------------------------------
 */

static void ctrl_handle(rs_rc_server *s, srv_client *cl, srv_client **list) {
    uint16_t type;
    uint8_t *body = NULL;
    uint32_t len = 0;
    rs_error err = {0};
    int rc = rs_rc_ctrl_recv(cl->fd, CTRL_MSG_TIMEOUT_MS, &type, &body, &len, &err);
    if (rc == 0) {
        if (type == RS_RC_MSG_READY_REQ) {
            uint32_t rep[5] = {1, s->h.shard_id, s->h.value_size, s->h.max_keys,
                               (uint32_t)s->h.index_type};
            rc = rs_rc_ctrl_send(cl->fd, RS_RC_MSG_READY_REP, rep, sizeof rep, &err);
        } else if (type == RS_RC_MSG_ATTACH_REQ) {
            rc = client_attach(s, cl, body, len);
        } else if (type == RS_RC_MSG_ATTACHED) {
            rc = 0;
        } else {
            rc = rs_error_set(&err, RS_EPROTO, "unknown control message type %u", type);
            send_error(cl->fd, rc, err.msg);
            atomic_fetch_add(&s->ctrl_rejected, 1);
        }
    } else if (rc != RS_ECONN) {
        send_error(cl->fd, rc, err.msg);
        fprintf(stderr, "component=rdma_rc_server event=control_rejected shard=%u reason=\"%s\"\n",
                s->h.shard_id, err.msg);
        atomic_fetch_add(&s->ctrl_rejected, 1);
    }
    free(body);
    if (rc != 0) {
        for (srv_client **pp = list; *pp; pp = &(*pp)->next)
            if (*pp == cl) {
                *pp = cl->next;
                break;
            }
        client_retire(s, cl);
    }
}

static void *ctrl_main(void *arg) {
    rs_rc_server *s = arg;
    srv_client *list = NULL;
    struct pollfd *pf = NULL;
    srv_client **who = NULL;
    size_t cap = 0;
    /* reserve descriptor (opened before the threads start, so a server's descriptor count is
     * stable once it is ready): when the process runs out of them, a pending connection is
     * accepted and closed through it instead of leaving the listening socket readable */
    int spare = s->ctrl_spare;
    while (!atomic_load(&s->stop)) {
        size_t n = 2;
        for (srv_client *c = list; c; c = c->next)
            n++;
        if (n > cap) {
            cap = n * 2;
            pf = realloc(pf, cap * sizeof *pf);
            who = realloc(who, cap * sizeof *who);
            if (!pf || !who)
                break;
        }
        pf[0] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        size_t i = 2;
        for (srv_client *c = list; c; c = c->next, i++) {
            pf[i] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            who[i] = c;
        }
        int r = poll(pf, n, -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        for (i = 2; i < n; i++)
            if (pf[i].revents)
                ctrl_handle(s, who[i], &list);
        if (pf[0].revents & POLLIN) {
            int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare >= 0) {
                close(spare);
                fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                    close(fd);
                spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
                continue;
            }
            if (fd >= 0 && n - 2 >= s->o.max_clients) {
                close(fd); /* control connections are few and short-lived; this is a flood */
                continue;
            }
            if (fd >= 0) {
                /* this thread serves every control connection: a peer that stops reading must
                 * not block it (and every other client's attach) in send() for longer than this */
                struct timeval tv = {.tv_sec = CTRL_MSG_TIMEOUT_MS / 1000,
                                     .tv_usec = (CTRL_MSG_TIMEOUT_MS % 1000) * 1000};
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                srv_client *c = calloc(1, sizeof *c);
                if (!c) {
                    close(fd);
                    continue;
                }
                c->fd = fd;
                c->next = list;
                list = c;
            }
        }
    }
    while (list) {
        srv_client *c = list;
        list = c->next;
        client_retire(s, c);
    }
    s->ctrl_spare = spare; /* closed by stop() */
    free(pf);
    free(who);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------------
 */

int rs_rc_server_start(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                       uint32_t num_threads, const rs_rc_options *opts, const rs_rc_handler *h,
                       rs_rc_server **out, rs_error *err) {
    if (num_threads == 0)
        num_threads = 1;
    if (num_threads + opts->get_workers > 64)
        return rs_error_set(err, RS_EINVAL, "thread_num %u + get workers %u exceed 64", num_threads,
                            opts->get_workers);
    if (h->value_size == 0 || !h->handle)
        return rs_error_set(err, RS_EINVAL, "RC server needs a fixed value_size and a handler");
    rs_rc_server *s = calloc(1, sizeof *s);
    if (!s)
        return rs_error_set(err, RS_ENOMEM, "RC server: out of memory");
    int rc;
    s->fab = fab;
    s->o = *opts;
    s->h = *h;
    s->nthreads = num_threads;
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    s->ctrl_spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->next_client_id = 1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_cond_init(&s->ack, NULL);
    pthread_cond_init(&s->tasks_cv, NULL);
    rs_rc_fabric_config fc = {.device = opts->device[0] ? opts->device : NULL,
                              .port = opts->ib_port,
                              .gid_index = opts->gid_index,
                              .max_send_wr = 0,
                              .inline_bytes = opts->inline_bytes,
                              .numa_node = opts->numa_node};
    if ((rc = fab->open(&fc, &s->f, err)))
        goto fail;
    if (h->kv) {
        /* direct_sg sources are value-store rows anywhere in memory: register the whole address
         * space (verbs: an implicit on-demand-paging MR). Without it direct_sg falls back to copy.
         */
        rs_error e2 = {0};
        if (fab->reg_local(s->f, NULL, SIZE_MAX, &s->kv_mr, &e2) == 0)
            s->kv_mr_ok = 1;
        else
            fprintf(stderr,
                    "component=rdma_rc_server event=direct_sg_unavailable shard=%u reason=\"%s\"\n",
                    h->shard_id, e2.msg);
    }
    s->pollers = calloc(num_threads, sizeof *s->pollers);
    s->workers = calloc(opts->get_workers ? opts->get_workers : 1, sizeof *s->workers);
    s->plist = calloc(num_threads, sizeof *s->plist);
    s->plen = calloc(num_threads, sizeof *s->plen);
    s->pcap = calloc(num_threads, sizeof *s->pcap);
    if (!s->pollers || !s->workers || !s->plist || !s->plen || !s->pcap) {
        rc = rs_error_set(err, RS_ENOMEM, "RC server: out of memory");
        goto fail;
    }
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "RC server: pipe");
        goto fail;
    }
    if ((rc = rs_rc_tcp_listen(host, port, &s->listen_fd, &s->port, err)))
        goto fail;
    for (uint32_t i = 0; i < num_threads; i++) {
        poller *p = &s->pollers[i];
        p->s = s;
        p->idx = i;
        if (pthread_create(&p->th, NULL, poller_main, p) != 0) {
            rc = rs_error_set(err, RS_ENOMEM, "RC server: cannot start poll thread %u", i);
            goto fail;
        }
        p->started = 1;
    }
    for (uint32_t i = 0; i < opts->get_workers; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->idx = i;
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
            rc = rs_error_set(err, RS_ENOMEM, "RC server: cannot start GET worker %u", i);
            goto fail;
        }
        w->started = 1;
    }
    /* readiness lines first, then the control plane: a client that reaches it finds every poller
     * running, and a log reader sees one polling_thread_ready line per poll thread before the
     * caller reports the server ready */
    pthread_mutex_lock(&s->lock);
    while (s->pollers_ready < num_threads)
        pthread_cond_wait(&s->ack, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (pthread_create(&s->ctrl_th, NULL, ctrl_main, s) != 0) {
        rc = rs_error_set(err, RS_ENOMEM, "RC server: cannot start the control plane thread");
        goto fail;
    }
    s->ctrl_started = 1;
    if (opts->profile_interval_ms) {
        if (pthread_create(&s->prof_th, NULL, rs_rc_server_profile_main, s) != 0) {
            rc = rs_error_set(err, RS_ENOMEM, "RC server: cannot start the profile thread");
            goto fail;
        }
        s->prof_started = 1;
    }
    *out = s;
    return 0;
fail:
    rs_rc_server_stop(s);
    return rc;
}

uint16_t rs_rc_server_port(const rs_rc_server *s) {
    return s->port;
}

void rs_rc_server_get_stats(rs_rc_server *s, rs_rc_server_stats *out) {
    memset(out, 0, sizeof *out);
    rc_prof t;
    rs_rc_server_prof_sum(s, &t);
    out->clients_attached = atomic_load(&s->clients_attached);
    out->clients_open = atomic_load(&s->clients_open);
    out->lanes_open = atomic_load(&s->lanes_open);
    out->ctrl_rejected = atomic_load(&s->ctrl_rejected);
    out->requests = t.handled_get + t.handled_put + t.handled_update + t.handled_command;
    out->invalid_descriptor = t.invalid_descriptor + t.wrong_shard;
    out->duplicate_seq = t.duplicate_seq_ready;
    out->bytes_in = t.bytes_in;
    out->bytes_out = t.response_payload_bytes;
    out->direct_sg = t.get_direct_sg;
    out->direct_sg_fallback = t.get_direct_sg_fallback;
}

void rs_rc_server_stop(rs_rc_server *s) {
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond);
    pthread_cond_broadcast(&s->tasks_cv);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
    if (s->wake[1] >= 0)
        (void)!write(s->wake[1], "x", 1);
    if (s->prof_started)
        pthread_join(s->prof_th, NULL);
    for (uint32_t i = 0; s->pollers && i < s->nthreads; i++)
        if (s->pollers[i].started)
            pthread_join(s->pollers[i].th, NULL);
    for (uint32_t i = 0; s->workers && i < s->o.get_workers; i++)
        if (s->workers[i].started)
            pthread_join(s->workers[i].th, NULL);
    /* pollers and workers are gone: the control thread may retire clients without waiting */
    if (s->ctrl_started)
        pthread_join(s->ctrl_th, NULL);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->ctrl_spare >= 0)
        close(s->ctrl_spare);
    if (s->wake[0] >= 0)
        close(s->wake[0]);
    if (s->wake[1] >= 0)
        close(s->wake[1]);
    if (s->pollers)
        for (uint32_t i = 0; i < s->nthreads; i++)
            free(s->pollers[i].lanes);
    if (s->plist)
        for (uint32_t i = 0; i < s->nthreads; i++)
            free(s->plist[i]);
    free(s->plist);
    free(s->plen);
    free(s->pcap);
    free(s->pollers);
    free(s->workers);
    if (s->kv_mr_ok)
        s->fab->dereg_local(s->f, &s->kv_mr);
    if (s->f)
        s->fab->close(s->f);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    pthread_cond_destroy(&s->ack);
    pthread_cond_destroy(&s->tasks_cv);
    free(s);
}
