/*
 * rc_client.c — one logical RC client attached to one shard: a pool of `qps` endpoints with
 * `slots` slots each; requests complete in submission order.
 *
 * Client region of a QP (registered, written by the server): per slot a response slot followed by
 * a request staging slot. Submit: take the first idle (qp, slot), build descriptor + encoded
 * PSRequest + keys + rows in the staging slot, write it to the server's request slot (unsignaled),
 * then write the commit word {READY, seq} to the slot's tail (signaled, published, inline when
 * small); on shm, then ring the lane's doorbell in case its poller sleeps. Next: wait until the
 * response slot's status seq equals the request's seq (spin, then the poll-mode backoff; past its
 * spinning, on shm the thread sleeps on the seq word's futex until the server wakes it; on verbs
 * it naps, or, for a request sent with RS_RC_FLAG_NOTIFY, blocks on its QP's completion channel
 * until the server's immediate arrives; between sleeps the control socket is checked, so a dead
 * server is reported instead of waiting out the timeout), decode the PSResponse header that
 * follows the rows, and copy the rows to the caller (unless skip_client_copy).
 *
 * Verbs notify (adaptive mode): once RS_SPIN_QUICK_AFTER waits in a row ended in naps, the
 * client asks for an immediate on its next requests (every 8th is sent without, and spun for in
 * full: the probe of adaptive spinning), keeping at most `2 x slots` such requests per QP whose
 * receive completion it has not taken, which is how many receives each QP keeps posted. A server
 * that never answers with one (a recbench from before the flag) is noticed after
 * RS_RC_NOTIFY_MISSES slices that ended with the answer there but no event, and not asked again.
 *
 * Invariants: seq is per QP, starts at 1 and grows by one per request; a slot is reused only
 * after its response was consumed; at most max_in_flight (<= qps x slots) requests are pending.
 * One thread uses a client at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/rc.h"
#include "recstore/transport.h"
#include "transport/net.h"

/* Client core binding (bind_core_offset / numa_id): each thread that submits through an RC client
 * is bound once, the i-th such thread of the process to core offset + i * stride. */
static unsigned rs_rc_client_threads_bound;
static __thread int rs_rc_client_thread_bound;

static void bind_submitting_thread(const rs_rc_options *o) {
    if (rs_rc_client_thread_bound || (o->bind_core_offset < 0 && o->numa_node < 0)) return;
    rs_rc_client_thread_bound = 1;
    unsigned i = __atomic_fetch_add(&rs_rc_client_threads_bound, 1, __ATOMIC_RELAXED);
    rs_rc_bind_thread(o->bind_core_offset, o->bind_core_stride, i, o->numa_node);
}

/* Longest nap of a client waiting for an answer it has in flight (adaptive mode, verbs). */
#define RS_RC_CLIENT_NAP_NS 50000ull

/* Verbs notify: a blocking wait's slice (the answer is looked for in memory after each), and how
 * many slices ending with the answer but no event make the client stop asking for immediates. */
#define RS_RC_CLIENT_EVENT_SLICE_NS 1000000ull
#define RS_RC_NOTIFY_MISSES         8u

/* Longest futex sleep (shm) before the deadline and the control socket are checked again: the
 * server wakes the sleeper, so this only bounds how late a dead server is noticed. */
#define RS_RC_CLIENT_SLEEP_NS 1000000000ull

typedef struct cl_slot {
    int busy;
    uint64_t seq, tag, t_submit;
    void *rows_out;
    size_t rows_cap;
    uint16_t op;
    int notify;     /* sent with RS_RC_FLAG_NOTIFY */
    int reserved;   /* one of the caller's row buffers (rows_buffers): carries only GETs into it */
    size_t counted; /* rows_cap counted as pending rows (copy.h): a GET copied into the caller's
                     * buffer */
} cl_slot;

typedef struct cl_prof {
    uint64_t submit_count, wait_count, acquire_qp_count, acquire_qp_failures, submit_ns, wait_ns,
        copy_ns, copied_bytes, pending_peak, pending_sum, descriptor_writes, commit_writes,
        drain_count, drain_ns, wait_blocks, wait_sleep_timeouts, doorbell_rings, wait_quick,
        notify_requests, wait_unspun, rows_in_place, stream_copies;
} cl_prof;

struct rs_rc_client {
    const rs_rc_fabric_ops *fab;
    rs_rc_fabric *f;
    rs_rc_options o;
    int fd;
    char peer[96];
    uint32_t client_id, shard_id, value_size, max_keys, index_type;
    uint32_t qps, slots, req_bytes, resp_bytes, max_in_flight;
    rs_rc_get_mode get_mode;
    rs_rc_region *regions;
    rs_rc_ep **eps;
    rs_rc_ep_meta *peers;
    uint64_t *next_seq; /* per QP */
    uint32_t **bell;    /* per QP: the doorbell to ring after a commit on it, in the server's
                         * region (shm; the one of the lane named by its bell lane word), or NULL */
    uint8_t *rings;     /* per QP: commit words carry an immediate (verbs, RS_RC_CAP_RING) */
    cl_slot *slot;      /* qps x slots */
    uint32_t *fifo;     /* pending (qp * slots + slot) in submission order */
    uint32_t f_head, f_tail;
    cl_prof prof, prof_prev;
    uint64_t prof_last_ns;
    rs_spin_streak streak; /* waits in a row that ended asleep (adaptive spinning, spin.h) */
    /* verbs notify: receives posted per QP (0: off), per QP the notify requests whose receive
     * completion is not taken yet, slices that ended with the answer but without its event */
    uint32_t recvs;
    uint32_t *notify_out;
    uint32_t notify_misses;
    uint32_t notify_asks; /* requests submitted with the streak high (every 8th: a probe) */
};

