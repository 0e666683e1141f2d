/*
 * ps_bench.h — the load and run loops of ps_bench (RecStore's ps_transport_benchmark,
 * workload=transactions), in C with pthreads: one all-shards client per thread, a pipeline of
 * prefetch_depth batches per thread, per-thread latency histograms merged at the end.
 *
 * Load: keys 1..record_count split into contiguous ranges over load threads, PUT in batches of
 * batch_keys, rows derived from each key (rs_ps_bench_row), so a later verify run can check them.
 * Run: for running_seconds after warmup_seconds, each thread keeps prefetch_depth batches in
 * flight; keys uniform or scrambled-zipfian over 1..key_space (key_space = fetch_key_space or
 * record_count); PUTs only touch 1..record_count. Modes: fetch (GET), insert (PUT), mixed (GET
 * with probability read_ratio %, else PUT), fetch_insert (GET a batch, then PUT the same keys).
 * A batch is counted, and its latency (submit -> completion) recorded, when it completes inside
 * the timed window. CPU time is the process's user/sys time over the same window.
 *
 * Open loop (target_rate > 0, recstore/pacing.h): each thread sends on its own timetable of
 * target_rate / threads batches per second (uniform or Poisson, from the start of the warm-up),
 * keeping at most prefetch_depth in flight. Throughput counts batches completed inside the timed
 * window, as in closed loop; the latency histograms hold every batch *due* inside it (in-flight
 * batches are drained after it closes, so a stall at the end is not dropped), its latency
 * measured from the due time (coordinated omission corrected: the p*_us fields and hist_out) and
 * its service time from the actual send (service_*). Sending stops when the window
 * closes; a batch that could not go at its due time because the thread was waiting for an earlier
 * one, or that was due in the window and never sent, is a late send.
 */
#ifndef RECSTORE_PS_BENCH_H
#define RECSTORE_PS_BENCH_H

#include <stdint.h>

#include "recstore/error.h"
#include "recstore/hist.h"
#include "recstore/pacing.h"
#include "recstore/ps_client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest row the bench loops handle: the verify pass rebuilds each expected row in a stack
 * buffer of this many bytes. Exported to Python as recbench._ps.BENCH_MAX_VALUE_SIZE, so the runner
 * refuses a larger --value-size at parse time. */
#define RS_PS_BENCH_MAX_VALUE_SIZE 16384

typedef enum rs_ps_bench_mode {
    RS_PS_BENCH_FETCH = 0,
    RS_PS_BENCH_INSERT = 1,
    RS_PS_BENCH_MIXED = 2,
    RS_PS_BENCH_FETCH_INSERT = 3,
} rs_ps_bench_mode;

/* "fetch" | "insert" | "mixed" | "fetch_insert" -> mode; RS_EINVAL naming the accepted values. */
int rs_ps_bench_mode_parse(const char *name, rs_ps_bench_mode *out, rs_error *err);

typedef struct rs_ps_bench_config {
    rs_ps_client_config client; /* transport, endpoints, value_size, prefetch_depth, timeout */
    rs_ps_bench_mode mode;
    uint64_t record_count;
    uint32_t batch_keys;
    uint32_t threads;      /* run threads */
    uint32_t load_threads; /* 0 = threads */
    double running_seconds;
    double warmup_seconds;
    int zipfian;          /* 0 uniform, 1 scrambled zipfian */
    double zipfian_alpha; /* theta, 0 < alpha < 1 */
    uint32_t read_ratio;  /* mixed: percent of GET batches */
    uint64_t fetch_key_space;
    int verify; /* check every fetched row against rs_ps_bench_row; misses must be 0 */
    /* run phase: every thread's batch row buffers are its client's row buffers
     * (rs_ps_client_rows_buffers: rdma/shm with the RC option rows_buffers >= prefetch_depth),
     * so GET rows land where the bench reads them, without the client's copy */
    int rows_in_slots;
    uint64_t seed;
    const volatile int *stop; /* nullable: set non-zero to end the phase early */
    int profile;              /* run phase: time key generation, submit, wait and consume */
    rs_hist *hist_out;        /* nullable: receives the phase's merged batch-latency histogram,
                               * so several clients' percentiles can be merged exactly */
    double target_rate;       /* run phase: batches/s offered by the process; 0 = closed loop */
    rs_pacing_arrival arrival;
    uint64_t arrival_seed;
    rs_hist *service_hist_out; /* nullable, open loop: the merged service-time histogram */
} rs_ps_bench_config;

typedef struct rs_ps_bench_result {
    double runtime_s;
    uint64_t batches, key_ops;
    uint64_t get_batches, put_batches;
    uint64_t keys_found, keys_missing;      /* GET keys inside 1..record_count found / not found */
    uint64_t get_parts, get_parts_gathered; /* GET shard responses; ... scatter-gathered (RC) */
    /* batches completed in the window by the thread that completed the fewest, and the most: a
     * server that serves some connections worse than others shows here (stragglers) */
    uint64_t thread_batches_min, thread_batches_max;
    double mean_us, p50_us, p95_us, p99_us, p999_us, max_us;
    double cpu_user_s, cpu_sys_s;
    uint64_t verify_checked_rows, verify_bad_rows;
    uint64_t first_bad_key;
    int stopped_early;
    /* profile (run phase, when cfg->profile): average ns per batch of each step; wait includes
     * receiving the rows into the caller's buffer */
    double make_keys_avg_ns, submit_avg_ns, wait_avg_ns, consume_avg_ns;
    /* open loop (target_rate > 0): p50_us..max_us above are then from the due time */
    int open_loop;
    uint64_t late_sends; /* sent after their due time because the thread was waiting, or unsent */
    rs_hist_us service;  /* open loop: from the actual send */
    /* the process's budget of bytes in flight, and the chunks it deferred summed over the
     * threads' clients (whole phase, warm-up included; recstore/ps_client.h) */
    rs_ps_client_budget_stats budget;
    /* how the threads' waits for answers ended, summed (whole phase; recstore/transport.h), when
     * the transport counts them (wait_counted) */
    int wait_counted;
    rs_ps_wait_stats wait;
} rs_ps_bench_result;

/* The deterministic row of a key (value_size bytes): float32 values exact in binary. */
void rs_ps_bench_row(uint64_t key, uint32_t value_size, float *row);

/* Run the load phase. RS_EVERIFY never happens here; transport/server errors stop every thread and
 * are returned with the first failure's text (the shard and server named). */
int rs_ps_bench_load(const rs_ps_bench_config *cfg, rs_ps_bench_result *res, rs_error *err);

/* Run the timed phase. With verify, a bad row or a miss returns RS_EVERIFY naming the first bad
 * key (res is filled either way). */
int rs_ps_bench_run(const rs_ps_bench_config *cfg, rs_ps_bench_result *res, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
