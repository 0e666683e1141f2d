/*
 * rc_server_ctrl.c — the RC server's control plane thread (rs_rc_server_ctrl_main): accepts TCP
 * control connections, reads framed attach requests (magic, version, 64 KiB limit), creates one
 * lane per client QP (its region, an endpoint connected to the client's region) and publishes it
 * to poller (client_id + qp) % thread_num; when a connection closes it takes the client's lanes
 * from the pollers and frees them once every poller has acknowledged the new generation and no
 * GET worker still holds one of their slots. Connections are multiplexed with poll() and frames
 * are taken in pieces as they arrive, so a peer that sends part of a frame and stalls holds only
 * its own connection; out of descriptors, new connections are shed.
 */
#define _GNU_SOURCE
#include <errno.h>
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

#include "transport/accept_shed.h"
#include "transport/rc/rc_server_internal.h"

/* ---- lanes: create, publish to pollers, retire ------------------------------------------------
 */

static void lane_free(rs_rc_server *s, srv_lane *ln) {
    if (ln->ep) s->fab->ep_destroy(ln->ep);
    if (ln->region.addr) s->fab->free_region(s->f, &ln->region);
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
        rs_rc_server_kick_pollers(s); /* a blocked poller must see the generation to ack it */
        for (;;) {
            int all = 1;
            for (uint32_t i = 0; i < s->nthreads; i++)
                if (s->pollers[i].started && atomic_load(&s->pollers[i].acked_gen) < g) all = 0;
            for (uint32_t q = 0; q < cl->qps && all; q++)
                if (atomic_load(&cl->lanes[q].inflight)) all = 0;
            if (all) break;
            pthread_cond_wait(&s->ack, &s->lock);
        }
        atomic_fetch_sub(&s->lanes_open, cl->qps);
        for (uint32_t q = 0; q < cl->qps; q++)
            atomic_fetch_sub(&s->lanes_ringing, (uint64_t)cl->lanes[q].rings);
        atomic_fetch_sub(&s->clients_open, 1);
    }
    pthread_mutex_unlock(&s->lock);
    if (cl->lanes)
        for (uint32_t q = 0; q < cl->qps; q++)
            lane_free(s, &cl->lanes[q]);
    free(cl->lanes);
    free(cl->body); /* a control frame still being received */
    if (cl->fd >= 0) close(cl->fd);
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
    if ((rc = rs_rc_ctrl_decode_attach_req(body, len, rq, &err))) goto reject;
    if (cl->attached) {
        rc = rs_error_set(&err, RS_EPROTO, "this connection already attached client %u", cl->id);
        goto reject;
    }
    if (s->o.auth.len && !rs_auth_token_equal(&s->o.auth, rq->token, rq->token_len)) {
        atomic_fetch_add(&s->auth_failures, 1);
        rc = rs_error_set(&err, RS_EINVAL, "authentication failed: %s",
                          rq->token_len ? "wrong token"
                                        : "this server requires a token (auth_token_file)");
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
        if ((rc = s->fab->alloc_region(s->f, lane_len, &ln->region, &err))) goto reject;
        if (s->fab->shared_futex) /* before the reply: the client reads it once, after */
            __atomic_store_n(
                (uint32_t *)(uintptr_t)(ln->region.addr + RS_RC_BELL_LANE_OFFSET(ln->req_bytes)),
                lane_bell_qp(ln, s->nthreads), __ATOMIC_RELAXED);
        /* a lane rings when its client will and its poller can sleep on completion events */
        rs_rc_evch *ch = s->pollers[ln->poller].evch;
        ln->rings = ch && (rq->lanes[q].caps & RS_RC_CAP_RING) && rq->slots <= RC_RING_MAX_SLOTS;
        rc = ln->rings ? s->fab->ep_create_on(s->f, &ln->region, ch, rc_ring_recvs(rq->slots),
                                              &ln->ep, &rp->lanes[q], &err)
                       : s->fab->ep_create(s->f, &ln->region, &ln->ep, &rp->lanes[q], &err);
        if (rc) goto reject;
        if (ln->rings) rp->lanes[q].caps |= RS_RC_CAP_RING;
        if ((rc = s->fab->ep_connect(ln->ep, &rq->lanes[q], &err))) goto reject;
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
            if (!nl) continue; /* not reachable in practice; the lane just stays unserved */
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
    for (uint32_t q = 0; q < cl->qps; q++)
        atomic_fetch_add(&s->lanes_ringing, (uint64_t)cl->lanes[q].rings);
    pthread_cond_broadcast(&s->cond);
    rs_rc_server_kick_pollers(s); /* its new lanes have no doorbell set yet */
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
        if (n2 > 0) (void)!send(cl->fd, small, (size_t)n2, MSG_NOSIGNAL);
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

/* Take what has arrived on cl's control connection without waiting: 1 when a whole frame is
 * buffered (cl->type, cl->body, cl->body_len), 0 when more is needed, else an RS_E* code (RS_ECONN:
 * the peer closed). So a peer that sends part of a frame and stalls holds only its own connection,
 * never the thread that serves every other client's attach. */
static int ctrl_read_frame(srv_client *cl, rs_error *err) {
    while (cl->hdr_got < RS_RC_CTRL_HDR || cl->body_got < cl->body_len) {
        uint8_t *dst;
        size_t want;
        if (cl->hdr_got < RS_RC_CTRL_HDR) {
            dst = cl->hdr + cl->hdr_got;
            want = RS_RC_CTRL_HDR - cl->hdr_got;
        } else {
            dst = cl->body + cl->body_got;
            want = cl->body_len - cl->body_got;
        }
        ssize_t n = recv(cl->fd, dst, want, MSG_DONTWAIT);
        if (n == 0) return rs_error_set(err, RS_ECONN, "control plane: peer closed the connection");
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return rs_error_errno(err, RS_ECONN, errno, "control plane receive");
        }
        if (cl->hdr_got < RS_RC_CTRL_HDR) {
            cl->hdr_got += (uint32_t)n;
            if (cl->hdr_got < RS_RC_CTRL_HDR) continue;
            uint32_t len;
            int rc = rs_rc_ctrl_check_header(cl->hdr, &cl->type, &len, err);
            if (rc) return rc;
            if (!(cl->body = malloc(len ? len : 1)))
                return rs_error_set(err, RS_ENOMEM, "control plane: out of memory");
            cl->body_len = len;
            cl->body_got = 0;
        } else {
            cl->body_got += (uint32_t)n;
        }
    }
    return 1;
}