static inline uint8_t *resp_slot(rs_rc_client *c, uint32_t q, uint32_t k) {
    return c->regions[q].addr + (size_t)k * (c->resp_bytes + c->req_bytes);
}

/* Room left in a slot for keys and rows: the encoded PSRequest / PSResponse header (a few dozen
 * bytes; an error text is at most 255) is kept out of it. */
#define RS_RC_CLIENT_HEADER_ROOM 320u

/* The i-th slot in the order submit takes idle ones (QPs first, then slots); the last
 * rows_buffers of that order are the caller's row buffers. */
static inline cl_slot *nth_slot(rs_rc_client *c, uint32_t i, uint32_t *q, uint32_t *k) {
    *q = i % c->qps;
    *k = i / c->qps;
    return &c->slot[*q * c->slots + *k];
}

static inline uint8_t *req_staging(rs_rc_client *c, uint32_t q, uint32_t k) {
    return resp_slot(c, q, k) + c->resp_bytes;
}

static int fetch_ready(rs_rc_client *c, const char *host, uint16_t port, rs_error *err) {
    uint64_t deadline = rs_now_ns() + (uint64_t)c->o.ctrl_timeout_ms * 1000000ull;
    int rc;
    for (;;) {
        rc = rs_net_connect(host, port, c->o.ctrl_timeout_ms, RS_NET_NONBLOCK, &c->fd, err);
        if (rc == 0) {
            uint16_t type;
            uint8_t *body = NULL;
            uint32_t len;
            rc = rs_rc_ctrl_send(c->fd, RS_RC_MSG_READY_REQ, NULL, 0, err);
            if (rc == 0) rc = rs_rc_ctrl_recv(c->fd, c->o.ctrl_timeout_ms, &type, &body, &len, err);
            if (rc == 0 && type == RS_RC_MSG_READY_REP && len >= 20) {
                uint32_t v[5];
                memcpy(v, body, sizeof v);
                free(body);
                if (v[0] == 1) {
                    c->shard_id = v[1];
                    c->value_size = v[2];
                    c->max_keys = v[3];
                    c->index_type = v[4];
                    return 0;
                }
                rc = rs_error_set(err, RS_EBUSY, "server not ready yet");
            } else if (rc == 0) {
                free(body);
                return rs_error_set(err, RS_EPROTO,
                                    "control plane %s: unexpected reply type %u to READY", c->peer,
                                    type);
            }
            close(c->fd);
            c->fd = -1;
        }
        if (rc != RS_ECONN && rc != RS_EBUSY)
            return rs_error_prefix(err, "control plane %s", c->peer);
        if (rs_now_ns() >= deadline)
            return rs_error_prefix(err, "control plane %s: not ready within %u ms", c->peer,
                                   c->o.ctrl_timeout_ms);
        rs_sleep_ns(10 * 1000000ull);
    }
}

