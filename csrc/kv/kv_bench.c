/*
 * kv_bench.c — benchmark_kv_engine's load and run loops (recstore/kv_bench.h).
 *
 * Phase shape: the controlling thread starts N pthreads, all check in at a start line, the clock
 * starts when the controller opens it; a timed run sleeps running_seconds and raises `stop`, a
 * counted run gives each thread its share of operation_count. Each thread keeps its own rng,
 * counters and read/update histograms (rs_hist) in its own heap block; they are merged after join.
 * Process CPU time (getrusage) is taken around the phase.
 *
 * The ceiling read mode runs the identical loop (same key generation, same batch size, same
 * output buffer) but gathers rows from a flat array with a software prefetch CEIL_D rows ahead,
 * which is what any index-based engine is trying to approach. It moves rows with the engine's own
 * row kernels (rs_kv_prefetch_range, rs_kv_row_copy; plain and AVX-512 builds, a 512-byte
 * specialisation), so an index is compared with the best gather this code knows, not a weaker
 * one. CEIL_D = 12 was the best distance on the EPYC VM (8: -6 %, 16: same).
 *
 * With ceiling_index_lines 1 or 2 the ceiling first touches a random 64-byte line, or both lines
 * of a random 128-byte chunk, per key (hash as the indexes do, a burst of prefetches over the
 * batch, then one load per line), in an array the size of DRAM_PET_HASH's line array (or
 * ceiling_index_bytes): a lookup's memory traffic with no work in it. PET reads 1 line per key, so
 * ceiling+1 line is what its layout allows at best (ceiling+2 lines was the bound of its earlier
 * 128-byte chunks); smaller arrays show what an index that stays in cache would allow.
 *
 * paired_ceiling follows every batch with a plain ceiling batch of fresh keys, timed into its own
 * histogram: an index and the ceiling measured in alternation, batch by batch, in one thread. On
 * a VM whose speed drifts by a third within a minute, whole runs one after another compare the
 * minutes they ran in as much as the code; alternating batches 50 µs apart do not. The paired
 * batches gather from the very rows the case reads (the engine's slab; the flat array for the
 * bounds), so the two differ by the index alone: a second row array of the same size beside the
 * slab measured the ceiling 15-20 % slower on the Zen 3 VM, which flattered the index. The plain
 * ceiling paired with itself is the method's own check: its ratio should be 100 %.
 */
#define _GNU_SOURCE
#include "recstore/kv_bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/rng.h"
#include "recstore/zipf.h"

#include "kv_internal.h"

#ifndef CEIL_D
#define CEIL_D 12
#endif
/* ceiling_index_lines touches a random 64-byte line of the array per key (1), or the two lines of
 * a random 128-byte chunk (2: PET's chunk layout until 2026-12-05). Until 2026-12-06 the 1-line
 * bound took the first line of a random 128-byte chunk, visiting half the array's lines, where
 * PET visits all; the Zen 4 VM measured the same bound both ways (docs/kv-engine.md). */
#define CEIL_CHUNK_BYTES 128

struct rs_kv_bench {
    rs_kv_bench_config cfg;
    rs_kv_region flat_region; /* ceiling mode: record_count rows, huge-page backed like the slab */
    uint8_t *flat;
    rs_kv_region chunk_region; /* ceiling_index_lines > 0: the chunk-array stand-in */
    uint8_t *chunks;
    uint64_t chunk_mask;      /* of the units below */
    uint32_t chunk_bytes;     /* the unit one key touches: 64 (1 line) or CEIL_CHUNK_BYTES (2) */
    const uint8_t *pair_rows; /* paired_ceiling: the rows its ceiling batches read ... */
    size_t pair_stride;       /* ... and the bytes between them */
    rs_zipf_scrambled zipf;
    int stop;       /* atomic: end the phase */
    int go;         /* atomic: start line; threads wait for it after checking in */
    uint32_t ready; /* atomic: threads at the start line */
};

typedef struct bench_thread {
    rs_kv_bench *b;
    uint32_t id;
    int load;
    uint64_t lo, hi; /* load: key range */
    uint64_t quota;  /* run: ops to do when counted */
    int rc;
    rs_error err;
    rs_kv_bench_phase r; /* this thread's counters and histograms */
    uint64_t sink;       /* ceiling_index_lines: what the chunk loads read (keeps them) */
} bench_thread;

