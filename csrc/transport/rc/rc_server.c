/*
 * rc_server.c — the RC slot-protocol server for one shard: lifecycle, poll threads and the
 * optional GET workers. Beside it: rc_server_serve.c (one slot: checks, handler, GET paths,
 * answer), rc_server_ctrl.c (control plane thread, lanes), rc_server_profile.c (profile lines),
 * sharing rc_server_internal.h.
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
 * sleeps on a condition variable; an idle one backs off (rc_poll.c): it spins, yields, then on shm
 * sleeps in futex_waitv on the doorbells of all its lanes plus a private kick word (lane changes
 * and stop bump it), after setting each doorbell to 1 and rescanning once; a client that commits
 * a request to a lane whose doorbell is 1 wakes it (rc_client.c); a client's lanes on one poller
 * share one doorbell. On verbs, a poller all of whose lanes ring (their clients write every commit
 * word with an immediate, RS_RC_CAP_RING in rc.h) arms its lanes' receive CQs, rescans once and
 * sleeps on their shared completion channel plus an eventfd that kicks write; it takes a lane's
 * completions (re-posting the receives) whenever it finds a request there. With a lane that does
 * not ring (an older client, more than 64 slots), with more clients than futex_waitv takes (127),
 * or on a kernel without futex_waitv it naps instead.
 *
 * Wakes after the client's lanes (shm): a poller whose lanes belong to RC_DEFER_WAKES_MIN_CLIENTS
 * clients or more keeps a client's lanes next to each other and checks the waiter words of the
 * answers it published in a pass over them after the pass, not after each answer. A client thread
 * waits for its oldest answer; woken after the first of four, it is asleep again before the poller
 * publishes the second, so every answer cost the poller a futex_wake (an interrupt to the other
 * CPU). Woken after the pass, it finds all of them there: one wake per pass. The first answer waits
 * for the rest of the pass while the poller goes on with other clients' requests; with fewer
 * clients those run out before the woken client has taken its answers and sent new requests (with
 * two, the poller found nothing to do 3 times as often and served 5 % fewer keys/s; docs/scale.md),
 * so it wakes at once. GET workers wake at once.
 *
 * Wakes after a group of clients' lanes: a check waits until the poller has passed over the lanes
 * of a group of clients, the answer's own first: half the poller's clients, at most
 * RC_WAKE_GROUP_MAX (one with 3 clients, two with 4 or 5, three with 6 or 7, four from 8 on), and
 * never past the end of the round. The wakes then come back to back: on a VM the first one's
 * interrupt brings the sleeping clients' CPU out of its halt and the next ones find it running,
 * so each costs the poller less (16 client threads, one poller, Intel Xeon: 45-48 against 51-56 us
 * per batch, 11-19 % more keys/s, as many wakes; docs/scale.md, "Wakes after a group of clients'
 * lanes"). A group of all the clients held every answer for a whole round, and p99 doubled; half
 * of them at most, and never more than four, keep it as it was.
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/futex.h"
#include "recstore/rc.h"

#include "transport/accept_shed.h"
#include "transport/net.h"
#include "transport/rc/rc_server_internal.h"

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
        if (s->t_head == s->t_tail) break;
        task t = s->ring[s->t_head++ % TASK_RING];
        pthread_mutex_unlock(&s->lock);
        rs_rc_server_serve_slot(s, t.lane, t.slot, t.seq, s->nthreads + w->idx, &w->prof, NULL);
        atomic_store_explicit(&t.lane->busy[t.slot], 0, memory_order_release);
        pthread_mutex_lock(&s->lock);
        if (atomic_fetch_sub(&t.lane->inflight, 1) == 1) pthread_cond_broadcast(&s->ack);
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
        if (n) memcpy(p->lanes, s->plist[p->idx], n * sizeof *p->lanes);
        p->nlanes = n;
        p->nringing = 0;
        p->nclients = 0;
        for (uint32_t i = 0; i < n; i++) {
            /* a client's lanes next to each other, in their order (wakes after the client's
             * lanes: file comment) */
            srv_lane *ln = p->lanes[i];
            uint32_t j = i;
            for (; j > 0 && p->lanes[j - 1]->client_id > ln->client_id; j--)
                p->lanes[j] = p->lanes[j - 1];
            p->lanes[j] = ln;
            p->nringing += (uint32_t)ln->rings;
        }
        for (uint32_t i = 0; i < n; i++)
            p->nclients += i == 0 || p->lanes[i]->cl != p->lanes[i - 1]->cl;
        uint32_t half = p->nclients / 2;
        p->wake_group = half < 1 ? 1 : half > RC_WAKE_GROUP_MAX ? RC_WAKE_GROUP_MAX : half;
    }
    p->gen_seen = g;
    atomic_store(&p->acked_gen, g);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
}