int rs_rc_client_connect(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                         uint32_t max_in_flight, const rs_rc_options *opts, rs_rc_client **out,
                         rs_error *err) {
    if (max_in_flight == 0) max_in_flight = 1;
    if ((uint64_t)max_in_flight > (uint64_t)opts->qps * opts->slots)
        return rs_error_set(err, RS_EINVAL,
                            "prefetch_depth %u exceeds rdma_rc_qps_per_client_per_shard (%u) x "
                            "rdma_rc_slots_per_qp "
                            "(%u) = %u in-flight slots; raise one of them or lower prefetch_depth",
                            max_in_flight, opts->qps, opts->slots, opts->qps * opts->slots);
    if ((uint64_t)max_in_flight + opts->rows_buffers > (uint64_t)opts->qps * opts->slots)
        return rs_error_set(err, RS_EINVAL,
                            "rows_buffers %u + %u requests in flight exceed "
                            "rdma_rc_qps_per_client_per_shard (%u) x rdma_rc_slots_per_qp (%u) = "
                            "%u slots; raise one of them or lower rows_buffers",
                            opts->rows_buffers, max_in_flight, opts->qps, opts->slots,
                            opts->qps * opts->slots);
    if (opts->rows_buffers &&
        opts->response_slot_bytes <= RS_RC_TAIL_BYTES + RS_RC_CLIENT_HEADER_ROOM)
        return rs_error_set(err, RS_EINVAL,
                            "rows_buffers: a %u-byte response slot has no room for rows",
                            opts->response_slot_bytes);
    rs_rc_client *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "RC client: out of memory");
    int rc;
    c->fab = fab;
    c->o = *opts;
    c->fd = -1;
    c->qps = opts->qps;
    c->slots = opts->slots;
    c->req_bytes = opts->request_slot_bytes;
    c->resp_bytes = opts->response_slot_bytes;
    c->max_in_flight = max_in_flight;
    snprintf(c->peer, sizeof c->peer, "%s:%u", host, port);
    rs_rc_attach_req *rq = calloc(1, sizeof *rq);
    rs_rc_attach_rep *rp = calloc(1, sizeof *rp);
    uint8_t *buf = NULL, *body = NULL;
    c->regions = calloc(c->qps, sizeof *c->regions);
    c->eps = calloc(c->qps, sizeof *c->eps);
    c->peers = calloc(c->qps, sizeof *c->peers);
    c->next_seq = calloc(c->qps, sizeof *c->next_seq);
    c->slot = calloc((size_t)c->qps * c->slots, sizeof *c->slot);
    c->fifo = calloc(max_in_flight, sizeof *c->fifo);
    c->bell = calloc(c->qps, sizeof *c->bell);
    c->notify_out = calloc(c->qps, sizeof *c->notify_out);
    c->rings = calloc(c->qps, sizeof *c->rings);
    if (!c->rings || !rq || !rp || !c->regions || !c->eps || !c->peers || !c->next_seq ||
        !c->slot || !c->fifo || !c->bell || !c->notify_out) {
        rc = rs_error_set(err, RS_ENOMEM, "RC client: out of memory");
        goto fail;
    }
    rs_rc_fabric_config fc = {.device = opts->device[0] ? opts->device : NULL,
                              .port = opts->ib_port,
                              .gid_index = opts->gid_index,
                              .inline_bytes = opts->inline_bytes,
                              .numa_node = opts->numa_node};
    if (fab->notify_events && opts->poll_mode == RS_RC_POLL_ADAPTIVE)
        fc.recv_events = c->recvs = 2 * c->slots;
    if ((rc = fab->open(&fc, &c->f, err))) goto fail;
    if ((rc = fetch_ready(c, host, port, err))) goto fail;
    c->get_mode = opts->get_mode;
    /* auto: RecStore's rule (staging copy for PET, scatter-gather for the other indexes) where a
     * NIC gathers; the staging copy wherever the CPU would (shm, EH index on Zen 3: direct_sg 6.6
     * M keys/s against 8.4 M for the staging copy, 2.1 M before its lookup was batched;
     * docs/rdma-shm.md) */
    if (c->get_mode == RS_RC_GET_AUTO)
        c->get_mode = c->index_type == RS_KV_INDEX_PET_HASH || fab->cpu_gather
                          ? RS_RC_GET_STAGING_COPY
                          : RS_RC_GET_DIRECT_SG;
    size_t lane_len = (size_t)c->slots * (c->req_bytes + c->resp_bytes);
    snprintf(rq->fabric, sizeof rq->fabric, "%s", fab->name);
    rq->qps = c->qps;
    rq->slots = c->slots;
    rq->request_slot_bytes = c->req_bytes;
    rq->response_slot_bytes = c->resp_bytes;
    rq->shard_id = c->shard_id;
    rq->token_len = c->o.auth.len;
    memcpy(rq->token, c->o.auth.bytes, c->o.auth.len);
    for (uint32_t q = 0; q < c->qps; q++) {
        if ((rc = fab->alloc_region(c->f, lane_len, &c->regions[q], err))) goto fail;
        if ((rc = fab->ep_create(c->f, &c->regions[q], &c->eps[q], &rq->lanes[q], err))) goto fail;
        /* offer to ring, so the lane's poller can sleep until a request comes (rc.h); in either
         * poll mode: that decides how this client waits, not how the server may */
        if (fab->notify_events) rq->lanes[q].caps |= RS_RC_CAP_RING;
        c->next_seq[q] = 1;
    }
    size_t cap = RS_RC_CTRL_HDR + 64 + (size_t)c->qps * 128 + 4 + RS_AUTH_TOKEN_MAX;
    buf = malloc(cap);
    int n = buf ? rs_rc_ctrl_encode_attach_req(rq, buf, cap) : RS_ENOMEM;
    if (n < 0) {
        rc = rs_error_set(err, RS_ENOMEM, "RC client: cannot encode the attach request");
        goto fail;
    }
    if (send(c->fd, buf, (size_t)n, MSG_NOSIGNAL) != n) {
        rc = rs_error_errno(err, RS_ECONN, errno, "control plane %s: send attach", c->peer);
        goto fail;
    }
    uint16_t type;
    uint32_t len;
    if ((rc = rs_rc_ctrl_recv(c->fd, c->o.ctrl_timeout_ms, &type, &body, &len, err))) {
        rs_error_prefix(err, "control plane %s: attach", c->peer);
        goto fail;
    }
    if (type == RS_RC_MSG_ERROR && len >= 4) {
        rc = rs_error_set(err, RS_EPROTO, "control plane %s rejected the attach: %.*s", c->peer,
                          (int)strnlen((const char *)body + 4, len - 4), (const char *)body + 4);
        goto fail;
    }
    if (type != RS_RC_MSG_ATTACH_REP) {
        rc = rs_error_set(err, RS_EPROTO, "control plane %s: unexpected reply type %u to ATTACH",
                          c->peer, type);
        goto fail;
    }
    if ((rc = rs_rc_ctrl_decode_attach_rep(body, len, rp, err))) goto fail;
    if (rp->status != 0) {
        rc = rs_error_set(err, rp->status, "control plane %s rejected the attach: %s", c->peer,
                          rp->reason);
        goto fail;
    }
    if (rp->qps != c->qps) {
        rc = rs_error_set(err, RS_EPROTO, "control plane %s: %u lanes in the reply, asked for %u",
                          c->peer, rp->qps, c->qps);
        goto fail;
    }
    for (uint32_t q = 0; q < c->qps; q++) {
        if (rp->lanes[q].region_len != lane_len) {
            rc = rs_error_set(err, RS_EPROTO,
                              "server lane %u region has %" PRIu64 " bytes, expected %zu", q,
                              rp->lanes[q].region_len, lane_len);
            goto fail;
        }
        if ((rc = fab->ep_connect(c->eps[q], &rp->lanes[q], err))) goto fail;
        c->peers[q] = rp->lanes[q];
        c->rings[q] = (rq->lanes[q].caps & rp->lanes[q].caps & RS_RC_CAP_RING) != 0;
    }
    c->client_id = rp->client_id;
    for (uint32_t i = c->qps * c->slots - c->o.rows_buffers, q, k; i < c->qps * c->slots; i++)
        nth_slot(c, i, &q, &k)->reserved = 1;
    /* the doorbells, in either poll mode: a busy-mode client that did not ring left a sleeping
     * poller to find its request at the end of its 100 ms safety sleep */
    if (fab->shared_futex && fab->remote_window)
        for (uint32_t q = 0; q < c->qps; q++) {
            const uint32_t *w = fab->remote_window(
                c->eps[q], c->peers[q].region_addr + RS_RC_BELL_LANE_OFFSET(c->req_bytes), 4);
            uint32_t k = w ? __atomic_load_n(w, __ATOMIC_RELAXED) : UINT32_MAX;
            if (k >= c->qps) {
                rc = rs_error_set(err, RS_EPROTO, "RC server %s: lane %u names bell lane %u of %u",
                                  c->peer, q, k, c->qps);
                goto fail;
            }
            c->bell[q] = fab->remote_window(
                c->eps[k], c->peers[k].region_addr + RS_RC_SLEEP_WORD_OFFSET(c->req_bytes), 4);
        }
    if ((rc = rs_rc_ctrl_send(c->fd, RS_RC_MSG_ATTACHED, NULL, 0, err))) goto fail;
    c->prof_last_ns = rs_now_ns();
    free(rq);
    free(rp);
    free(buf);
    free(body);
    *out = c;
    return 0;
