/*
 * eventual_bench.c — create/wait/set/destroy cycles of rs_eventual under N concurrent waiters
 * (design in eventual_bench.h).
 *
 * Threads: num_waiters waiter threads plus one setter ("timer") thread; the caller's thread only
 * starts, times and joins them. Invariants:
 *   - every request a waiter allocates is on the setter's incoming stack or in its heap until the
 *     setter sets its eventual, and the waiter frees it only after its wait returned, so each
 *     allocation is freed exactly once and the setter never touches a request after setting it;
 *   - a waiter has at most one request pending, so the heap never holds more than num_waiters;
 *   - the setter exits only after every waiter has been joined, so no waiter waits forever;
 *   - nothing a waiter does takes a lock: requests go onto a lock-free stack (CAS) that the setter
 *     drains into its private heap. With spinning waiters outnumbering the cores, a lock would
 *     convoy (each hand-off waits for the next sleeper to be scheduled among the spinners);
 *   - op counts and lateness histograms are per waiter and merged after the join.
 * The setter sleeps on a futex until its earliest deadline (absolute CLOCK_MONOTONIC); a waiter
 * wakes it only when its request has an earlier deadline than the one it sleeps towards, so
 * steady-state pushes cost one CAS and no system call. The start gate is a futex word too, so
 * 1000 threads released at once do not queue on a mutex.
 *
 * rs_eventual_set() may issue its FUTEX_WAKE after the waiter already saw the value (and freed
 * the request); a wake on such an address is harmless on Linux — at worst another eventual
 * reusing the memory sees a spurious wake-up, which rs_eventual_wait() re-checks.
 */
#define _GNU_SOURCE
#include "recstore/eventual_bench.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/hist.h"

/* One pending reply: what a waiter creates per cycle. The setter reads deadline_ns and next only
 * before it sets ev; the waiter frees the request only after its wait returned. */
typedef struct request {
    rs_eventual ev;
    uint64_t deadline_ns;
    struct request *next; /* incoming stack link */
} request;

typedef struct setter {
    request *incoming;       /* lock-free LIFO of new requests (CAS push, exchange drain) */
    uint64_t sleep_deadline; /* 0 awake, else the deadline it sleeps towards (UINT64_MAX idle) */
    uint32_t wake_word;      /* futex: bumped by anyone who must wake the setter */
    uint32_t stop;           /* set by the caller after every waiter has been joined */
    request **heap;          /* setter-private binary min-heap on deadline_ns, n entries */
    uint32_t n;
    uint32_t cap;
} setter;

typedef struct start_gate {
    uint32_t open;   /* futex word: 0 closed, 1 open */
    uint64_t end_ns; /* written before open; 0 = abort */
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

static long futex_call(uint32_t *addr, int op, uint32_t val, const struct timespec *ts,
                       uint32_t bitset) {
    return syscall(SYS_futex, addr, op, val, ts, NULL, bitset);
}

static void heap_push(setter *s, request *r) {
    uint32_t i = s->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (s->heap[parent]->deadline_ns <= r->deadline_ns) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = r;
}

static request *heap_pop(setter *s) {
    request *top = s->heap[0], *last = s->heap[--s->n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->n) break;
        if (c + 1 < s->n && s->heap[c + 1]->deadline_ns < s->heap[c]->deadline_ns) c++;
        if (last->deadline_ns <= s->heap[c]->deadline_ns) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n > 0) s->heap[i] = last;
    return top;
}