int rs_kv_bench_open(const rs_kv_bench_config *cfg, rs_kv_bench **out, rs_error *err) {
    if (!cfg || !out) return rs_error_set(err, RS_EINVAL, "cfg and out must not be NULL");
    if (cfg->record_count == 0) return rs_error_set(err, RS_EINVAL, "record_count must be > 0");
    if (cfg->value_size == 0) return rs_error_set(err, RS_EINVAL, "value_size must be > 0");
    if (cfg->threads == 0) return rs_error_set(err, RS_EINVAL, "threads must be >= 1");
    if (cfg->workload != 'a' && cfg->workload != 'b' && cfg->workload != 'c')
        return rs_error_set(err, RS_EINVAL, "workload must be a, b or c (got '%c')",
                            cfg->workload ? cfg->workload : '?');
    if (cfg->read_mode != RS_KV_BENCH_GET && cfg->read_mode != RS_KV_BENCH_BATCH &&
        cfg->read_mode != RS_KV_BENCH_CEILING)
        return rs_error_set(err, RS_EINVAL, "read_mode %d is unknown", (int)cfg->read_mode);
    if (cfg->read_mode != RS_KV_BENCH_GET && cfg->batch_keys == 0)
        return rs_error_set(err, RS_EINVAL, "batch_keys must be >= 1 for batch reads");
    if (cfg->ceiling_index_lines > 2)
        return rs_error_set(err, RS_EINVAL, "ceiling_index_lines must be 0, 1 or 2 (got %u)",
                            cfg->ceiling_index_lines);
    if (cfg->ceiling_index_lines && cfg->read_mode != RS_KV_BENCH_CEILING)
        return rs_error_set(err, RS_EINVAL, "ceiling_index_lines needs read_mode ceiling");
    if (cfg->paired_ceiling && cfg->read_mode == RS_KV_BENCH_GET)
        return rs_error_set(err, RS_EINVAL,
                            "paired_ceiling needs read_mode batch_get_flat or ceiling");
    if (cfg->paired_ceiling && cfg->kv && cfg->kv->vs.variable)
        return rs_error_set(err, RS_EINVAL, "paired_ceiling needs an engine with fixed-size rows");
    if (cfg->out_buffers > 1 && cfg->read_mode == RS_KV_BENCH_GET)
        return rs_error_set(err, RS_EINVAL,
                            "out_buffers %u needs read_mode batch_get_flat or ceiling (get reads "
                            "one row at a time)",
                            cfg->out_buffers);
    if (cfg->out_buffers > RS_KV_BENCH_MAX_OUT_BUFFERS)
        return rs_error_set(err, RS_EINVAL, "out_buffers must be at most %d (got %u)",
                            RS_KV_BENCH_MAX_OUT_BUFFERS, cfg->out_buffers);
    if (cfg->ceiling_index_bytes && !cfg->ceiling_index_lines)
        return rs_error_set(err, RS_EINVAL, "ceiling_index_bytes needs ceiling_index_lines 1 or 2");
    if (cfg->ceiling_index_bytes && (cfg->ceiling_index_bytes < CEIL_CHUNK_BYTES ||
                                     (cfg->ceiling_index_bytes & (cfg->ceiling_index_bytes - 1))))
        return rs_error_set(err, RS_EINVAL,
                            "ceiling_index_bytes must be a power of two >= %d (got %llu)",
                            CEIL_CHUNK_BYTES, (unsigned long long)cfg->ceiling_index_bytes);
    if (cfg->read_mode != RS_KV_BENCH_CEILING && !cfg->kv)
        return rs_error_set(err, RS_EINVAL, "kv engine is required unless read_mode is ceiling");
    if (cfg->kv && rs_kv_value_size(cfg->kv) != cfg->value_size)
        return rs_error_set(err, RS_EINVAL, "value_size %u differs from the engine's %u",
                            cfg->value_size, rs_kv_value_size(cfg->kv));
    if (cfg->running_seconds <= 0 && cfg->operation_count == 0)
        return rs_error_set(err, RS_EINVAL, "set running_seconds > 0 or operation_count > 0");
    rs_kv_bench *b = calloc(1, sizeof *b);
    if (!b) return rs_error_set(err, RS_ENOMEM, "bench handle");
    b->cfg = *cfg;
    if (!b->cfg.load_threads) b->cfg.load_threads = cfg->threads;
    int rc;
    if (cfg->distribution == RS_KV_BENCH_ZIPFIAN) {
        rc = rs_zipf_scrambled_init(&b->zipf, cfg->record_count, cfg->zipfian_alpha, err);
        if (rc) goto fail;
    } else if (cfg->distribution != RS_KV_BENCH_UNIFORM) {
        rc = rs_error_set(err, RS_EINVAL, "distribution %d is unknown", (int)cfg->distribution);
        goto fail;
    }
    if (cfg->read_mode == RS_KV_BENCH_CEILING) {
        size_t bytes = (size_t)cfg->record_count * cfg->value_size;
        rc = rs_kv_region_open_anon(&b->flat_region, bytes, bytes, cfg->huge_pages, err);
        if (rc) {
            rs_error_prefix(err, "ceiling array of %zu bytes: ", bytes);
            goto fail;
        }
        b->flat = b->flat_region.base;
    }
    if (cfg->ceiling_index_lines) {
        size_t bytes = cfg->ceiling_index_bytes
                           ? cfg->ceiling_index_bytes
                           : (size_t)rs_kv_pet_lines(cfg->record_count) * RS_KV_PET_LINE_BYTES;
        if (bytes < CEIL_CHUNK_BYTES) bytes = CEIL_CHUNK_BYTES;
        b->chunk_bytes = cfg->ceiling_index_lines > 1 ? CEIL_CHUNK_BYTES : 64;
        uint64_t chunks = bytes / b->chunk_bytes;
        rc = rs_kv_region_open_anon(&b->chunk_region, bytes, bytes, cfg->huge_pages, err);
        if (rc) {
            rs_error_prefix(err, "ceiling index array of %zu bytes: ", bytes);
            rs_kv_region_close(&b->flat_region);
            goto fail;
        }
        b->chunks = b->chunk_region.base;
        b->chunk_mask = chunks - 1;
        /* written, so that every line is its own memory (untouched anonymous pages all read the
         * one zero page, which stays in cache) */
        memset(b->chunks, 0x5a, bytes);
    }
    if (cfg->paired_ceiling) { /* the very rows the case reads: the engine's slab, or flat */
        b->pair_rows = b->flat ? b->flat : cfg->kv->vs.data;
        b->pair_stride = b->flat ? cfg->value_size : cfg->kv->vs.stride;
    }
    *out = b;
    return 0;
fail:
    free(b);
    return rc;
}