/* Longest doorbell sleep: a safety net only (clients ring, lane changes and stop kick). */
#define RS_RC_POLLER_SLEEP_NS 100000000ull

void rs_rc_server_kick_pollers(rs_rc_server *s) {
    for (uint32_t i = 0; s->pollers && i < s->nthreads; i++) {
        poller *p = &s->pollers[i];
        /* seq_cst against poller_block's state store and fence: it sees the new kick or we see it
         * blocked */
        __atomic_fetch_add(&p->kick, 1, __ATOMIC_SEQ_CST);
        if (atomic_load_explicit(&p->idle_state, memory_order_seq_cst) == RC_POLLER_BLOCKED) {
            rs_futex_wake(&p->kick, 1, 0);
            uint64_t one = 1;
            if (p->wake_fd >= 0) (void)!write(p->wake_fd, &one, sizeof one);
        }
    }
}

/* 1 when some slot of the poller's lanes holds a seq it has not taken yet. */
static int poller_has_work(const poller *p) {
    for (uint32_t i = 0; i < p->nlanes; i++) {
        const srv_lane *ln = p->lanes[i];
        for (uint32_t k = 0; k < ln->slots; k++) {
            const uint8_t *tail = ln->region.addr + (size_t)(k + 1) * ln->req_bytes - 8;
            uint64_t seq = __atomic_load_n((const uint64_t *)tail, __ATOMIC_ACQUIRE);
            if (seq != 0 && seq != ln->seen[k]) return 1;
        }
    }
    return 0;
}

/* Sleep on every lane's doorbell and the kick word (the protocol is in rc_poll.c). Returns 1 when
 * work may be there (a doorbell rang, a request raced the sleep), 0 after a timeout or a kick. */
static int poller_block(poller *p) {
    rs_rc_server *s = p->s;
    uint32_t *words[RS_FUTEX_WAITV_MAX];
    uint32_t expect[RS_FUTEX_WAITV_MAX];
    uint8_t shared[RS_FUTEX_WAITV_MAX];
    uint32_t n = 0;
    uint32_t kick = __atomic_load_n(&p->kick, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < p->nlanes; i++) {
        const srv_lane *ln = p->lanes[i];
        if (ln->qp != lane_bell_qp(ln, s->nthreads)) continue; /* rings its client's first lane */
        if (n == RS_FUTEX_WAITV_MAX - 1) { /* more clients than futex_waitv takes: nap instead */
            for (uint32_t k = 0; k < n; k++)
                __atomic_store_n(words[k], 0, __ATOMIC_RELAXED);
            p->waitv_full = 1;
            return 0;
        }
        words[n] = lane_doorbell(ln);
        expect[n] = 1;
        shared[n] = 1;
        __atomic_store_n(words[n], 1, __ATOMIC_RELAXED);
        n++;
    }
    words[n] = &p->kick;
    expect[n] = kick;
    shared[n] = 0;
    atomic_store_explicit(&p->idle_state, RC_POLLER_BLOCKED, memory_order_relaxed);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int work = 1;
    if (!atomic_load(&s->stop) && atomic_load(&s->gen) == p->gen_seen && !poller_has_work(p)) {
        atomic_fetch_add_explicit(&p->blocks, 1, memory_order_relaxed);
        int rc = rs_futex_waitv(words, expect, shared, (int)n + 1, RS_RC_POLLER_SLEEP_NS);
        if (rc == RS_ENOTSUP || rc == RS_EINVAL || rc == RS_EIO) p->waitv_absent = 1;
        if (rc >= 0 && (uint32_t)rc < n)
            atomic_fetch_add_explicit(&p->doorbell_wakes, 1, memory_order_relaxed);
        work = (rc >= 0 && (uint32_t)rc < n) || rc == RS_EBUSY;
    }
    for (uint32_t i = 0; i < n; i++)
        __atomic_store_n(words[i], 0, __ATOMIC_RELAXED);
    if (work) atomic_store_explicit(&p->idle_state, RC_POLLER_SPINNING, memory_order_relaxed);
    return work;
}