fail:
    free(rq);
    free(rp);
    free(buf);
    free(body);
    rs_rc_client_close(c);
    return rc;
}

uint32_t rs_rc_client_id(const rs_rc_client *c) {
    return c->client_id;
}

void rs_rc_client_get_stats(const rs_rc_client *c, rs_rc_client_stats *out) {
    out->wait_blocks = c->prof.wait_blocks;
    out->wait_sleep_timeouts = c->prof.wait_sleep_timeouts;
    out->doorbell_rings = c->prof.doorbell_rings;
    out->wait_quick = c->prof.wait_quick;
    out->wait_unspun = c->prof.wait_unspun;
    out->notify_requests = c->prof.notify_requests;
    out->rows_in_place = c->prof.rows_in_place;
    out->stream_copies = c->prof.stream_copies;
}

uint32_t rs_rc_client_rows_buffers(rs_rc_client *c, void **bufs, uint32_t max, size_t *cap) {
    uint32_t n = c->o.rows_buffers, first = c->qps * c->slots - n, q, k;
    for (uint32_t i = 0; i < n && i < max; i++) {
        nth_slot(c, first + i, &q, &k);
        bufs[i] = resp_slot(c, q, k);
    }
    if (cap) *cap = c->resp_bytes - RS_RC_TAIL_BYTES - RS_RC_CLIENT_HEADER_ROOM;
    return n;
}

void rs_rc_client_limits(const rs_rc_client *c, rs_ps_conn_limits *out) {
    uint32_t req_fixed = RS_RC_TAIL_BYTES + RS_RC_DESC_BYTES + RS_RC_CLIENT_HEADER_ROOM;
    uint32_t resp_fixed = RS_RC_TAIL_BYTES + RS_RC_CLIENT_HEADER_ROOM;
    out->max_keys = c->max_keys;
    out->max_in_flight = c->max_in_flight;
    out->max_request_payload = c->req_bytes > req_fixed ? c->req_bytes - req_fixed : 1;
    out->max_response_rows = c->resp_bytes > resp_fixed ? c->resp_bytes - resp_fixed : 1;
}

static void drain(rs_rc_client *c, uint32_t q) {
    rs_rc_wc wc[16];
    while (c->fab->poll(c->eps[q], wc, 16) > 0)
        c->prof.drain_count++;
}

/* Verbs notify: count the receive completions taken on q (by drain_events or wait_event). */
static void events_taken(rs_rc_client *c, uint32_t q, int n) {
    if (n <= 0) return;
    c->notify_out[q] = (uint32_t)n >= c->notify_out[q] ? 0 : c->notify_out[q] - (uint32_t)n;
}

/* Ask for an immediate on this request? Recent waits ended in naps, this is not a probe, and q
 * has a receive for it (see the top of the file). */
/* Flags of the write that publishes a commit word on QP q: it rings where the lane asked. */
static unsigned commit_flags(const rs_rc_client *c, uint32_t q) {
    return RS_RC_WR_SIGNALED | RS_RC_WR_PUBLISH | (c->rings[q] ? RS_RC_WR_NOTIFY : 0u);
}

static int want_notify(rs_rc_client *c, uint32_t q) {
    if (!c->recvs || !rs_spin_streak_high(&c->streak) ||
        !(++c->notify_asks & RS_SPIN_QUICK_PROBE_MASK))
        return 0;
    events_taken(c, q, c->fab->drain_events(c->eps[q]));
    return c->notify_out[q] < c->recvs;
}