void rs_kv_bench_memory(const rs_kv_bench *b, rs_kv_memory *out) {
    if (b->cfg.kv) return rs_kv_get_memory(b->cfg.kv, out);
    memset(out, 0, sizeof *out);
    out->capacity = b->cfg.record_count;
    out->row_bytes = out->row_stride = b->cfg.value_size;
    out->slab_bytes = out->slab_bytes_at_capacity = b->flat_region.backed;
    /* ceiling_index_lines' array: its size, not the huge pages it was rounded up to */
    out->index_bytes = b->chunks ? (b->chunk_mask + 1) * b->chunk_bytes : 0;
    out->bytes_per_key =
        out->capacity ? (double)(out->index_bytes + out->slab_bytes) / (double)out->capacity : 0.0;
    out->overhead_per_key = out->bytes_per_key - (double)out->row_bytes;
    out->index_pages = b->chunks ? b->chunk_region.pages : "none";
    out->slab_pages = b->flat ? b->flat_region.pages : "?";
}

double rs_kv_bench_rows_huge_share(const rs_kv_bench *b) {
    if (b->flat) return rs_kv_region_huge_share(&b->flat_region);
    if (b->cfg.kv && !b->cfg.kv->vs.variable && b->cfg.kv->vs.region.fd < 0)
        return rs_kv_region_huge_share(&b->cfg.kv->vs.region);
    return b->cfg.kv ? 0.0 : -1.0;
}

