/*
 * rc_server_serve.c — what the RC server does with one ready request slot
 * (rs_rc_server_serve_slot, called by the pollers and the GET workers of rc_server.c): check the
 * descriptor against the lane, decode the PSRequest, run the shard handler or one of the GET paths
 * (staging_copy into the response staging slot, direct_sg straight from the value store, the fake
 * GET modes), and answer: optional payload write, then the status word with the seq last, then
 * (shm) a wake of the client when its waiter word says it sleeps (or, given a wake list, its
 * check and wake later: rs_rc_server_wake_deferred); on verbs, the status word goes
 * with an immediate when the request asked for it (RS_RC_FLAG_NOTIFY: the client blocks on its
 * completion channel).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/clock.h"
#include "recstore/rc.h"

#include "transport/rc/rc_server_internal.h"

/* ---- responses ------------------------------------------------------------------------------- */

/* Post a write, draining completions while the send queue is full. Caller holds ln->wlock. */
static int lane_write(rs_rc_server *s, srv_lane *ln, const rs_rc_sge *sg, int n, uint64_t addr,
                      unsigned flags) {
    rs_error err = {0};
    rs_rc_wc wc[16];
    for (int tries = 0;; tries++) {
        int rc = s->fab->write(ln->ep, sg, n, addr, ln->peer.rkey, flags, 0, &err);
        if (rc != RS_EBUSY || tries > 1000000) return rc;
        s->fab->poll(ln->ep, wc, 16);
    }
}

/* Write `hdr_len` bytes at src (rows then header, already in staging) unless they are already in
 * place (window), then publish the status word. */
/* in_place: 0 the response is in the staging slot, 1 already in the client's slot (shm window),
 * 2 in the client's slot, its rows gathered from the value store (direct_sg: DONE_SG). */
static void finish(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq, int32_t status,
                   const uint8_t *src, uint32_t bytes, uint32_t msg_bytes, int in_place,
                   rc_prof *pf, rc_wakes *wk) {
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    uint64_t raddr = lane_resp_addr(ln, slot);
    /* built in the staging slot's registered tail, so a non-inline write can read it */
    rs_rc_status_word *w =
        (rs_rc_status_word *)(lane_staging(ln, slot) + ln->resp_bytes - sizeof *w);
    *w = (rs_rc_status_word){.status = status,
                             .response_bytes = bytes,
                             .msg_bytes = msg_bytes,
                             .state = in_place == 2 ? RS_RC_STATE_DONE_SG : RS_RC_STATE_DONE,
                             .seq = seq};
    rs_rc_wc wc[16];
    pthread_spin_lock(&ln->wlock);
    if (bytes && !in_place) {
        rs_rc_sge sg = {src, bytes, ln->region.lkey};
        unsigned fl = bytes <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0;
        if (lane_write(s, ln, &sg, 1, raddr, fl) == 0) BUMP(pf->response_payload_writes, 1);
    }
    rs_rc_sge sw = {w, sizeof *w, ln->region.lkey};
    unsigned fl = RS_RC_WR_SIGNALED | RS_RC_WR_PUBLISH |
                  (sizeof *w <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0);
    /* the request's descriptor is still in its slot: the client rewrites it only after this */
    const rs_rc_desc *d = (const rs_rc_desc *)(ln->region.addr + (size_t)slot * ln->req_bytes);
    int notify = s->fab->notify_events && (d->flags & RS_RC_FLAG_NOTIFY);
    if (notify) fl |= RS_RC_WR_NOTIFY;
    if (lane_write(s, ln, &sw, 1, raddr + ln->resp_bytes - sizeof *w, fl) == 0) {
        BUMP(pf->response_status_writes, 1);
        if (notify) BUMP(pf->client_wakes, 1);
    }
    s->fab->poll(ln->ep, wc, 16);
    pthread_spin_unlock(&ln->wlock);
    if (s->fab->shared_futex) {
        uint32_t *waiter = s->fab->remote_window(
            ln->ep, raddr + RS_RC_SLEEP_WORD_OFFSET(ln->resp_bytes), sizeof *waiter);
        uint64_t *seqw = s->fab->remote_window(ln->ep, raddr + ln->resp_bytes - 8, 8);
        if (waiter && seqw) {
            if (wk && wk->n < RC_WAKES_MAX)
                wk->w[wk->n++] = (rc_wake){waiter, seqw};
            else if (rs_rc_wake_waiter(waiter, seqw))
                BUMP(pf->client_wakes, 1);
        }
    }
    BUMP(pf->response_payload_bytes, bytes);
    if (t0) {
        BUMP(pf->complete_ns, rs_now_ns() - t0);
        BUMP(pf->complete_count, 1);
    }
}