int rs_rc_client_submit(rs_rc_client *c, const rs_ps_request *req, uint64_t tag, void *rows_out,
                        size_t rows_cap, rs_error *err) {
    uint64_t t0 = rs_now_ns();
    bind_submitting_thread(&c->o);
    if (c->f_tail - c->f_head >= c->max_in_flight)
        return rs_error_set(err, RS_EBUSY,
                            "RC client %s: %u requests already in flight (prefetch_depth)", c->peer,
                            c->max_in_flight);
    /* a GET into one of the caller's row buffers goes on that buffer's slot; everything else on
     * the first idle other slot: QPs first, then slots */
    uint32_t q = 0, k = 0, found = 0, all = c->qps * c->slots, first = all - c->o.rows_buffers;
    if (req->op == RS_PS_GET && rows_out)
        for (uint32_t i = first; i < all && !found; i++) {
            const cl_slot *sl = nth_slot(c, i, &q, &k);
            if (resp_slot(c, q, k) != rows_out) continue;
            if (sl->busy)
                return rs_error_set(err, RS_EBUSY,
                                    "RC client %s: row buffer %p still has a GET in flight",
                                    c->peer, rows_out);
            found = 1;
        }
    for (uint32_t kk = 0, i = 0; kk < c->slots && !found; kk++)
        for (uint32_t qq = 0; qq < c->qps && i < first; qq++, i++)
            if (!c->slot[qq * c->slots + kk].busy) {
                q = qq;
                k = kk;
                found = 1;
                break;
            }
    c->prof.acquire_qp_count++;
    if (!found) {
        c->prof.acquire_qp_failures++;
        return rs_error_set(err, RS_EBUSY, "RC client %s: no idle RC write slot available",
                            c->peer);
    }
    uint8_t *st = req_staging(c, q, k);
    size_t msg = rs_ps_request_encoded_size(req, 1);
    size_t keys_len = (size_t)req->num_keys * 8;
    size_t total = RS_RC_DESC_BYTES + msg + keys_len + req->rows_len;
    if (total > (size_t)c->req_bytes - RS_RC_TAIL_BYTES)
        return rs_error_set(
            err, RS_EINVAL,
            "RC client %s: request of %zu bytes (%u keys) exceeds rdma_rc_request_slot_bytes %u "
            "minus the 64-byte tail; raise it or split the batch",
            c->peer, total, req->num_keys, c->req_bytes);
    uint64_t seq = c->next_seq[q]++;
    uint64_t raddr = c->peers[q].region_addr + (uint64_t)k * c->req_bytes;
    uint64_t resp_addr = (uint64_t)(uintptr_t)resp_slot(c, q, k);
    rs_rc_desc *d = (rs_rc_desc *)st;
    memset(d, 0, sizeof *d);
    d->magic = RS_RC_MAGIC;
    d->version = RS_RC_VERSION;
    d->op = (uint16_t)req->op;
    d->seq = seq;
    d->shard_id = req->shard;
    d->client_id = c->client_id;
    d->qp_index = q;
    d->key_count = req->num_keys;
    d->value_size = req->value_size;
    d->embedding_dim = req->value_size / 4;
    d->payload_offset = RS_RC_DESC_BYTES;
    d->payload_bytes = (uint32_t)(msg + keys_len + req->rows_len);
    d->response_bytes = c->resp_bytes - RS_RC_TAIL_BYTES;
    d->msg_bytes = (uint32_t)msg;
    d->client_response_addr = resp_addr;
    d->client_response_rkey = c->regions[q].rkey;
    d->client_status_rkey = c->regions[q].rkey;
    d->client_status_addr = resp_addr + c->resp_bytes - sizeof(rs_rc_status_word);
    if (req->op == RS_PS_GET && c->get_mode == RS_RC_GET_DIRECT_SG)
        d->flags = RS_RC_FLAG_GET_DIRECT_SG | RS_RC_FLAG_GET_ALLOW_FALLBACK_COPY;
    int notify = want_notify(c, q);
    if (notify) d->flags |= RS_RC_FLAG_NOTIFY;
    rs_ps_request_encode(req, 1, st + RS_RC_DESC_BYTES);
    if (keys_len) memcpy(st + RS_RC_DESC_BYTES + msg, req->keys, keys_len);
    if (req->rows_len) memcpy(st + RS_RC_DESC_BYTES + msg + keys_len, req->rows, req->rows_len);
    drain(c, q);
    rs_rc_sge sg = {st, (uint32_t)total, c->regions[q].lkey};
    int rc = c->fab->write(c->eps[q], &sg, 1, raddr, c->peers[q].rkey,
                           total <= c->o.inline_bytes ? RS_RC_WR_INLINE : 0, seq, err);
    if (rc) return rs_error_prefix(err, "RC client %s: request write", c->peer);
    /* the word is built in the staging slot's (registered) tail, so a non-inline write can read it
     */
    rs_rc_commit_word *cw = (rs_rc_commit_word *)(st + c->req_bytes - sizeof *cw);
    *cw = (rs_rc_commit_word){.state = RS_RC_STATE_READY, .checksum = 0, .seq = seq};
    rs_rc_sge cs = {cw, sizeof *cw, c->regions[q].lkey};
    rc = c->fab->write(c->eps[q], &cs, 1, raddr + c->req_bytes - sizeof *cw, c->peers[q].rkey,
                       commit_flags(c, q) | (sizeof *cw <= c->o.inline_bytes ? RS_RC_WR_INLINE : 0),
                       seq, err);
    if (rc) return rs_error_prefix(err, "RC client %s: commit write", c->peer);
    if (c->bell[q] && rs_rc_doorbell_ring(c->bell[q])) c->prof.doorbell_rings++;
    cl_slot *sl = &c->slot[q * c->slots + k];
    sl->busy = 1;
    sl->seq = seq;
    sl->tag = tag;
    sl->rows_out = rows_out;
    sl->rows_cap = rows_cap;
    sl->op = (uint16_t)req->op;
    sl->counted = req->op == RS_PS_GET && rows_out && rows_out != resp_slot(c, q, k) ? rows_cap : 0;
    if (sl->counted) rs_copy_rows_pending((int64_t)sl->counted);
    sl->t_submit = t0;
    sl->notify = notify;
    if (notify) {
        c->notify_out[q]++;
        c->prof.notify_requests++;
    }
    c->fifo[c->f_tail++ % c->max_in_flight] = q * c->slots + k;
    uint64_t pend = c->f_tail - c->f_head;
    c->prof.submit_count++;
    c->prof.descriptor_writes++;
    c->prof.commit_writes++;
    c->prof.pending_sum += pend;
    if (pend > c->prof.pending_peak) c->prof.pending_peak = pend;
    c->prof.submit_ns += rs_now_ns() - t0;
    return 0;
}

