/*
 * eventual_bench.c — create/wait/set/destroy cycles of rs_eventual under N concurrent waiters
 * (design in eventual_bench.h).
 *
 * Threads: num_waiters waiter threads plus one setter ("timer") thread; the caller's thread only
 * starts, times and joins them. Invariants:
 *   - every eventual a waiter allocates is in the setter's heap until the setter sets it, and the
 *     waiter frees it only after its wait returned, so each allocation is freed exactly once;
 *   - a waiter has at most one eventual pending, so the heap never holds more than num_waiters;
 *   - the setter exits only after every waiter has been joined, so no waiter waits forever;
 *   - nothing shared is written on the waiters' hot path except the heap (under its mutex):
 *     op counts and lateness histograms are per waiter and merged after the join.
 * The setter signals its condition variable only when a push makes a new earliest deadline
 * while it sleeps towards a later one, so steady-state pushes cost a mutex and no wake-up.
 *
 * rs_eventual_set() may issue its FUTEX_WAKE after the waiter already saw the value (and freed
 * the eventual); a wake on such an address is harmless on Linux — at worst another eventual
 * reusing the memory sees a spurious wake-up, which rs_eventual_wait() re-checks.
 */
#define _GNU_SOURCE
#include "recstore/eventual_bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recstore/clock.h"
#include "recstore/hist.h"

typedef struct pending {
    uint64_t deadline_ns;
    rs_eventual *ev;
} pending;

typedef struct setter {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    pending *heap;     /* binary min-heap on deadline_ns; n entries; owned by the setter struct */
    uint32_t n;
    uint32_t cap;
    pending *batch;    /* due entries popped under the lock, set outside it; setter thread only */
    uint64_t sleeping_until; /* 0 awake, UINT64_MAX idle, else the deadline it sleeps towards */
    int stop;
} setter;

typedef struct start_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    uint64_t end_ns; /* written before open is set; 0 = abort */
} start_gate;

typedef struct waiter {
    setter *set;
    start_gate *gate;
    uint64_t interval_ns;
    rs_wait_mode mode;
    uint64_t ops; /* this waiter's completed cycles inside the window */
    int failed;   /* allocation failed */
    rs_hist late; /* wake time - deadline, ns */
} waiter;

static void heap_push(setter *s, pending p) {
    uint32_t i = s->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (s->heap[parent].deadline_ns <= p.deadline_ns) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = p;
}

static pending heap_pop(setter *s) {
    pending top = s->heap[0], last = s->heap[--s->n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->n) break;
        if (c + 1 < s->n && s->heap[c + 1].deadline_ns < s->heap[c].deadline_ns) c++;
        if (last.deadline_ns <= s->heap[c].deadline_ns) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n > 0) s->heap[i] = last;
    return top;
}