static void respond_error(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                          int32_t status, const char *why, rc_prof *pf, rc_wakes *wk) {
    rs_ps_response r;
    memset(&r, 0, offsetof(rs_ps_response, error));
    r.status = status;
    r.value_size = s->h.value_size;
    snprintf(r.error, sizeof r.error, "%s", why);
    r.reply[0] = '\0';
    uint8_t *st = lane_staging(ln, slot);
    size_t hl = rs_ps_response_encode_header(&r, 1, st);
    finish(s, ln, slot, seq, status, st, (uint32_t)hl, (uint32_t)hl, 0, pf, wk);
}

/* Send a handled response whose rows (rows_len bytes) are at buf; encode the header after them. */
static void respond(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq, rs_ps_response *r,
                    uint8_t *buf, size_t room, int in_place, rc_prof *pf, rc_wakes *wk) {
    size_t hl = rs_ps_response_header_size(r, 1);
    if (r->rows_len + hl > room) {
        respond_error(s, ln, slot, seq, RS_PS_BATCH_TOO_LARGE,
                      "response does not fit the response slot", pf, wk);
        return;
    }
    rs_ps_response_encode_header(r, 1, buf + r->rows_len);
    finish(s, ln, slot, seq, r->status, buf, (uint32_t)(r->rows_len + hl), (uint32_t)hl, in_place,
           pf, wk);
}

/* ---- GET paths --------------------------------------------------------------------------------
 */

/* direct_sg: gather rows straight from the value store into the client's response slot. Returns
 * 0 when done, 1 when the caller must fall back to the staging copy. */
static int get_direct_sg(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                         const rs_ps_request *req, size_t room, rc_prof *pf, rc_wakes *wk) {
    /* a server configured with get_response_mode=staging_copy serves every GET by copy */
    if (!s->h.kv || s->kv_mr.mode == RC_KV_MR_NONE || s->o.get_mode == RS_RC_GET_STAGING_COPY)
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
    if (t0) BUMP(pf->get_index_lookup_ns, t1 - t0);
    if (rc != 0 || found != n) {
        BUMP(pf->get_missing_rows, n - (rc == 0 ? found : 0));
        free(refs);
        free(keys);
        return 1;
    }
    /* keys are looked up: their buffer holds the rows' lkeys now (resolved before the lane lock,
     * since registering newly grown value-store memory is a syscall) */
    uint32_t *lkeys = (uint32_t *)keys;
    for (uint32_t i = 0; i < n; i++)
        if (rs_rc_kv_mr_lkey(s, refs[i], vs, &lkeys[i]) != 0) {
            free(refs);
            free(keys);
            return 1; /* not registered: the staging copy serves this GET */
        }
    uint64_t raddr = lane_resp_addr(ln, slot);
    rs_rc_sge sg[RS_RC_MAX_SGE];
    int k = 0, wrs = 0, failed = 0;
    uint64_t off = 0, wr_off = 0;
    pthread_spin_lock(&ln->wlock);
    for (uint32_t i = 0; i < n && !failed; i++) {
        uint32_t lkey = lkeys[i];
        if (k > 0 && (const uint8_t *)sg[k - 1].addr + sg[k - 1].len == refs[i] &&
            sg[k - 1].lkey == lkey) {
            sg[k - 1].len += vs; /* adjacent rows merge into one SGE */
        } else {
            if (k == RS_RC_MAX_SGE) {
                if (lane_write(s, ln, sg, k, raddr + wr_off, 0)) failed = 1;
                wrs++;
                wr_off = off;
                k = 0;
            }
            sg[k++] = (rs_rc_sge){refs[i], vs, lkey};
        }
        off += vs;
    }
    if (!failed && k > 0) {
        if (lane_write(s, ln, sg, k, raddr + wr_off, 0)) failed = 1;
        wrs++;
    }
    pthread_spin_unlock(&ln->wlock);
    free(refs);
    free(keys);
    if (failed) return 1; /* nothing published yet: the staging copy overwrites the partial rows */
    BUMP(pf->get_direct_sg, 1);
    BUMP(pf->get_direct_sg_wr, (uint64_t)wrs);
    BUMP(pf->response_payload_sg_writes, 1);
    BUMP(pf->response_payload_sg_wrs, (uint64_t)wrs);
    BUMP(pf->get_rows, n);
    BUMP(pf->get_value_bytes, (uint64_t)n * vs);
    if (t0) BUMP(pf->get_direct_sg_ns, rs_now_ns() - t1);
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
    if (r.rows_len + hl > room) return 1;
    pthread_spin_lock(&ln->wlock);
    rs_rc_sge hs = {st, (uint32_t)hl, ln->region.lkey};
    lane_write(s, ln, &hs, 1, raddr + r.rows_len, hl <= s->o.inline_bytes ? RS_RC_WR_INLINE : 0);
    pthread_spin_unlock(&ln->wlock);
    BUMP(pf->response_payload_writes, 1);
    finish(s, ln, slot, seq, RS_PS_OK, NULL, (uint32_t)(r.rows_len + hl), (uint32_t)hl, 2, pf, wk);
    return 0;
}

