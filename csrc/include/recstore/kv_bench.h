/*
 * kv_bench.h — the benchmark_kv_engine loops: load record_count keys into an rs_kv, then run a
 * YCSB a/b/c mix with uniform or scrambled-zipfian keys on N pthreads, timed (running_seconds) or
 * counted (operation_count). Reads are single gets, or batch_get_flat over batch_keys random keys
 * (throughput counted in keys, as RecStore does), or the "ceiling": the same loop gathering random
 * value_size rows from a flat array of record_count rows with no index at all — the memory-system
 * limit of the machine for this access pattern.
 *
 * Every thread owns its rng (seed + thread index), its zipfian generator state and two
 * histograms (read, update); nothing shared is written on the hot path except a stop flag that
 * the controlling thread sets. Results are merged after the threads join.
 */
#ifndef RECSTORE_KV_BENCH_H
#define RECSTORE_KV_BENCH_H

#include <stdint.h>

#include "recstore/error.h"
#include "recstore/hist.h"
#include "recstore/kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_kv_bench_read_mode {
    RS_KV_BENCH_GET = 1,     /* one rs_kv_get per read */
    RS_KV_BENCH_BATCH = 2,   /* one rs_kv_batch_get_flat over batch_keys keys per read */
    RS_KV_BENCH_CEILING = 3, /* batch shape, rows gathered from a flat array, no index */
} rs_kv_bench_read_mode;

typedef enum rs_kv_bench_dist {
    RS_KV_BENCH_UNIFORM = 1,
    RS_KV_BENCH_ZIPFIAN = 2, /* YCSB scrambled zipfian over record_count keys */
} rs_kv_bench_dist;

/* rs_kv_bench_config.out_buffers at most (64 Ki batches of 500 × 512 B would be 16 GiB) */
#define RS_KV_BENCH_MAX_OUT_BUFFERS 65536

typedef struct rs_kv_bench_config {
    rs_kv *kv;             /* engine under test (not owned); NULL in ceiling mode */
    uint64_t record_count; /* keys 0 .. record_count-1 */
    uint32_t value_size;   /* bytes per row (> 0) */
    uint32_t threads;      /* run threads (>= 1) */
    uint32_t load_threads; /* load threads (0 = threads) */
    char workload;         /* 'a' 50/50, 'b' 95/5, 'c' 100 % reads */
    rs_kv_bench_dist distribution;
    double zipfian_alpha; /* theta of the zipfian generator, in (0, 1) */
    rs_kv_bench_read_mode read_mode;
    uint32_t batch_keys;      /* keys per batch read (batch and ceiling modes) */
    double running_seconds;   /* > 0: timed run */
    uint64_t operation_count; /* used when running_seconds == 0: total ops (keys in batch modes) */
    uint64_t seed;
    int bind_core;               /* pin run thread i to CPU i % online CPUs */
    rs_kv_huge_pages huge_pages; /* ceiling mode: pages of the flat row array (kv.h) */
    /* ceiling mode: before gathering a batch's rows, touch this many lines (0, 1 or 2) of a random
     * 128-byte chunk per key in an array the size of DRAM_PET_HASH's line array: the memory
     * traffic of an index lookup with no work in it, i.e. what bounds an index that touches that
     * many lines per key (DRAM_PET_HASH touches 1) */
    uint32_t ceiling_index_lines;
    /* ceiling_index_lines > 0: the size of that array instead (a power of two >= 128 bytes; 0 =
     * DRAM_PET_HASH's for record_count): whether the index's lines cost a DRAM access per key or
     * stay in cache is a matter of its size */
    uint64_t ceiling_index_bytes;
    /* batch_get_flat or ceiling (with or without index lines): after every batch, run a plain
     * ceiling batch of other keys and time it apart (rs_kv_bench_phase.paired). The two then meet
     * the same moments of a machine whose speed drifts, and compare batch by batch; whole runs one
     * after the other do not on a shared VM. The paired batches gather rows from the engine's own
     * slab (which must hold fixed-size rows), or from the flat array in ceiling mode (the plain
     * ceiling paired with itself checks the method: about 100 %). */
    int paired_ceiling;
    /* batch modes: each run thread writes its batches into this many output buffers in turn (0 or
     * 1: one buffer, always warm). A PS serving T client threads × D requests in flight writes
     * each reply into one of T × D response buffers, last written T × D replies before: N buffers
     * put that footprint (N × batch_keys × value_size bytes per thread) on the gather, with no
     * transport in it (docs/scale.md) */
    uint32_t out_buffers;
} rs_kv_bench_config;

typedef struct rs_kv_bench_phase {
    double seconds;    /* wall time of the phase */
    uint64_t ops;      /* operations; a batch read counts its keys */
    uint64_t read_ops; /* keys read */
    uint64_t update_ops;
    uint64_t batches;   /* batch reads issued */
    uint64_t not_found; /* reads of a key that was not found (0 after a complete load) */
    uint64_t out_bytes; /* bytes of the output buffers the batches wrote, summed over threads:
                         * out_buffers × batch bytes per thread once every buffer was written */
    double cpu_user_s;  /* process CPU time during the phase */
    double cpu_sys_s;
    rs_hist read;   /* latency per read call (a batch is one call), ns */
    rs_hist update; /* latency per update/put call, ns */
    rs_hist paired; /* paired_ceiling: latency per paired ceiling batch, ns (not in ops) */
} rs_kv_bench_phase;

typedef struct rs_kv_bench rs_kv_bench;

/* Validate cfg and prepare (ceiling mode allocates the flat row array). RS_EINVAL names the bad
 * field. */
int rs_kv_bench_open(const rs_kv_bench_config *cfg, rs_kv_bench **out, rs_error *err);
void rs_kv_bench_close(rs_kv_bench *b);

/* Load keys 0..record_count-1 with load_threads threads (one put per key; latencies in ->update).
 */
int rs_kv_bench_load(rs_kv_bench *b, rs_kv_bench_phase *out, rs_error *err);

/* Run the workload. */
int rs_kv_bench_run(rs_kv_bench *b, rs_kv_bench_phase *out, rs_error *err);

/* Memory of what is measured: the engine's (rs_kv_get_memory), or in ceiling mode the flat row
 * array (slab_* fields, index_bytes 0, index_pages "none"). */
void rs_kv_bench_memory(const rs_kv_bench *b, rs_kv_memory *out);
/* Share (0..1) of the rows' memory (the engine's fixed-row slab, or the ceiling's flat array) on
 * huge pages now (/proc/self/smaps; THP-advised memory gets them only where the kernel had free
 * 2 MiB pages); -1 if unknown. Two cases compare fairly only if both are near 1 (or both 0). */
double rs_kv_bench_rows_huge_share(const rs_kv_bench *b);
/* Ask a running phase to stop early (safe from any thread). */
void rs_kv_bench_stop(rs_kv_bench *b);

#ifdef __cplusplus
}
#endif
#endif