static void setter_push(setter *s, uint64_t deadline_ns, rs_eventual *ev) {
    pthread_mutex_lock(&s->mu);
    heap_push(s, (pending){deadline_ns, ev});
    if (s->sleeping_until != 0 && deadline_ns < s->sleeping_until) {
        s->sleeping_until = 0; /* one signal per sleep is enough */
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

static void *setter_main(void *arg) {
    setter *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->n == 0) {
            if (s->stop) break;
            s->sleeping_until = UINT64_MAX;
            pthread_cond_wait(&s->cv, &s->mu);
            s->sleeping_until = 0;
            continue;
        }
        uint64_t now = rs_now_ns();
        if (s->heap[0].deadline_ns > now) {
            uint64_t d = s->heap[0].deadline_ns;
            struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
            s->sleeping_until = d;
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            s->sleeping_until = 0;
            continue;
        }
        uint32_t due = 0;
        while (s->n > 0 && s->heap[0].deadline_ns <= now)
            s->batch[due++] = heap_pop(s);
        pthread_mutex_unlock(&s->mu);
        for (uint32_t i = 0; i < due; i++)
            rs_eventual_set(s->batch[i].ev, (int64_t)s->batch[i].deadline_ns);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void *waiter_main(void *arg) {
    waiter *w = arg;
    start_gate *g = w->gate;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    uint64_t end_ns = g->end_ns;
    pthread_mutex_unlock(&g->mu);

    for (;;) {
        uint64_t now = rs_now_ns();
        if (now >= end_ns) break;
        rs_eventual *ev = malloc(sizeof *ev); /* "create" */
        if (!ev) {
            w->failed = 1;
            break;
        }
        rs_eventual_init(ev);
        uint64_t deadline = now + w->interval_ns;
        setter_push(w->set, deadline, ev);
        rs_eventual_wait(ev, w->mode, UINT64_MAX, NULL); /* cannot time out without a deadline */
        uint64_t woke = rs_now_ns();
        free(ev); /* "destroy" */
        if (woke <= end_ns) {
            w->ops++;
            rs_hist_record(&w->late, woke > deadline ? woke - deadline : 0);
        }
    }
    return NULL;
}

int rs_eventual_bench_validate(const rs_eventual_bench_cfg *cfg, rs_error *err) {
    if (cfg->num_waiters < 1 || cfg->num_waiters > RS_EVENTUAL_BENCH_MAX_WAITERS)
        return rs_error_set(err, RS_EINVAL, "num_waiters %u is outside 1..%u", cfg->num_waiters,
                            RS_EVENTUAL_BENCH_MAX_WAITERS);
    if (!(cfg->duration_s > 0) || cfg->duration_s > 86400)
        return rs_error_set(err, RS_EINVAL, "duration_s %g must be > 0 and at most 86400",
                            cfg->duration_s);
    if (!(cfg->interval_ms >= 0) || cfg->interval_ms > 3600000)
        return rs_error_set(err, RS_EINVAL, "interval_ms %g must be >= 0 and at most 3600000",
                            cfg->interval_ms);
    if (cfg->wait_mode != RS_WAIT_BLOCK && cfg->wait_mode != RS_WAIT_SPIN)
        return rs_error_set(err, RS_EINVAL, "wait_mode %d is neither block nor spin",
                            (int)cfg->wait_mode);
    return RS_OK;
}

static void gate_open(start_gate *g, uint64_t end_ns) {
    pthread_mutex_lock(&g->mu);
    g->end_ns = end_ns;
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int rs_eventual_bench_run(const rs_eventual_bench_cfg *cfg, rs_eventual_bench_result *out,
                          rs_error *err) {
    int rc = rs_eventual_bench_validate(cfg, err);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    uint32_t n = cfg->num_waiters;

    setter s = {.cap = n, .sleeping_until = 0};
    start_gate g = {.open = 0};
    waiter *ws = NULL;
    pthread_t *tids = NULL;
    pthread_t setter_tid;
    pthread_condattr_t ca;
    pthread_attr_t attr;
    uint32_t started = 0;

    s.heap = malloc(sizeof *s.heap * n);
    s.batch = malloc(sizeof *s.batch * n);
    ws = calloc(n, sizeof *ws);
    tids = calloc(n, sizeof *tids);
    if (!s.heap || !s.batch || !ws || !tids) {
        rc = rs_error_set(err, RS_ENOMEM, "eventual bench: cannot allocate state for %u waiters",
                          n);
        goto fail_alloc;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);

    int e = pthread_create(&setter_tid, NULL, setter_main, &s);
    if (e) {
        rc = rs_error_errno(err, RS_EIO, e, "eventual bench: creating the setter thread");
        goto fail_sync;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024); /* 1000 waiters need no 8 MB stacks */
    uint64_t interval_ns = (uint64_t)(cfg->interval_ms * 1e6);
    for (; started < n; started++) {
        waiter *w = &ws[started];
        w->set = &s;
        w->gate = &g;
        w->interval_ns = interval_ns;
        w->mode = cfg->wait_mode;
        rs_hist_reset(&w->late);
        e = pthread_create(&tids[started], &attr, waiter_main, w);
        if (e) {
            rc = rs_error_errno(err, RS_EIO, e, "eventual bench: creating waiter thread %u of %u",
                                started + 1, n);
            break;
        }
    }
    pthread_attr_destroy(&attr);

    rs_cpu_times c0, c1;
    rs_process_cpu(&c0);
    uint64_t t0 = rs_now_ns();
    uint64_t window_ns = (uint64_t)(cfg->duration_s * 1e9);
    gate_open(&g, rc ? 0 : t0 + window_ns); /* end 0: waiters exit at once after a failed start */

    for (uint32_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_lock(&s.mu);
    s.stop = 1;
    pthread_cond_signal(&s.cv);
    pthread_mutex_unlock(&s.mu);
    pthread_join(setter_tid, NULL);
    uint64_t t1 = rs_now_ns();
    rs_process_cpu(&c1);
    if (rc) goto fail_threads;

    rs_hist *late = malloc(sizeof *late);
    if (!late) {
        rc = rs_error_set(err, RS_ENOMEM, "eventual bench: cannot allocate the merged histogram");
        goto fail_threads;
    }
    rs_hist_reset(late);
    for (uint32_t i = 0; i < n; i++) {
        if (ws[i].failed && !rc)
            rc = rs_error_set(err, RS_ENOMEM,
                              "eventual bench: waiter %u could not allocate an eventual", i);
        out->ops += ws[i].ops;
        rs_hist_merge(late, &ws[i].late);
    }
    rs_cpu_times d = rs_cpu_delta(c0, c1);
    out->elapsed_s = (double)window_ns / 1e9;
    out->ops_per_sec = (double)out->ops / out->elapsed_s;
    out->cpu_user_s = d.user_s;
    out->cpu_sys_s = d.sys_s;
    out->cpu_time_s = d.user_s + d.sys_s;
    out->wall_s = (double)(t1 - t0) / 1e9;
    out->late_p50_us = (double)rs_hist_percentile(late, 50) / 1e3;
    out->late_p99_us = (double)rs_hist_percentile(late, 99) / 1e3;
    out->late_max_us = late->count ? (double)late->max / 1e3 : 0.0;
    free(late);

fail_threads:
fail_sync:
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
fail_alloc:
    free(tids);
    free(ws);
    free(s.batch);
    free(s.heap);
    return rc;
}
