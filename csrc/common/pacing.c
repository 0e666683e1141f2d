/*
 * pacing.c — per-thread open-loop timetables (uniform or Poisson arrivals; see recstore/pacing.h)
 * and the absolute-deadline sleep the open-loop threads wait with.
 *
 * Uniform times are computed as start + k * gap rather than accumulated, so spacing stays exact
 * over any run length; Poisson gaps are -ln(1 - U) * mean with U uniform in [0, 1) from the
 * thread's own generator, so a gap is never infinite. Due times are double ns relative to the
 * timetable's start: 53 bits hold days of nanoseconds with sub-nanosecond resolution.
 */
#define _GNU_SOURCE
#include "recstore/pacing.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static const char *const arrival_names[] = {"uniform", "poisson"};

int rs_pacing_arrival_parse(const char *name, rs_pacing_arrival *out, rs_error *err) {
    for (int i = 0; i < 2; i++)
        if (name && strcmp(name, arrival_names[i]) == 0) {
            *out = (rs_pacing_arrival)i;
            return RS_OK;
        }
    return rs_error_set(err, RS_EINVAL, "unknown arrival '%s' (expected uniform or poisson)",
                        name ? name : "");
}

const char *rs_pacing_arrival_name(rs_pacing_arrival a) {
    return (unsigned)a < 2 ? arrival_names[a] : "unknown";
}

static double exp_gap(rs_pacing *p) {
    return -log1p(-rs_rng_double(&p->rng)) * p->gap_ns;
}

int rs_pacing_init(rs_pacing *p, rs_pacing_arrival arrival, double rate_per_s, uint32_t index,
                   uint32_t nthreads, uint64_t start_ns, uint64_t seed, rs_error *err) {
    memset(p, 0, sizeof *p);
    if (!(rate_per_s > 0) || rate_per_s > RS_PACING_MAX_RATE)
        return rs_error_set(err, RS_EINVAL, "target rate %g is not in (0, %g] requests/s",
                            rate_per_s, RS_PACING_MAX_RATE);
    if (nthreads == 0 || index >= nthreads)
        return rs_error_set(err, RS_EINVAL, "pacing thread %u of %u", index, nthreads);
    if (rate_per_s / nthreads < RS_PACING_MIN_THREAD_RATE)
        return rs_error_set(err, RS_EINVAL,
                            "target rate %g over %u threads is below %g requests/s per thread",
                            rate_per_s, nthreads, RS_PACING_MIN_THREAD_RATE);
    if ((unsigned)arrival > RS_PACING_POISSON)
        return rs_error_set(err, RS_EINVAL, "arrival %d is not uniform or poisson", (int)arrival);
    double process_gap = 1e9 / rate_per_s;
    p->arrival = arrival;
    p->gap_ns = process_gap * (double)nthreads;
    rs_rng_seed(&p->rng, seed ^ (0x9e3779b97f4a7c15ull * ((uint64_t)index + 1)));
    p->start_ns = start_ns;
    if (arrival == RS_PACING_UNIFORM) {
        p->offset_ns = process_gap * (double)index;
        p->due_ns = p->offset_ns;
    } else {
        p->due_ns = exp_gap(p);
    }
    return RS_OK;
}

uint64_t rs_pacing_take(rs_pacing *p) {
    uint64_t due = rs_pacing_due(p);
    p->taken++;
    if (p->arrival == RS_PACING_UNIFORM)
        p->due_ns = p->offset_ns + (double)p->taken * p->gap_ns;
    else
        p->due_ns += exp_gap(p);
    return due;
}

uint64_t rs_pacing_count_unsent(rs_pacing *p, uint64_t end_ns) {
    uint64_t n = 0;
    while (rs_pacing_due(p) < end_ns) {
        rs_pacing_take(p);
        n++;
    }
    p->late += n;
    return n;
}

void rs_pacing_thread_setup(void) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

void rs_pacing_sleep_until(uint64_t t_ns) {
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}