void rs_kv_bench_close(rs_kv_bench *b) {
    if (!b) return;
    if (b->flat) rs_kv_region_close(&b->flat_region);
    if (b->chunks) rs_kv_region_close(&b->chunk_region);
    free(b);
}

void rs_kv_bench_stop(rs_kv_bench *b) {
    __atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
}

static inline uint64_t next_key(rs_kv_bench *b, rs_rng *r) {
    if (b->cfg.distribution == RS_KV_BENCH_ZIPFIAN) return rs_zipf_scrambled_next(&b->zipf, r);
    return rs_rng_below(r, b->cfg.record_count);
}

/* The ceiling: gather rows keys[i] of an array of rows `stride` bytes apart into out, prefetching
 * CEIL_D rows ahead. */
RS_KV_INLINE size_t ceiling_body(const size_t vs, const uint8_t *flat, size_t stride,
                                 size_t row_bytes, const uint64_t *keys, size_t n, uint8_t *out) {
    (void)row_bytes; /* = vs, which is a constant here when it is 512 */
    for (size_t i = 0; i < n + CEIL_D; i++) {
        if (i < n) rs_kv_prefetch_range(flat + keys[i] * stride, vs);
        if (i >= CEIL_D)
            rs_kv_row_copy(out + (i - CEIL_D) * vs, flat + keys[i - CEIL_D] * stride, vs);
    }
    return n;
}

/* ceiling_index_lines: touch key's random line (or the 2 lines of its random chunk) for every key
 * of the batch, in two passes as PET's lookup does (a burst of prefetches, then the loads). */
static uint64_t ceiling_chunks(const rs_kv_bench *b, const uint64_t *keys, size_t n,
                               const uint8_t **ch) {
    const uint32_t lines = b->cfg.ceiling_index_lines;
    for (size_t i = 0; i < n; i++) {
        ch[i] = b->chunks + (rs_kv_hash(keys[i]) & b->chunk_mask) * b->chunk_bytes;
        __builtin_prefetch(ch[i], 0, RS_KV_CHUNK_LOCALITY);
        if (lines > 1) __builtin_prefetch(ch[i] + 64, 0, RS_KV_CHUNK_LOCALITY);
    }
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        s += __atomic_load_n((const uint64_t *)ch[i], __ATOMIC_RELAXED);
        if (lines > 1) s += __atomic_load_n((const uint64_t *)(ch[i] + 64), __ATOMIC_RELAXED);
    }
    return s;
}

RS_KV_ROW_LOOP(ceiling_gather, ceiling_body, vs,
               (const uint8_t *flat, size_t stride, size_t vs, const uint64_t *keys, size_t n,
                uint8_t *out),
               (flat, stride, vs, keys, n, out))

static void bind_cpu(uint32_t id) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(id % (uint32_t)n), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int put_row(rs_kv_bench *b, uint64_t key, uint8_t *row, rs_error *err) {
    memcpy(row, &key, sizeof key < b->cfg.value_size ? sizeof key : b->cfg.value_size);
    if (b->flat) {
        memcpy(b->flat + key * b->cfg.value_size, row, b->cfg.value_size);
        return 0;
    }
    return rs_kv_put(b->cfg.kv, key, row, b->cfg.value_size, err);
}

static void load_loop(bench_thread *t, uint8_t *row) {
    rs_kv_bench *b = t->b;
    for (uint64_t k = t->lo; k < t->hi; k++) {
        uint64_t t0 = rs_now_ns();
        t->rc = put_row(b, k, row, &t->err);
        rs_hist_record(&t->r.update, rs_now_ns() - t0);
        if (t->rc) return;
        t->r.update_ops++;
        t->r.ops++;
        if ((k & 1023) == 0 && __atomic_load_n(&b->stop, __ATOMIC_RELAXED)) return;
    }
}