static void setter_wake(setter *s) {
    __atomic_fetch_add(&s->wake_word, 1, __ATOMIC_SEQ_CST);
    futex_call(&s->wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

/* Waiter side: no lock, so a preempted waiter never holds up the setter or other waiters. */
static void setter_push(setter *s, request *r) {
    request *head = __atomic_load_n(&s->incoming, __ATOMIC_RELAXED);
    do {
        r->next = head;
    } while (!__atomic_compare_exchange_n(&s->incoming, &head, r, 1, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    /* Pairs with the setter's store of sleep_deadline then load of incoming (both seq_cst):
     * either it sees this request, or this load sees it asleep towards a later deadline. */
    if (__atomic_load_n(&s->sleep_deadline, __ATOMIC_SEQ_CST) > r->deadline_ns) setter_wake(s);
}

static void *setter_main(void *arg) {
    setter *s = arg;
    for (;;) {
        for (request *r = __atomic_exchange_n(&s->incoming, NULL, __ATOMIC_ACQUIRE); r;) {
            request *next = r->next;
            heap_push(s, r);
            r = next;
        }
        uint64_t now = rs_now_ns();
        int did = 0;
        while (s->n > 0 && s->heap[0]->deadline_ns <= now) {
            request *r = heap_pop(s);
            rs_eventual_set(&r->ev, (int64_t)r->deadline_ns); /* r may be freed from here on */
            did = 1;
        }
        if (did) continue; /* new requests may have come in while setting */
        if (s->n == 0 && __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) break;
        uint64_t d = s->n ? s->heap[0]->deadline_ns : UINT64_MAX;
        uint32_t v = __atomic_load_n(&s->wake_word, __ATOMIC_SEQ_CST);
        __atomic_store_n(&s->sleep_deadline, d, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->incoming, __ATOMIC_SEQ_CST) == NULL &&
            !__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
            struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
            /* absolute CLOCK_MONOTONIC deadline; EAGAIN/EINTR/ETIMEDOUT all mean "look again" */
            futex_call(&s->wake_word, FUTEX_WAIT_BITSET_PRIVATE, v, d == UINT64_MAX ? NULL : &ts,
                       FUTEX_BITSET_MATCH_ANY);
        }
        __atomic_store_n(&s->sleep_deadline, 0, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void *waiter_main(void *arg) {
    waiter *w = arg;
    start_gate *g = w->gate;
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        futex_call(&g->open, FUTEX_WAIT_PRIVATE, 0, NULL, 0);
    uint64_t end_ns = g->end_ns;

    for (;;) {
        uint64_t now = rs_now_ns();
        if (now >= end_ns) break;
        request *r = malloc(sizeof *r); /* "create" */
        if (!r) {
            w->failed = 1;
            break;
        }
        rs_eventual_init(&r->ev);
        r->deadline_ns = now + w->interval_ns;
        setter_push(w->set, r);
        rs_eventual_wait(&r->ev, w->mode, UINT64_MAX, NULL); /* no deadline: cannot time out */
        uint64_t woke = rs_now_ns();
        uint64_t deadline = r->deadline_ns;
        free(r); /* "destroy" */
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
    g->end_ns = end_ns;
    __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE);
    futex_call(&g->open, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, 0);
}

int rs_eventual_bench_run(const rs_eventual_bench_cfg *cfg, rs_eventual_bench_result *out,
                          rs_error *err) {
    int rc = rs_eventual_bench_validate(cfg, err);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    uint32_t n = cfg->num_waiters;

    setter s = {.cap = n};
    start_gate g = {.open = 0};
    waiter *ws = NULL;
    pthread_t *tids = NULL;
    pthread_t setter_tid;
    pthread_attr_t attr;
    uint32_t started = 0;

    s.heap = malloc(sizeof *s.heap * n);
    ws = calloc(n, sizeof *ws);
    tids = calloc(n, sizeof *tids);
    if (!s.heap || !ws || !tids) {
        rc =
            rs_error_set(err, RS_ENOMEM, "eventual bench: cannot allocate state for %u waiters", n);
        goto fail_alloc;
    }
    int e = pthread_create(&setter_tid, NULL, setter_main, &s);
    if (e) {
        rc = rs_error_errno(err, RS_EIO, e, "eventual bench: creating the setter thread");
        goto fail_alloc;
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
    __atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST); /* no waiter is left to push */
    setter_wake(&s);
    pthread_join(setter_tid, NULL);
    uint64_t t1 = rs_now_ns();
    rs_process_cpu(&c1);
    if (rc) goto fail_alloc;

    rs_hist *late = malloc(sizeof *late);
    if (!late) {
        rc = rs_error_set(err, RS_ENOMEM, "eventual bench: cannot allocate the merged histogram");
        goto fail_alloc;
    }
    rs_hist_reset(late);
    for (uint32_t i = 0; i < n; i++) {
        if (ws[i].failed && !rc)
            rc = rs_error_set(err, RS_ENOMEM,
                              "eventual bench: waiter %u could not allocate a request", i);
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

fail_alloc:
    free(tids);
    free(ws);
    free(s.heap);
    return rc;
}