/* Verbs, every lane ringing: arm each lane's receive CQ (taking the completions that came before
 * the arm), look at the slots once more, then sleep on the shared completion channel and the
 * wake-up fd. A request whose completion came before its CQ was armed is placed already (data
 * before completion), so the rescan sees it; one whose completion comes later raises an event.
 * Returns 1 when work may be there (an event, a request raced the sleep), 0 after a timeout or a
 * kick, -1 when the fabric failed (the poller naps from then on). */
static int poller_block_events(poller *p) {
    rs_rc_server *s = p->s;
    atomic_store_explicit(&p->idle_state, RC_POLLER_BLOCKED, memory_order_relaxed);
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* against rs_rc_server_kick_pollers */
    int bad = 0, work = 1;
    for (uint32_t i = 0; i < p->nlanes && !bad; i++)
        bad = s->fab->arm_events(p->lanes[i]->ep) < 0;
    if (!bad && !atomic_load(&s->stop) && atomic_load(&s->gen) == p->gen_seen &&
        !poller_has_work(p)) {
        atomic_fetch_add_explicit(&p->blocks, 1, memory_order_relaxed);
        int r = s->fab->evch_wait(p->evch, p->wake_fd, RS_RC_POLLER_SLEEP_NS);
        if (r > 0 && (r & 2)) {
            uint64_t v;
            (void)!read(p->wake_fd, &v, sizeof v);
        }
        if (r > 0 && (r & 1))
            atomic_fetch_add_explicit(&p->doorbell_wakes, 1, memory_order_relaxed);
        bad = r < 0;
        work = r > 0 && (r & 1);
    }
    if (bad) {
        fprintf(stderr,
                "component=rdma_rc_server event=completion_events_failed shard=%u thread_id=%u "
                "reason=\"arming or waiting on the lanes' completion channel failed: the poller "
                "naps from now on\"\n",
                s->h.shard_id, p->idx);
        p->evch_broken = 1;
        return -1;
    }
    if (work) atomic_store_explicit(&p->idle_state, RC_POLLER_SPINNING, memory_order_relaxed);
    return work;
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
    rs_rc_backoff_init(&bo, &s->o);
    int workers = s->o.get_workers > 0;
    int adaptive = s->o.poll_mode == RS_RC_POLL_ADAPTIVE;
    int can_block = s->fab->shared_futex && adaptive;
    /* idle stretches in a row that ended asleep (blocked, or napping where the poller cannot
     * block: verbs, or shm without futex_waitv), and those begun in quick mode (rc.h) */
    rs_spin_streak streak = {0};
    rc_wakes wakes = {0};
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&s->gen, memory_order_acquire) != p->gen_seen) {
            poller_refresh(p);
            p->waitv_full = 0; /* count the clients again at the next sleep */
        }
        if (p->nlanes == 0) {
            atomic_store_explicit(&p->idle_state, RC_POLLER_PARKED, memory_order_relaxed);
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
        /* with other clients to serve, a sleeping client is woken after the passes over a group
         * of clients' lanes (file comment) */
        rc_wakes *defer =
            p->nclients >= RC_DEFER_WAKES_MIN_CLIENTS && s->fab->shared_futex ? &wakes : NULL;
        uint32_t passed = 0; /* clients' lanes passed over since the first check waiting */
        for (uint32_t i = 0; i < p->nlanes; i++) {
            srv_lane *ln = p->lanes[i];
            if (defer && defer->n && ln->cl != p->lanes[i - 1]->cl && ++passed >= p->wake_group) {
                rs_rc_server_wake_deferred(defer, pf);
                passed = 0;
            }
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
                /* its request rang: take the lane's completions, re-posting their receives */
                if (ln->rings) (void)s->fab->drain_events(ln->ep);
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
                if (workers && is_get && task_push(s, ln, k, seq)) continue;
                rs_rc_server_serve_slot(s, ln, k, seq, p->idx, pf, defer);
            }
        }
        if (defer) rs_rc_server_wake_deferred(defer, pf);
        BUMP(pf->scan_rounds, 1);
        BUMP(pf->ready_slots, ready);
        if (ready > pf->max_ready_per_round)
            __atomic_store_n(&pf->max_ready_per_round, ready, __ATOMIC_RELAXED);
        if (t0) BUMP(pf->poll_loop_ns, rs_now_ns() - t0);
        if (ready) {
            if (rs_rc_backoff_sleeping(&bo)) /* the idle stretch ended in naps */
                rs_spin_streak_blocked(&streak);
            else if (bo.idle_rounds)
                rs_spin_streak_spun(&streak); /* work came while spinning */
            rs_rc_backoff_busy(&bo);
            atomic_store_explicit(&p->idle_state, RC_POLLER_WORKING, memory_order_relaxed);
        } else {
            BUMP(pf->empty_scan_rounds, 1);
            if (bo.idle_rounds == 0 && adaptive) { /* an idle stretch begins: its spin budget */
                bo.spin_rounds = s->o.idle_spin_rounds;
                bo.yield_rounds = s->o.idle_yield_rounds;
                if (rs_spin_streak_quick(&streak)) {
                    rs_rc_backoff_shorten(&bo, RS_SPIN_QUICK_SHIFT, NULL);
                    atomic_fetch_add_explicit(&p->quick_idles, 1, memory_order_relaxed);
                }
            }
            if (p->evch && adaptive && !p->evch_broken && p->nringing == p->nlanes &&
                rs_rc_backoff_should_block(&bo)) {
                rs_spin_streak_blocked(&streak);
                int w = poller_block_events(p);
                if (w > 0) rs_rc_backoff_busy(&bo);
                if (w >= 0) continue;
            }
            if (can_block && !p->waitv_absent && !p->waitv_full &&
                rs_rc_backoff_should_block(&bo)) {
                /* after a doorbell, spin again; after a timeout or a kick, sleep again at once */
                rs_spin_streak_blocked(&streak);
                if (poller_block(p)) rs_rc_backoff_busy(&bo);
                continue;
            }
            rs_rc_backoff_idle(&bo);
            if (rs_rc_backoff_sleeping(&bo)) {
                atomic_store_explicit(&p->naps, bo.sleeps, memory_order_relaxed);
                atomic_store_explicit(&p->idle_state, RC_POLLER_NAPPING, memory_order_relaxed);
            } else {
                atomic_fetch_add_explicit(&p->awake_idle_rounds, 1, memory_order_relaxed);
                atomic_store_explicit(&p->idle_state, RC_POLLER_SPINNING, memory_order_relaxed);
            }
        }
    }
    /* a poller that is gone acknowledges every later generation: retirement never waits on it */
    pthread_mutex_lock(&s->lock);
    atomic_store(&p->acked_gen, UINT64_MAX);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------------
 */