static void uncount(cl_slot *sl) {
    if (sl->counted) rs_copy_rows_pending(-(int64_t)sl->counted);
    sl->counted = 0;
}

/* 1 when the control connection reports EOF or an error (the server is gone). */
static int ctrl_dead(rs_rc_client *c) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void maybe_profile(rs_rc_client *c) {
    uint64_t now = rs_now_ns();
    if (now - c->prof_last_ns < (uint64_t)c->o.profile_interval_ms * 1000000ull) return;
    c->prof_last_ns = now;
    cl_prof d;
    const uint64_t *a = (const uint64_t *)&c->prof, *b = (const uint64_t *)&c->prof_prev;
    uint64_t *o = (uint64_t *)&d;
    for (size_t i = 0; i < sizeof d / 8; i++)
        o[i] = a[i] - b[i];
    d.pending_peak = c->prof.pending_peak;
    c->prof_prev = c->prof;
    c->prof.pending_peak = 0;
#define AV(x, n) ((n) ? (double)(x) / (double)(n) : 0.0)
    printf(
        "component=rdma_rc_client_profile transport=%s shard=%u client_id=%u submit_count=%" PRIu64
        " wait_count=%" PRIu64 " acquire_qp_count=%" PRIu64 " acquire_qp_failures=%" PRIu64
        " submit_avg_ns=%.1f wait_status_avg_ns=%.1f copy_response_avg_ns=%.1f "
        "copied_bytes=%" PRIu64 " pending_rpc_peak=%" PRIu64
        " pending_rpc_avg=%.2f pending_rpc_last=%u wait_blocks=%" PRIu64 " doorbell_rings=%" PRIu64
        " notify_requests=%" PRIu64 " wait_unspun=%" PRIu64 " rows_in_place=%" PRIu64
        " stream_copies=%" PRIu64 "\n",
        c->fab->name, c->shard_id, c->client_id, d.submit_count, d.wait_count, d.acquire_qp_count,
        d.acquire_qp_failures, AV(d.submit_ns, d.submit_count), AV(d.wait_ns, d.wait_count),
        AV(d.copy_ns, d.wait_count), d.copied_bytes, d.pending_peak,
        AV(d.pending_sum, d.submit_count), c->f_tail - c->f_head, d.wait_blocks, d.doorbell_rings,
        d.notify_requests, d.wait_unspun, d.rows_in_place, d.stream_copies);
    printf("component=rdma_rc_transport_profile role=client transport=%s shard=%u client_id=%u "
           "submit_count=%" PRIu64 " submit_descriptor_writes=%" PRIu64
           " submit_commit_writes=%" PRIu64 " submit_avg_ns=%.1f"
           " drain_submit_count=%" PRIu64 "\n",
           c->fab->name, c->shard_id, c->client_id, d.submit_count, d.descriptor_writes,
           d.commit_writes, AV(d.submit_ns, d.submit_count), d.drain_count);
#undef AV
    fflush(stdout);
}

