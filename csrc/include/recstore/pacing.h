/*
 * pacing.h — the open-loop timetable shared by ps_bench and the YCSB driver: when each request of
 * a client thread is due, and whether it could be sent then.
 *
 * A client process offering `rate` requests per second over `nthreads` threads gives every thread
 * its own timetable of rate / nthreads requests per second, with its own generator (no shared
 * state on the hot path):
 *   uniform  thread i of n sends at start + (i + k * n) * (1e9 / rate) ns, k = 0, 1, ...: the
 *            process as a whole sends exactly every 1e9 / rate ns;
 *   poisson  inter-arrival gaps are exponential with mean n * 1e9 / rate ns, drawn from the
 *            thread's xoshiro generator seeded with (seed, thread index); the sum of the n
 *            independent Poisson streams is a Poisson stream of `rate` per second.
 * A request's latency is measured from its scheduled (due) time, not from when it was actually
 * sent, so a server stall is charged to every request that should have been sent during it
 * (coordinated omission corrected, as wrk2 and YCSB's intended-latency do); the service time is
 * measured from the actual send.
 *
 * A send is late when the thread was still waiting for an earlier request (every in-flight slot
 * busy, or a blocking wait that returned only after the due time) at the request's due time:
 * rs_pacing_note_send() counts it. Requests due inside the measured window but never sent before
 * it closed are counted with rs_pacing_count_unsent(). Times are CLOCK_MONOTONIC ns (rs_now_ns);
 * the timetable itself never reads the clock, so it can be tested without timing the machine.
 */
#ifndef RECSTORE_PACING_H
#define RECSTORE_PACING_H

#include <stdint.h>

#include "recstore/error.h"
#include "recstore/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Highest offered rate accepted (requests/s per process); above it the timetable's own cost
 * (and counting the unsent backlog) would dominate. */
#define RS_PACING_MAX_RATE 1e7
/* Lowest rate a thread's timetable takes (requests/s per thread): one request per 10^6 s. Below
 * it the gaps would leave the range the timetable keeps exact. */
#define RS_PACING_MIN_THREAD_RATE 1e-6

typedef enum rs_pacing_arrival {
    RS_PACING_UNIFORM = 0,
    RS_PACING_POISSON = 1,
} rs_pacing_arrival;

/* "uniform" | "poisson" -> arrival; RS_EINVAL naming the accepted values. */
int rs_pacing_arrival_parse(const char *name, rs_pacing_arrival *out, rs_error *err);
const char *rs_pacing_arrival_name(rs_pacing_arrival a);

typedef struct rs_pacing {
    rs_pacing_arrival arrival;
    double gap_ns;     /* this thread's mean inter-arrival gap */
    uint64_t start_ns; /* the timetable's origin */
    double offset_ns;  /* uniform: thread i's first request is offset_ns = i * process gap */
    double due_ns;     /* next request due at start_ns + due_ns; uniform: offset_ns + k * gap_ns,
                        * never accumulated, so spacing stays exact over any run length */
    uint64_t taken;    /* requests taken off the timetable */
    uint64_t late;     /* sends counted late by rs_pacing_note_send */
    rs_rng rng;        /* poisson gaps */
} rs_pacing;

/* Timetable of thread `index` of `nthreads` of a process offering rate_per_s requests per second
 * from start_ns. RS_EINVAL when the rate is not in (0, RS_PACING_MAX_RATE], rate_per_s /
 * nthreads is below RS_PACING_MIN_THREAD_RATE, nthreads is 0 or index >= nthreads. */
int rs_pacing_init(rs_pacing *p, rs_pacing_arrival arrival, double rate_per_s, uint32_t index,
                   uint32_t nthreads, uint64_t start_ns, uint64_t seed, rs_error *err);

/* When the next request is due (ns). */
static inline uint64_t rs_pacing_due(const rs_pacing *p) {
    return p->start_ns + (uint64_t)p->due_ns;
}

/* Take the next request off the timetable: returns its due time and draws the one after. */
uint64_t rs_pacing_take(rs_pacing *p);

/* Account the send of a request due at due_ns by a thread that was blocked waiting for an earlier
 * request until busy_until_ns (0 if it never waited): late when busy_until_ns > due_ns. Returns 1
 * when late. */
static inline int rs_pacing_note_send(rs_pacing *p, uint64_t due_ns, uint64_t busy_until_ns) {
    int late = busy_until_ns > due_ns;
    p->late += (uint64_t)late;
    return late;
}

/* Take every request due before end_ns off the timetable without sending it (the window closed
 * first); they count as late. Returns how many there were. */
uint64_t rs_pacing_count_unsent(rs_pacing *p, uint64_t end_ns);

/* Make this thread's timed sleeps wake close to their deadline (timer slack 1 ns instead of the
 * default 50 us); called once by every open-loop thread. */
void rs_pacing_thread_setup(void);

/* Sleep until t_ns (absolute CLOCK_MONOTONIC); returns at once if t_ns has passed. */
void rs_pacing_sleep_until(uint64_t t_ns);

#ifdef __cplusplus
}
#endif
#endif