/* outs: out_buffers buffers of out_stride bytes, one batch's rows each, written in turn */
static void run_loop(bench_thread *t, uint8_t *row, uint64_t *keys, uint8_t *outs,
                     size_t out_stride, uint8_t *found, const uint8_t **chunk_ptrs) {
    rs_kv_bench *b = t->b;
    const rs_kv_bench_config *c = &b->cfg;
    rs_rng rng;
    rs_rng_seed(&rng, c->seed + 0x1000u + t->id);
    double read_prop = c->workload == 'a' ? 0.5 : c->workload == 'b' ? 0.95 : 1.0;
    int timed = c->running_seconds > 0;
    size_t vs = c->value_size;
    uint32_t nbuf = c->out_buffers > 1 ? c->out_buffers : 1, next_buf = 0, used = 0;
    uint8_t *out = outs;
    while (timed ? !__atomic_load_n(&b->stop, __ATOMIC_RELAXED) : t->r.ops < t->quota) {
        int read = read_prop >= 1.0 || rs_rng_double(&rng) < read_prop;
        if (!read) {
            uint64_t key = next_key(b, &rng);
            uint64_t t0 = rs_now_ns();
            t->rc = put_row(b, key, row, &t->err);
            rs_hist_record(&t->r.update, rs_now_ns() - t0);
            if (t->rc) return;
            t->r.update_ops++;
            t->r.ops++;
            continue;
        }
        if (c->read_mode == RS_KV_BENCH_GET) {
            uint64_t key = next_key(b, &rng);
            uint64_t t0 = rs_now_ns();
            int rc = rs_kv_get(c->kv, key, out, vs, NULL);
            rs_hist_record(&t->r.read, rs_now_ns() - t0);
            if (rc == RS_ENOTFOUND) t->r.not_found++;
            t->r.read_ops++;
            t->r.ops++;
            continue;
        }
        size_t n = c->batch_keys;
        for (size_t i = 0; i < n; i++)
            keys[i] = next_key(b, &rng);
        out = outs + (size_t)next_buf * out_stride;
        if (next_buf == used) t->r.out_bytes = (uint64_t)++used * n * vs;
        next_buf = next_buf + 1 == nbuf ? 0 : next_buf + 1;
        size_t nf = n;
        uint64_t t0 = rs_now_ns();
        if (c->read_mode == RS_KV_BENCH_BATCH)
            rs_kv_batch_get_flat(c->kv, keys, n, out, found, &nf);
        else {
            if (b->chunks) t->sink += ceiling_chunks(b, keys, n, chunk_ptrs);
            ceiling_gather(b->flat, vs, vs, keys, n, out);
        }
        rs_hist_record(&t->r.read, rs_now_ns() - t0);
        t->r.not_found += n - nf;
        t->r.read_ops += n;
        t->r.ops += n;
        t->r.batches++;
        if (c->paired_ceiling) {
            for (size_t i = 0; i < n; i++)
                keys[i] = next_key(b, &rng);
            t0 = rs_now_ns();
            ceiling_gather(b->pair_rows, b->pair_stride, vs, keys, n, out);
            rs_hist_record(&t->r.paired, rs_now_ns() - t0);
        }
    }
}