static void ctrl_frame_reset(srv_client *cl) {
    free(cl->body);
    cl->body = NULL;
    cl->hdr_got = cl->body_len = cl->body_got = 0;
}

static void ctrl_handle(rs_rc_server *s, srv_client *cl, srv_client **list) {
    rs_error err = {0};
    int rc = ctrl_read_frame(cl, &err);
    if (rc == 0) return; /* the rest of the frame is not here yet */
    if (rc == 1) {
        uint16_t type = cl->type;
        if (type == RS_RC_MSG_READY_REQ) {
            uint32_t rep[5] = {1, s->h.shard_id, s->h.value_size, s->h.max_keys,
                               (uint32_t)s->h.index_type};
            rc = rs_rc_ctrl_send(cl->fd, RS_RC_MSG_READY_REP, rep, sizeof rep, &err);
        } else if (type == RS_RC_MSG_ATTACH_REQ) {
            rc = client_attach(s, cl, cl->body, cl->body_len);
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
    ctrl_frame_reset(cl);
    if (rc != 0) {
        for (srv_client **pp = list; *pp; pp = &(*pp)->next)
            if (*pp == cl) {
                *pp = cl->next;
                break;
            }
        client_retire(s, cl);
    }
}

void *rs_rc_server_ctrl_main(void *arg) {
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
            if (!pf || !who) break;
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
            if (errno == EINTR) continue;
            break;
        }
        if (pf[1].revents) break;
        for (i = 2; i < n; i++)
            if (pf[i].revents) ctrl_handle(s, who[i], &list);
        if (pf[0].revents & POLLIN) {
            int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
                rs_accept_shed_one(s->listen_fd, &spare);
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