int rs_rc_client_next(rs_rc_client *c, uint64_t *tag, rs_ps_response *resp, rs_error *err) {
    if (c->f_head == c->f_tail)
        return rs_error_set(err, RS_EINVAL, "RC client %s: nothing in flight", c->peer);
    uint32_t idx = c->fifo[c->f_head % c->max_in_flight];
    uint32_t q = idx / c->slots, k = idx % c->slots;
    cl_slot *sl = &c->slot[idx];
    uint8_t *rsl = resp_slot(c, q, k);
    const uint64_t *seqp = (const uint64_t *)(rsl + c->resp_bytes - 8);
    uint64_t t0 = rs_now_ns();
    uint64_t deadline = t0 + (uint64_t)c->o.wait_timeout_ms * 1000000ull;
    rs_rc_backoff bo;
    rs_rc_backoff_init(&bo, &c->o);
    bo.max_nap_ns = RS_RC_CLIENT_NAP_NS;
    uint32_t *waiter =
        c->bell[q] ? (uint32_t *)(uintptr_t)(rsl + RS_RC_SLEEP_WORD_OFFSET(c->resp_bytes)) : NULL;
    uint32_t spins = 0, spin_limit = c->o.wait_spin_iterations;
    int quick = waiter && rs_spin_streak_quick(&c->streak);
    int event = sl->notify && c->recvs; /* the answer comes with an immediate: block for it */
    if (quick || event) {
        rs_rc_backoff_shorten(&bo, RS_SPIN_QUICK_SHIFT, &spin_limit);
        c->prof.wait_quick++;
    }
    /* a waiter about to spin in full needs one of the process's spin slots; without one it
     * sleeps at once (rc_poll.c) */
    int spin_slot = 0;
    if (waiter && !quick && c->o.poll_mode == RS_RC_POLL_ADAPTIVE &&
        __atomic_load_n(seqp, __ATOMIC_ACQUIRE) != sl->seq && !(spin_slot = rs_spin_slot_take())) {
        bo.spin_rounds = bo.yield_rounds = 0;
        spin_limit = 0;
        c->prof.wait_unspun++;
    }
    int blocked = 0, rc = 0;
    while (__atomic_load_n(seqp, __ATOMIC_ACQUIRE) != sl->seq) {
        if (spins < spin_limit) {
            spins++;
            continue;
        }
        int slept = 0;
        if (waiter && rs_rc_backoff_should_block(&bo)) {
            rs_spin_slot_give(&spin_slot);
            uint64_t now = rs_now_ns(), left = now < deadline ? deadline - now : 0;
            slept = rs_rc_wait_seq_block(
                seqp, sl->seq, waiter, left < RS_RC_CLIENT_SLEEP_NS ? left : RS_RC_CLIENT_SLEEP_NS);
            c->prof.wait_blocks += slept != 0;
            blocked |= slept != 0;
            c->prof.wait_sleep_timeouts += slept == 2;
            if (__atomic_load_n(seqp, __ATOMIC_ACQUIRE) == sl->seq) break; /* woken by it */
        } else if (event && rs_rc_backoff_should_block(&bo)) {
            uint64_t now = rs_now_ns(), left = now < deadline ? deadline - now : 0;
            int n = c->fab->wait_event(
                c->eps[q], left < RS_RC_CLIENT_EVENT_SLICE_NS ? left : RS_RC_CLIENT_EVENT_SLICE_NS);
            if (n < 0) {
                rc = rs_error_set(err, RS_EIO,
                                  "RC client %s: waiting on the completion channel of qp %u "
                                  "failed (%s)",
                                  c->peer, q, rs_strerror(n));
                break;
            }
            slept = 1;
            blocked = 1;
            c->prof.wait_blocks++;
            events_taken(c, q, n);
            int there = __atomic_load_n(seqp, __ATOMIC_ACQUIRE) == sl->seq;
            if (n > 0) {
                c->notify_misses = 0;
            } else {
                c->prof.wait_sleep_timeouts++;
                if (there && ++c->notify_misses == RS_RC_NOTIFY_MISSES) {
                    c->recvs = 0; /* the server does not answer with immediates */
                    fprintf(stderr,
                            "component=rdma_rc_client event=notify_off server=%s shard=%u "
                            "reason=\"%u answers came without their immediate: the server "
                            "ignores RS_RC_FLAG_NOTIFY; napping instead\"\n",
                            c->peer, c->shard_id, RS_RC_NOTIFY_MISSES);
                }
            }
            if (there) break;
        } else {
            rs_rc_backoff_idle(&bo);
        }
        if (slept || (bo.idle_rounds & 1023) == 0 || rs_rc_backoff_sleeping(&bo)) {
            if (rs_now_ns() > deadline) {
                rc = rs_error_set(
                    err, RS_ETIMEDOUT,
                    "RC write RPC wait timeout after %u ms (server %s, shard %u, qp %u, slot %u, "
                    "seq %" PRIu64 ")",
                    c->o.wait_timeout_ms, c->peer, c->shard_id, q, k, sl->seq);
                break;
            }
            if (ctrl_dead(c)) {
                rc = rs_error_set(err, RS_ECONN,
                                  "RC server %s (shard %u) closed its control connection", c->peer,
                                  c->shard_id);
                break;
            }
        }
    }
    rs_spin_slot_give(&spin_slot);
    if (rc) return rc;
    uint64_t t1 = rs_now_ns();
    /* verbs: a wait that reached the naps counts as one that ended asleep */
    if (blocked || (c->fab->notify_events && rs_rc_backoff_sleeping(&bo)))
        rs_spin_streak_blocked(&c->streak);
    else if (spins || bo.idle_rounds) /* answered while spinning; an answer already there counts
                                       * for nothing */
        rs_spin_streak_spun(&c->streak);
    rs_rc_status_word w;
    memcpy(&w, rsl + c->resp_bytes - sizeof w, sizeof w);
    uint32_t room = c->resp_bytes - RS_RC_TAIL_BYTES;
    if ((w.state != RS_RC_STATE_DONE && w.state != RS_RC_STATE_DONE_SG) ||
        w.response_bytes > room || w.msg_bytes > w.response_bytes)
        return rs_error_set(err, RS_EPROTO,
                            "RC server %s: malformed status word (state %u, %u bytes, header %u)",
                            c->peer, w.state, w.response_bytes, w.msg_bytes);
    uint32_t rows_len = w.response_bytes - w.msg_bytes;
    rc = rs_ps_response_decode(rsl + rows_len, w.msg_bytes, rsl, rows_len, resp, err);
    if (rc) return rs_error_prefix(err, "RC server %s: response", c->peer);
    if (resp->status != w.status) {
        resp->status = w.status;
    }
    if (w.state == RS_RC_STATE_DONE_SG) resp->flags |= RS_PS_RESP_GATHERED;
    if (sl->op == RS_PS_GET && resp->status == RS_PS_OK && resp->rows_len) {
        if (resp->rows_len > sl->rows_cap)
            return rs_error_set(err, RS_EPROTO, "RC server %s: %zu row bytes for a %zu-byte buffer",
                                c->peer, resp->rows_len, sl->rows_cap);
        if (sl->rows_out == rsl) {
            c->prof.rows_in_place++; /* the caller's row buffer is this response slot */
        } else if (!c->o.skip_client_copy && sl->rows_out) {
            c->prof.stream_copies +=
                (uint64_t)rs_copy_rows(sl->rows_out, resp->rows, resp->rows_len, c->o.client_copy);
            c->prof.copied_bytes += resp->rows_len;
        }
    }
    uint64_t t2 = rs_now_ns();
    *tag = sl->tag;
    uncount(sl);
    sl->busy = 0;
    c->f_head++;
    c->prof.wait_count++;
    c->prof.wait_ns += t1 - t0;
    c->prof.copy_ns += t2 - t1;
    if (c->o.profile_interval_ms) maybe_profile(c);
    return 0;
}