static void serve_get(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                      const rs_rc_desc *d, const rs_ps_request *req, unsigned tslot, rc_prof *pf,
                      rc_wakes *wk) {
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
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf, wk);
        goto done;
    case RS_RC_FAKE_INDEX_ONLY:
        if (!s->h.kv) {
            respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD,
                          "index_only needs the shard's KV engine", pf, wk);
            goto done;
        }
        for (uint32_t i = 0; i < n; i++) {
            size_t len = 0;
            if (rs_kv_get(s->h.kv, rs_ps_key(req->keys, i), NULL, 0, &len) != RS_ENOTFOUND)
                r.num_found++;
        }
        if (t0) BUMP(pf->get_index_lookup_ns, rs_now_ns() - t0);
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf, wk);
        goto done;
    case RS_RC_FAKE_PAYLOAD_MEMSET:
        memset(buf, 0, (size_t)n * vs);
        r.rows_len = (size_t)n * vs;
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf, wk);
        goto done;
    case RS_RC_FAKE_NONE: break;
    }
    if (d->flags & RS_RC_FLAG_GET_DIRECT_SG) {
        if (get_direct_sg(s, ln, slot, seq, req, room, pf, wk) == 0) goto done;
        BUMP(pf->get_direct_sg_fallback, 1);
        if (!(d->flags & RS_RC_FLAG_GET_ALLOW_FALLBACK_COPY)) {
            respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD,
                          "direct_sg unavailable (missing row or no row references) and fallback "
                          "copy not allowed",
                          pf, wk);
            goto done;
        }
    }
    {
        uint64_t tb = t0 ? rs_now_ns() : 0;
        int rc = s->h.handle(s->h.ctx, req, &r, buf, room - RS_RC_RESP_HDR_ROOM, tslot);
        if (t0) BUMP(pf->get_batch_get_ns, rs_now_ns() - tb);
        if (rc != 0) {
            respond_error(s, ln, slot, seq, RS_PS_INTERNAL, "shard handler failed", pf, wk);
            goto done;
        }
        if (r.status == RS_PS_OK) {
            BUMP(pf->get_rows, n);
            BUMP(pf->get_value_bytes, r.rows_len);
            BUMP(pf->get_missing_rows, n - r.num_found);
        }
        respond(s, ln, slot, seq, &r, buf, room, win != NULL, pf, wk);
    }
done:
    if (t0) BUMP(pf->handle_get_ns, rs_now_ns() - t0);
}

/* The deferred wakes, in the order their answers were published. Each check comes after its
 * answer's status word: the waiter either sees that word before it sleeps or is seen asleep here
 * (rc_poll.c), whenever here is. */
void rs_rc_server_wake_deferred(rc_wakes *wk, rc_prof *pf) {
    for (uint32_t i = 0; i < wk->n; i++)
        if (rs_rc_wake_waiter(wk->w[i].waiter, wk->w[i].seq)) BUMP(pf->client_wakes, 1);
    if (wk->n) BUMP(pf->client_wake_checks_deferred, wk->n);
    wk->n = 0;
}

/* ---- one slot -------------------------------------------------------------------------------- */

void rs_rc_server_serve_slot(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                             unsigned tslot, rc_prof *pf, rc_wakes *wk) {
    const uint8_t *rs = ln->region.addr + (size_t)slot * ln->req_bytes;
    rs_rc_desc d;
    memcpy(&d, rs, sizeof d);
    const rs_rc_commit_word *cw = (const rs_rc_commit_word *)(rs + ln->req_bytes - sizeof *cw);
    char why[256];
    if (__atomic_load_n(&cw->state, __ATOMIC_ACQUIRE) != RS_RC_STATE_READY) {
        BUMP(pf->invalid_descriptor, 1);
        snprintf(why, sizeof why, "commit word state %u is not READY", cw->state);
        respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD, why, pf, wk);
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
        respond_error(s, ln, slot, seq, st, why, pf, wk);
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
        respond_error(s, ln, slot, seq, RS_PS_INVALID_PAYLOAD, err.msg, pf, wk);
        return;
    }
    if (d.op == RS_PS_GET) {
        serve_get(s, ln, slot, seq, &d, &req, tslot, pf, wk);
        return;
    }
    uint64_t t0 = s->o.profile_interval_ms ? rs_now_ns() : 0;
    rs_ps_response r;
    uint8_t *buf = lane_staging(ln, slot);
    rc = s->h.handle(s->h.ctx, &req, &r, buf, 0, tslot);
    if (rc != 0) {
        respond_error(s, ln, slot, seq, RS_PS_INTERNAL, "shard handler failed", pf, wk);
        return;
    }
    r.rows_len = 0;
    respond(s, ln, slot, seq, &r, buf, d.response_bytes, 0, pf, wk);
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