/* The poller's completion channel and wake-up fd (verbs). Without them (said so) its lanes do not
 * ring and it naps when idle, as it did before doorbells. */
static void poller_events_open(poller *p) {
    rs_rc_server *s = p->s;
    rs_error e = {0};
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->wake_fd < 0)
        rs_error_errno(&e, RS_EIO, errno, "eventfd");
    else if (s->fab->evch_open(s->f, &p->evch, &e) == 0)
        return;
    fprintf(stderr,
            "component=rdma_rc_server event=completion_events_unavailable shard=%u thread_id=%u "
            "reason=\"%s: the poller naps when idle\"\n",
            s->h.shard_id, p->idx, e.msg);
    if (p->wake_fd >= 0) close(p->wake_fd);
    p->wake_fd = -1;
    p->evch = NULL;
}

int rs_rc_server_start(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                       uint32_t num_threads, const rs_rc_options *opts, const rs_rc_handler *h,
                       rs_rc_server **out, rs_error *err) {
    if (num_threads == 0) num_threads = 1;
    if (num_threads + opts->get_workers > 64)
        return rs_error_set(err, RS_EINVAL, "thread_num %u + get workers %u exceed 64", num_threads,
                            opts->get_workers);
    if (h->value_size == 0 || !h->handle)
        return rs_error_set(err, RS_EINVAL, "RC server needs a fixed value_size and a handler");
    rs_rc_server *s = calloc(1, sizeof *s);
    if (!s) return rs_error_set(err, RS_ENOMEM, "RC server: out of memory");
    int rc;
    s->fab = fab;
    s->o = *opts;
    s->h = *h;
    s->nthreads = num_threads;
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    s->ctrl_spare = rs_accept_reserve_open();
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
    if ((rc = fab->open(&fc, &s->f, err))) goto fail;
    rs_rc_kv_mr_open(s); /* direct_sg sources: implicit ODP, else pinned value-store MRs */
    s->pollers = calloc(num_threads, sizeof *s->pollers);
    s->workers = calloc(opts->get_workers ? opts->get_workers : 1, sizeof *s->workers);
    s->plist = calloc(num_threads, sizeof *s->plist);
    s->plen = calloc(num_threads, sizeof *s->plen);
    s->pcap = calloc(num_threads, sizeof *s->pcap);
    if (!s->pollers || !s->workers || !s->plist || !s->plen || !s->pcap) {
        rc = rs_error_set(err, RS_ENOMEM, "RC server: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < num_threads; i++)
        s->pollers[i].wake_fd = -1;
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "RC server: pipe");
        goto fail;
    }
    if ((rc = rs_net_listen(host, port, 0, 0, &s->listen_fd, err)) ||
        (rc = rs_net_bound_port(s->listen_fd, &s->port, err))) {
        rs_error_prefix(err, "control plane");
        goto fail;
    }
    for (uint32_t i = 0; i < num_threads; i++) {
        poller *p = &s->pollers[i];
        p->s = s;
        p->idx = i;
        if (fab->notify_events && fab->evch_open && opts->poll_mode == RS_RC_POLL_ADAPTIVE)
            poller_events_open(p);
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
    if (pthread_create(&s->ctrl_th, NULL, rs_rc_server_ctrl_main, s) != 0) {
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
    out->auth_failures = atomic_load(&s->auth_failures);
    out->requests = t.handled_get + t.handled_put + t.handled_update + t.handled_command;
    out->invalid_descriptor = t.invalid_descriptor + t.wrong_shard;
    out->duplicate_seq = t.duplicate_seq_ready;
    out->bytes_in = t.bytes_in;
    out->bytes_out = t.response_payload_bytes;
    out->direct_sg = t.get_direct_sg;
    out->direct_sg_fallback = t.get_direct_sg_fallback;
    out->client_wakes = t.client_wakes;
    out->client_wake_checks_deferred = t.client_wake_checks_deferred;
    for (uint32_t i = 0; s->pollers && i < s->nthreads; i++) {
        poller *p = &s->pollers[i];
        out->pollers_sleeping +=
            atomic_load_explicit(&p->idle_state, memory_order_relaxed) >= RC_POLLER_NAPPING;
        out->poller_naps += atomic_load_explicit(&p->naps, memory_order_relaxed);
        out->poller_awake_idle_rounds +=
            atomic_load_explicit(&p->awake_idle_rounds, memory_order_relaxed);
        out->poller_blocks += atomic_load_explicit(&p->blocks, memory_order_relaxed);
        out->poller_doorbell_wakes +=
            atomic_load_explicit(&p->doorbell_wakes, memory_order_relaxed);
        out->poller_quick_idles += atomic_load_explicit(&p->quick_idles, memory_order_relaxed);
    }
    out->lanes_ringing = atomic_load(&s->lanes_ringing);
}

void rs_rc_server_stop(rs_rc_server *s) {
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond);
    pthread_cond_broadcast(&s->tasks_cv);
    pthread_cond_broadcast(&s->ack);
    pthread_mutex_unlock(&s->lock);
    rs_rc_server_kick_pollers(s);
    if (s->wake[1] >= 0) (void)!write(s->wake[1], "x", 1);
    if (s->prof_started) pthread_join(s->prof_th, NULL);
    for (uint32_t i = 0; s->pollers && i < s->nthreads; i++)
        if (s->pollers[i].started) pthread_join(s->pollers[i].th, NULL);
    for (uint32_t i = 0; s->workers && i < s->o.get_workers; i++)
        if (s->workers[i].started) pthread_join(s->workers[i].th, NULL);
    /* pollers and workers are gone: the control thread may retire clients without waiting */
    if (s->ctrl_started) pthread_join(s->ctrl_th, NULL);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->ctrl_spare >= 0) close(s->ctrl_spare);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    if (s->pollers) /* every lane's endpoint is gone with its client (ctrl thread) */
        for (uint32_t i = 0; i < s->nthreads; i++) {
            poller *p = &s->pollers[i];
            free(p->lanes);
            if (p->evch) s->fab->evch_close(p->evch);
            if (p->wake_fd >= 0) close(p->wake_fd);
        }
    if (s->plist)
        for (uint32_t i = 0; i < s->nthreads; i++)
            free(s->plist[i]);
    free(s->plist);
    free(s->plen);
    free(s->pcap);
    free(s->pollers);
    free(s->workers);
    if (s->f) rs_rc_kv_mr_close(s);
    if (s->f) s->fab->close(s->f);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    pthread_cond_destroy(&s->ack);
    pthread_cond_destroy(&s->tasks_cv);
    free(s);
}