static void *bench_main(void *arg) {
    bench_thread *t = arg;
    rs_kv_bench *b = t->b;
    size_t vs = b->cfg.value_size;
    size_t n = b->cfg.read_mode == RS_KV_BENCH_GET ? 1 : b->cfg.batch_keys;
    uint8_t *row = calloc(1, vs);
    uint64_t *keys = calloc(n, sizeof *keys);
    size_t out_stride = (n * vs + 63) & ~(size_t)63;
    size_t nbuf = b->cfg.out_buffers > 1 && !t->load ? b->cfg.out_buffers : 1;
    uint8_t *out = aligned_alloc(64, nbuf * out_stride);
    uint8_t *found = calloc(n, 1);
    const uint8_t **chunk_ptrs = calloc(n, sizeof *chunk_ptrs);
    if (!row || !keys || !out || !found || !chunk_ptrs) {
        t->rc =
            rs_error_set(&t->err, RS_ENOMEM, "per-thread buffers (%zu output buffers of %zu bytes)",
                         nbuf, out_stride);
    } else {
        memset(out, 0, nbuf * out_stride); /* every buffer faulted in before the clock starts */
        for (size_t i = 8; i < vs; i++)
            row[i] = (uint8_t)(i * 7 + t->id);
    }
    if (b->cfg.bind_core && !t->load) bind_cpu(t->id);
    __atomic_fetch_add(&b->ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        sched_yield();
    if (!t->rc && !__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
        if (t->load)
            load_loop(t, row);
        else
            run_loop(t, row, keys, out, out_stride, found, chunk_ptrs);
    }
    free(row);
    free(keys);
    free(out);
    free(found);
    free(chunk_ptrs);
    return NULL;
}

static int run_phase(rs_kv_bench *b, int load, rs_kv_bench_phase *res, rs_error *err) {
    uint32_t nt = load ? b->cfg.load_threads : b->cfg.threads;
    if (load && nt > b->cfg.record_count) nt = (uint32_t)b->cfg.record_count;
    bench_thread *th = calloc(nt, sizeof *th);
    pthread_t *tid = calloc(nt, sizeof *tid);
    int rc = 0;
    uint32_t started = 0;
    if (!th || !tid) {
        rc = rs_error_set(err, RS_ENOMEM, "%u thread states", nt);
        goto out_free;
    }
    __atomic_store_n(&b->stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->go, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->ready, 0, __ATOMIC_RELAXED);
    uint64_t per = b->cfg.record_count / nt, extra = b->cfg.record_count % nt, lo = 0;
    uint64_t qper = b->cfg.operation_count / nt, qextra = b->cfg.operation_count % nt;
    for (uint32_t i = 0; i < nt; i++) {
        bench_thread *t = &th[i];
        t->b = b;
        t->id = i;
        t->load = load;
        t->lo = lo;
        t->hi = lo + per + (i < extra);
        lo = t->hi;
        t->quota = qper + (i < qextra);
        rs_hist_reset(&t->r.read);
        rs_hist_reset(&t->r.update);
        rs_hist_reset(&t->r.paired);
        if (pthread_create(&tid[i], NULL, bench_main, t) != 0) {
            rc = rs_error_set(err, RS_ENOMEM, "pthread_create for thread %u", i);
            rs_kv_bench_stop(b); /* the started threads leave at the start line */
            break;
        }
        started++;
    }
    while (__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE) < started)
        sched_yield();
    rs_cpu_times c0, c1;
    rs_process_cpu(&c0);
    uint64_t t0 = rs_now_ns();
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (!rc && !load && b->cfg.running_seconds > 0) {
        uint64_t end = t0 + (uint64_t)(b->cfg.running_seconds * 1e9);
        for (uint64_t now = rs_now_ns(); now < end && !__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE);
             now = rs_now_ns())
            rs_sleep_ns(end - now < 20000000ull ? end - now : 20000000ull);
        rs_kv_bench_stop(b);
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    uint64_t t1 = rs_now_ns();
    rs_process_cpu(&c1);
    if (rc) goto out_free;
    memset(res, 0, sizeof *res);
    rs_hist_reset(&res->read);
    rs_hist_reset(&res->update);
    rs_hist_reset(&res->paired);
    res->seconds = (double)(t1 - t0) / 1e9;
    res->cpu_user_s = c1.user_s - c0.user_s;
    res->cpu_sys_s = c1.sys_s - c0.sys_s;
    for (uint32_t i = 0; i < nt; i++) {
        bench_thread *t = &th[i];
        res->ops += t->r.ops;
        res->read_ops += t->r.read_ops;
        res->update_ops += t->r.update_ops;
        res->batches += t->r.batches;
        res->out_bytes += t->r.out_bytes;
        res->not_found += t->r.not_found;
        rs_hist_merge(&res->read, &t->r.read);
        rs_hist_merge(&res->update, &t->r.update);
        rs_hist_merge(&res->paired, &t->r.paired);
        if (t->rc && !rc) {
            rc = t->rc;
            if (err) *err = t->err;
            rs_error_prefix(err, "%s thread %u: ", load ? "load" : "run", i);
        }
    }
out_free:
    free(th);
    free(tid);
    return rc;
}

int rs_kv_bench_load(rs_kv_bench *b, rs_kv_bench_phase *out, rs_error *err) {
    return run_phase(b, 1, out, err);
}

int rs_kv_bench_run(rs_kv_bench *b, rs_kv_bench_phase *out, rs_error *err) {
    return run_phase(b, 0, out, err);
}
