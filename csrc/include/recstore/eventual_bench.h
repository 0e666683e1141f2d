/*
 * eventual_bench.h — the wait-primitive benchmark: how many create/wait/set/destroy cycles of an
 * rs_eventual N concurrent waiters complete per second, and what CPU time that costs.
 *
 * Each of num_waiters threads loops until the run's end: allocate and init an eventual, hand it to
 * the setter with a deadline now + interval, wait on it (RS_WAIT_BLOCK or RS_WAIT_SPIN), free it.
 * The setter stands in for a network reply: ONE timer thread keeps a min-heap of pending
 * (deadline, eventual) pairs and sleeps on a futex until the earliest deadline, then
 * sets every due eventual. No thread per pending request, so with block mode the whole process
 * sleeps between deadlines: CPU time follows the wake-up rate, not the time spent waiting; with
 * spin mode every waiter burns a core while it waits, which is what the CPU column shows.
 *
 * Ideal rate: num_waiters * 1000 / interval_ms ops/s. Wake lateness (wake time - deadline) is
 * recorded per waiter in an rs_hist and merged at the end.
 */
#ifndef RECSTORE_EVENTUAL_BENCH_H
#define RECSTORE_EVENTUAL_BENCH_H

#include <stdint.h>

#include "recstore/error.h"
#include "recstore/eventual.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_EVENTUAL_BENCH_MAX_WAITERS 100000u

typedef struct rs_eventual_bench_cfg {
    uint32_t num_waiters; /* 1 .. RS_EVENTUAL_BENCH_MAX_WAITERS */
    double duration_s;    /* > 0: length of the measured window */
    double interval_ms;   /* >= 0: delay between handing an eventual to the setter and its set */
    rs_wait_mode wait_mode;
} rs_eventual_bench_cfg;

typedef struct rs_eventual_bench_result {
    uint64_t ops;       /* cycles completed inside the window */
    double elapsed_s;   /* the window: duration_s as configured */
    double ops_per_sec; /* ops / elapsed_s */
    double cpu_user_s;  /* process CPU time from window start until every thread has exited */
    double cpu_sys_s;
    double cpu_time_s;  /* user + sys */
    double wall_s;      /* window start until every thread has exited (>= elapsed_s) */
    double late_p50_us; /* wake lateness percentiles over all cycles */
    double late_p99_us;
    double late_max_us;
} rs_eventual_bench_result;

/* Check a config; RS_EINVAL with the offending field named in err. */
int rs_eventual_bench_validate(const rs_eventual_bench_cfg *cfg, rs_error *err);

/* Run the benchmark (blocks for about duration_s + interval_ms). 0 on success; RS_EINVAL for a
 * bad config, RS_ENOMEM or RS_EIO (thread creation failed) with the reason in err. */
int rs_eventual_bench_run(const rs_eventual_bench_cfg *cfg, rs_eventual_bench_result *out,
                          rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