int rs_rc_client_debug_inject(rs_rc_client *c, uint32_t qp, uint32_t slot, const void *bytes,
                              size_t len, uint32_t timeout_ms, int32_t *status, char *why,
                              size_t why_len, rs_error *err) {
    if (qp >= c->qps || slot >= c->slots)
        return rs_error_set(err, RS_EINVAL, "debug_inject: qp %u slot %u out of range", qp, slot);
    if (c->slot[qp * c->slots + slot].busy)
        return rs_error_set(err, RS_EBUSY, "debug_inject: slot in use");
    if (len > (size_t)c->req_bytes - RS_RC_TAIL_BYTES)
        return rs_error_set(err, RS_EINVAL, "debug_inject: %zu bytes do not fit the request slot",
                            len);
    uint64_t seq = c->next_seq[qp]++;
    uint64_t raddr = c->peers[qp].region_addr + (uint64_t)slot * c->req_bytes;
    uint8_t *st = req_staging(c, qp, slot);
    memcpy(st, bytes, len);
    rs_rc_sge sg = {st, (uint32_t)len, c->regions[qp].lkey};
    drain(c, qp);
    int rc = len ? c->fab->write(c->eps[qp], &sg, 1, raddr, c->peers[qp].rkey, 0, seq, err) : 0;
    rs_rc_commit_word *cw = (rs_rc_commit_word *)(st + c->req_bytes - sizeof *cw);
    *cw = (rs_rc_commit_word){.state = RS_RC_STATE_READY, .seq = seq};
    rs_rc_sge cs = {cw, sizeof *cw, c->regions[qp].lkey};
    if (rc == 0)
        rc = c->fab->write(c->eps[qp], &cs, 1, raddr + c->req_bytes - sizeof *cw, c->peers[qp].rkey,
                           commit_flags(c, qp), seq, err);
    if (rc) return rc;
    if (c->bell[qp]) rs_rc_doorbell_ring(c->bell[qp]);
    uint8_t *rsl = resp_slot(c, qp, slot);
    const uint64_t *seqp = (const uint64_t *)(rsl + c->resp_bytes - 8);
    uint64_t deadline = rs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    rs_rc_backoff bo;
    rs_rc_options adaptive = c->o;
    adaptive.poll_mode = RS_RC_POLL_ADAPTIVE;
    rs_rc_backoff_init(&bo, &adaptive);
    while (__atomic_load_n(seqp, __ATOMIC_ACQUIRE) != seq) {
        if (rs_now_ns() > deadline)
            return rs_error_set(err, RS_ETIMEDOUT, "debug_inject: no status for seq %" PRIu64, seq);
        rs_rc_backoff_idle(&bo);
    }
    rs_rc_status_word w;
    memcpy(&w, rsl + c->resp_bytes - sizeof w, sizeof w);
    *status = w.status;
    if (why_len) why[0] = '\0';
    if (w.msg_bytes <= w.response_bytes && w.response_bytes <= c->resp_bytes - RS_RC_TAIL_BYTES) {
        rs_ps_response *r = malloc(sizeof *r);
        uint32_t rows = w.response_bytes - w.msg_bytes;
        if (r && rs_ps_response_decode(rsl + rows, w.msg_bytes, rsl, rows, r, NULL) == 0)
            snprintf(why, why_len, "%s", r->error);
        free(r);
    }
    return 0;
}

int rs_rc_client_debug_commit(rs_rc_client *c, uint32_t qp, uint32_t slot, uint64_t seq) {
    if (qp >= c->qps || slot >= c->slots) return RS_EINVAL;
    uint8_t *st = req_staging(c, qp, slot);
    rs_rc_commit_word *cw = (rs_rc_commit_word *)(st + c->req_bytes - sizeof *cw);
    *cw = (rs_rc_commit_word){.state = RS_RC_STATE_READY, .seq = seq};
    rs_rc_sge cs = {cw, sizeof *cw, c->regions[qp].lkey};
    uint64_t raddr = c->peers[qp].region_addr + (uint64_t)slot * c->req_bytes;
    drain(c, qp);
    int rc = c->fab->write(c->eps[qp], &cs, 1, raddr + c->req_bytes - sizeof *cw, c->peers[qp].rkey,
                           commit_flags(c, qp), seq, NULL);
    if (rc == 0 && c->bell[qp]) rs_rc_doorbell_ring(c->bell[qp]);
    return rc;
}

/* Test hook: the seq the next request on qp will carry (without taking it). */
uint64_t rs_rc_client_debug_next_seq(const rs_rc_client *c, uint32_t qp) {
    return qp < c->qps ? c->next_seq[qp] : 0;
}

void rs_rc_client_close(rs_rc_client *c) {
    if (!c) return;
    for (uint32_t i = 0; c->slot && i < c->qps * c->slots; i++)
        uncount(&c->slot[i]);     /* requests still in flight */
    if (c->fd >= 0) close(c->fd); /* the server retires our lanes when it sees EOF */
    for (uint32_t q = 0; c->eps && q < c->qps; q++)
        if (c->eps[q]) c->fab->ep_destroy(c->eps[q]);
    for (uint32_t q = 0; c->regions && q < c->qps; q++)
        if (c->regions[q].addr) c->fab->free_region(c->f, &c->regions[q]);
    if (c->f) c->fab->close(c->f);
    free(c->regions);
    free(c->eps);
    free(c->peers);
    free(c->next_seq);
    free(c->slot);
    free(c->fifo);
    free(c->bell);
    free(c->notify_out);
    free(c->rings);
    free(c);
}
