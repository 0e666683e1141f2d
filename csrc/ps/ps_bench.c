/*
 * ps_bench.c — load and run loops of ps_bench (see recstore/ps_bench.h for the workload).
 *
 * Threads: the calling thread coordinates; it starts N worker threads, each of which opens its own
 * all-shards client and waits at a barrier, so connection setup is outside the timed window. The
 * coordinator then fixes the window (start + warm-up, end), releases the workers, samples process
 * CPU time at the window's edges and joins. Workers share nothing on the hot path: each has its
 * own client, rng, key/row buffers, counters and histogram (merged after join).
 *
 * Pipeline: a worker keeps up to prefetch_depth batches in flight; slot i of its ring holds the
 * keys and the row buffer of one batch until rs_ps_client_wait returns it (FIFO).
 *
 * Open loop (target_rate > 0): open_loop() sends each batch at its due time from the thread's
 * timetable (recstore/pacing.h). The next batch is prepared into its slot before its due time, so
 * the clock is read once per send (the send time) and once per completion. The transports' wait
 * blocks, so a thread waiting for its oldest batch cannot send meanwhile: a batch due during that
 * wait goes when it returns and counts as a late send; its latency still runs from the due time.
 * Throughput counts completions inside the timed window (as in closed loop); the latency
 * histograms hold every batch due inside it, drained after the window closes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/clock.h"
#include "recstore/hash.h"
#include "recstore/hist.h"
#include "recstore/pacing.h"
#include "recstore/ps_bench.h"
#include "recstore/rng.h"
#include "recstore/zipf.h"

static const char *const mode_names[] = {"fetch", "insert", "mixed", "fetch_insert"};

int rs_ps_bench_mode_parse(const char *name, rs_ps_bench_mode *out, rs_error *err) {
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, mode_names[i]) == 0) {
            *out = (rs_ps_bench_mode)i;
            return 0;
        }
    return rs_error_set(err, RS_EINVAL,
                        "unknown mode '%s' (expected fetch, insert, mixed or fetch_insert)",
                        name ? name : "");
}

void rs_ps_bench_row(uint64_t key, uint32_t value_size, float *row) {
    /* base < 2^23 and j < 2^16: every value is an exact float32 */
    uint32_t base = (uint32_t)(rs_mix64(key) >> 41);
    for (uint32_t j = 0; j < value_size / 4; j++)
        row[j] = (float)(base + j) * 0.25f;
}

typedef enum { PHASE_LOAD, PHASE_RUN } phase;

typedef struct worker {
    pthread_t thread;
    unsigned index;
    struct bench *b;
    rs_ps_client *client;
    int rc;
    rs_error err;
    uint64_t key_lo, key_hi; /* load range [lo, hi) */
    uint64_t batches, key_ops, get_batches, put_batches, found, missing;
    uint64_t get_parts, get_parts_gathered;
    uint64_t checked, bad, first_bad_key;
    uint64_t prof_make_ns, prof_submit_ns, prof_wait_ns, prof_consume_ns, prof_submits, prof_waits;
    char first_bad_msg[160];
    uint64_t late_sends; /* open loop */
    rs_ps_client_budget_stats budget;
    int wait_counted;
    rs_ps_wait_stats wait;
    rs_hist hist;
    rs_hist service_hist; /* open loop: from the actual send */
} worker;

typedef struct bench {
    const rs_ps_bench_config *cfg;
    phase ph;
    uint32_t vs;
    uint64_t key_space;
    rs_zipf_scrambled zipf;
    pthread_mutex_t mu; /* start handshake: workers report ready, the coordinator says go */
    pthread_cond_t cv;
    unsigned ready;
    int go;
    uint64_t sched_start, window_start, window_end; /* written before `go` */
    int abort;                                      /* atomic: a worker failed */
} bench;

static int stop_requested(bench *b) {
    return (b->cfg->stop && *b->cfg->stop) || __atomic_load_n(&b->abort, __ATOMIC_RELAXED);
}

typedef struct slot {
    uint64_t *keys;
    float *rows;
    int rows_borrowed; /* rows is one of the client's row buffers (rows_in_slots) */
    uint32_t n;
    rs_ps_op op;
    uint64_t submit_ns;
    uint64_t due_ns; /* open loop */
    int ready;       /* open loop: keys drawn, not yet sent */
} slot;

static uint64_t draw_key(bench *b, rs_rng *r, uint64_t space) {
    if (b->cfg->zipfian && space == b->key_space) return rs_zipf_scrambled_next(&b->zipf, r) + 1;
    return rs_rng_below(r, space) + 1;
}

static void verify_rows(worker *w, const slot *s) {
    bench *b = w->b;
    uint32_t dim = b->vs / 4;
    float expect[RS_PS_BENCH_MAX_VALUE_SIZE / 4];
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t k = s->keys[i];
        const float *got = s->rows + (size_t)i * dim;
        int loaded = k >= 1 && k <= b->cfg->record_count;
        if (loaded) rs_ps_bench_row(k, b->vs, expect);
        w->checked++;
        for (uint32_t j = 0; j < dim; j++) {
            float e = loaded ? expect[j] : 0.0f;
            if (memcmp(&got[j], &e, sizeof e) != 0) {
                if (!w->bad++) {
                    w->first_bad_key = k;
                    snprintf(w->first_bad_msg, sizeof w->first_bad_msg,
                             "key %llu: float %u is %g, expected %g%s", (unsigned long long)k, j,
                             (double)got[j], (double)e,
                             loaded && got[j] == 0.0f ? " (row missing)" : "");
                }
                break;
            }
        }
    }
}

static void fill_put_rows(bench *b, slot *s) {
    uint32_t dim = b->vs / 4;
    for (uint32_t i = 0; i < s->n; i++)
        rs_ps_bench_row(s->keys[i], b->vs, s->rows + (size_t)i * dim);
}

/* Choose the next batch of a run worker: op and keys. `last` is the slot submitted just before. */
static void next_run_batch(worker *w, rs_rng *r, slot *s, const slot *last, uint64_t *fi_count) {
    bench *b = w->b;
    const rs_ps_bench_config *cfg = b->cfg;
    uint32_t n = cfg->batch_keys;
    rs_ps_op op;
    switch (cfg->mode) {
    case RS_PS_BENCH_INSERT: op = RS_PS_PUT; break;
    case RS_PS_BENCH_MIXED:
        op = rs_rng_below(r, 100) < cfg->read_ratio ? RS_PS_GET : RS_PS_PUT;
        break;
    case RS_PS_BENCH_FETCH_INSERT: op = (*fi_count)++ % 2 ? RS_PS_PUT : RS_PS_GET; break;
    default: op = RS_PS_GET; break;
    }
    s->op = op;
    s->n = n;
    if (cfg->mode == RS_PS_BENCH_FETCH_INSERT && op == RS_PS_PUT && last) {
        /* write back the keys just fetched (those within the loaded range) */
        uint32_t m = 0;
        for (uint32_t i = 0; i < last->n; i++)
            if (last->keys[i] <= cfg->record_count) s->keys[m++] = last->keys[i];
        s->n = m;
    } else if (op == RS_PS_PUT) {
        for (uint32_t i = 0; i < n; i++)
            s->keys[i] = draw_key(b, r, cfg->record_count);
    } else {
        for (uint32_t i = 0; i < n; i++)
            s->keys[i] = draw_key(b, r, b->key_space);
    }
    if (op == RS_PS_PUT) fill_put_rows(b, s);
}

static void worker_fail(worker *w, int rc, const rs_error *e) {
    if (!w->rc) {
        w->rc = rc;
        w->err = *e;
    }
    __atomic_store_n(&w->b->abort, 1, __ATOMIC_RELAXED);
}

/* Count one batch completed inside the timed window, and check its GET rows. */
static void note_done(worker *w, const slot *s, const rs_ps_batch_result *res) {
    const rs_ps_bench_config *cfg = w->b->cfg;
    w->batches++;
    w->key_ops += s->n;
    if (s->op == RS_PS_GET) {
        w->get_batches++;
        w->get_parts += res->parts;
        w->get_parts_gathered += res->gathered;
        uint64_t loaded = 0;
        for (uint32_t i = 0; i < s->n; i++)
            loaded += s->keys[i] >= 1 && s->keys[i] <= cfg->record_count;
        w->found += res->num_found;
        w->missing += loaded > res->num_found ? loaded - res->num_found : 0;
        if (cfg->verify) verify_rows(w, s);
    } else {
        w->put_batches++;
    }
}

/* The run phase on a timetable (see the file comment). */
static void open_loop(worker *w, slot *slots, uint32_t depth, rs_rng *rng) {
    bench *b = w->b;
    const rs_ps_bench_config *cfg = b->cfg;
    rs_pacing pc;
    rs_error e = {0};
    int rc = rs_pacing_init(&pc, cfg->arrival, cfg->target_rate, w->index, cfg->threads,
                            b->sched_start, cfg->arrival_seed, &e);
    if (rc) {
        worker_fail(w, rc, &e);
        return;
    }
    rs_pacing_thread_setup();
    uint64_t win_start = b->window_start, win_end = b->window_end, fi_count = 0;
    uint64_t busy_until = 0; /* when the thread's last wait for a completion returned */
    uint32_t head = 0, inflight = 0;
    int sending = 1, window_closed = 0;
    for (;;) {
        if (sending && inflight < depth) {
            slot *s = &slots[(head + inflight) % depth];
            if (!s->ready) {
                const slot *last = inflight ? &slots[(head + inflight - 1) % depth] : NULL;
                next_run_batch(w, rng, s, last, &fi_count);
                s->ready = 1;
            }
            uint64_t now = rs_now_ns(), due = rs_pacing_due(&pc);
            if (now >= win_end || stop_requested(b)) {
                sending = 0;
                window_closed = now >= win_end;
                continue;
            }
            if (due <= now) {
                s->due_ns = rs_pacing_take(&pc);
                s->submit_ns = now;
                s->ready = 0;
                if (rs_pacing_note_send(&pc, s->due_ns, busy_until) && s->due_ns >= win_start &&
                    s->due_ns < win_end)
                    w->late_sends++;
                rc = rs_ps_client_submit(w->client, s->op, s->keys, s->n,
                                         s->op == RS_PS_PUT ? s->rows : NULL,
                                         s->op == RS_PS_GET ? s->rows : NULL, 0, &e);
                if (rc) {
                    worker_fail(w, rc, &e);
                    sending = 0;
                    continue;
                }
                inflight++;
                continue;
            }
            if (!inflight) {
                /* nothing to collect: sleep to the due time (or the window's end), re-checking
                 * the stop flag every 20 ms */
                uint64_t until = due < win_end ? due : win_end;
                rs_pacing_sleep_until(until - now > 20000000ull ? now + 20000000ull : until);
                continue;
            }
        }
        if (!inflight) break;
        slot *s = &slots[head];
        rs_ps_batch_result res;
        rc = rs_ps_client_wait(w->client, &res, &e);
        uint64_t done = rs_now_ns();
        busy_until = done;
        head = (head + 1) % depth;
        inflight--;
        if (rc) {
            worker_fail(w, rc, &e);
            sending = 0;
            continue; /* drain the rest of the pipeline */
        }
        /* throughput: completions inside the window, as in closed loop; latency: every batch
         * due inside it, however late it completed */
        if (done >= win_start && done <= win_end) note_done(w, s, &res);
        if (s->due_ns >= win_start && s->due_ns < win_end) {
            rs_hist_record(&w->hist, done - s->due_ns);
            rs_hist_record(&w->service_hist, done - s->submit_ns);
        }
    }
    /* batches due in the window and never sent; counted once the pipeline has drained, so the
     * count (O(backlog)) does not delay the last completions */
    if (window_closed) {
        rs_pacing_count_unsent(&pc, win_start); /* a backlog left from the warm-up */
        w->late_sends += rs_pacing_count_unsent(&pc, win_end);
    }
}

/* rows_in_slots: the pipeline's row buffers become the client's (one per slot of the ring). */
static int borrow_rows(worker *w, slot *slots, uint32_t depth, rs_error *e) {
    void **bufs = malloc(depth * sizeof *bufs);
    size_t cap = 0, need = (size_t)w->b->cfg->batch_keys * w->b->vs;
    uint32_t n = 0;
    int rc = bufs ? rs_ps_client_rows_buffers(w->client, bufs, depth, &cap, &n, e)
                  : rs_error_set(e, RS_ENOMEM, "bench row buffers");
    if (rc)
        rs_error_prefix(e, "rows_in_slots");
    else if (n < depth)
        rc = rs_error_set(e, RS_EINVAL,
                          "rows_in_slots: the client has %u row buffers for prefetch_depth %u "
                          "(give the RC option rows_buffers=%u)",
                          n, depth, depth);
    else if (cap < need)
        rc = rs_error_set(e, RS_EINVAL,
                          "rows_in_slots: a row buffer holds %zu bytes, a batch of %u keys needs "
                          "%zu (raise rdma_rc_response_slot_bytes)",
                          cap, w->b->cfg->batch_keys, need);
    for (uint32_t i = 0; rc == 0 && i < depth; i++) {
        free(slots[i].rows);
        slots[i].rows = bufs[i];
        slots[i].rows_borrowed = 1;
    }
    free(bufs);
    return rc;
}

static void worker_loop(worker *w) {
    bench *b = w->b;
    const rs_ps_bench_config *cfg = b->cfg;
    uint32_t depth = cfg->client.prefetch_depth ? cfg->client.prefetch_depth : 1;
    slot *slots = calloc(depth, sizeof *slots);
    rs_error e = {0};
    if (!slots) {
        rs_error_set(&e, RS_ENOMEM, "bench slots");
        worker_fail(w, RS_ENOMEM, &e);
        return;
    }
    for (uint32_t i = 0; i < depth; i++) {
        slots[i].keys = malloc((size_t)cfg->batch_keys * 8);
        slots[i].rows = malloc((size_t)cfg->batch_keys * b->vs);
        if (!slots[i].keys || !slots[i].rows) {
            rs_error_set(&e, RS_ENOMEM, "bench batch buffers");
            worker_fail(w, RS_ENOMEM, &e);
            goto out;
        }
    }
    int brc = cfg->rows_in_slots && b->ph == PHASE_RUN ? borrow_rows(w, slots, depth, &e) : 0;
    if (brc) {
        worker_fail(w, brc, &e);
        goto out;
    }
    rs_rng rng;
    rs_rng_seed(&rng, cfg->seed + 0x9e3779b97f4a7c15ull * (w->index + 1) +
                          (b->ph == PHASE_LOAD ? 0 : 0x5555));
    if (b->ph == PHASE_RUN && cfg->target_rate > 0) {
        open_loop(w, slots, depth, &rng);
        goto out;
    }
    uint64_t next_load = w->key_lo, fi_count = 0;
    uint32_t head = 0, inflight = 0;
    uint64_t win_start = b->window_start, win_end = b->window_end;
    int profile = cfg->profile && b->ph == PHASE_RUN;
    for (;;) {
        uint64_t now = rs_now_ns();
        int more = b->ph == PHASE_LOAD ? next_load < w->key_hi : now < win_end;
        if (more && stop_requested(b)) more = 0;
        if (more && inflight < depth) {
            slot *s = &slots[(head + inflight) % depth];
            if (b->ph == PHASE_LOAD) {
                uint64_t n = w->key_hi - next_load;
                if (n > cfg->batch_keys) n = cfg->batch_keys;
                for (uint64_t i = 0; i < n; i++)
                    s->keys[i] = next_load + i;
                next_load += n;
                s->n = (uint32_t)n;
                s->op = RS_PS_PUT;
                fill_put_rows(b, s);
            } else {
                const slot *last = inflight ? &slots[(head + inflight - 1) % depth] : NULL;
                next_run_batch(w, &rng, s, last, &fi_count);
            }
            s->submit_ns = rs_now_ns();
            int rc = rs_ps_client_submit(w->client, s->op, s->keys, s->n,
                                         s->op == RS_PS_PUT ? s->rows : NULL,
                                         s->op == RS_PS_GET ? s->rows : NULL, 0, &e);
            if (rc) {
                worker_fail(w, rc, &e);
                break;
            }
            if (profile) {
                w->prof_make_ns += s->submit_ns - now;
                w->prof_submit_ns += rs_now_ns() - s->submit_ns;
                w->prof_submits++;
            }
            inflight++;
            continue;
        }
        if (!inflight) break;
        slot *s = &slots[head];
        rs_ps_batch_result res;
        uint64_t wait0 = profile ? rs_now_ns() : 0;
        int rc = rs_ps_client_wait(w->client, &res, &e);
        uint64_t done = rs_now_ns();
        if (profile) {
            w->prof_wait_ns += done - wait0;
            w->prof_waits++;
        }
        head = (head + 1) % depth;
        inflight--;
        if (rc) {
            worker_fail(w, rc, &e);
            continue; /* drain the rest of the pipeline */
        }
        if (b->ph == PHASE_RUN && (done < win_start || done > win_end)) continue;
        rs_hist_record(&w->hist, done - s->submit_ns);
        note_done(w, s, &res);
        if (profile) w->prof_consume_ns += rs_now_ns() - done;
    }
out:
    for (uint32_t i = 0; i < depth; i++) {
        free(slots[i].keys);
        if (!slots[i].rows_borrowed) free(slots[i].rows);
    }
    free(slots);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    bench *b = w->b;
    rs_error e = {0};
    int rc = rs_ps_client_open(&b->cfg->client, &w->client, &e);
    if (rc) worker_fail(w, rc, &e);
    pthread_mutex_lock(&b->mu);
    b->ready++;
    pthread_cond_broadcast(&b->cv);
    while (!b->go)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    if (w->client && !stop_requested(b)) worker_loop(w);
    if (w->client) {
        rs_ps_client_budget_stats_get(w->client, &w->budget);
        w->wait_counted = rs_ps_client_wait_stats_get(w->client, &w->wait);
    }
    rs_ps_client_close(w->client);
    w->client = NULL;
    return NULL;
}

static void sleep_until(bench *b, uint64_t t) {
    for (;;) {
        uint64_t now = rs_now_ns();
        if (now >= t || stop_requested(b)) return;
        uint64_t d = t - now;
        rs_sleep_ns(d > 20000000ull ? 20000000ull : d); /* re-check the stop flag every 20 ms */
    }
}

static int bench_phase(const rs_ps_bench_config *cfg, phase ph, rs_ps_bench_result *res,
                       rs_error *err) {
    memset(res, 0, sizeof *res);
    if (cfg->batch_keys == 0) return rs_error_set(err, RS_EINVAL, "batch_keys must be >= 1");
    if (cfg->record_count == 0) return rs_error_set(err, RS_EINVAL, "record_count must be >= 1");
    if (cfg->client.value_size == 0 || cfg->client.value_size % 4)
        return rs_error_set(err, RS_EINVAL, "value_size %u must be a positive multiple of 4",
                            cfg->client.value_size);
    if (cfg->client.value_size > RS_PS_BENCH_MAX_VALUE_SIZE)
        return rs_error_set(err, RS_EINVAL, "value_size %u exceeds ps_bench's %d-byte rows",
                            cfg->client.value_size, RS_PS_BENCH_MAX_VALUE_SIZE);
    if (cfg->read_ratio > 100)
        return rs_error_set(err, RS_EINVAL, "read_ratio %u is not a percentage", cfg->read_ratio);
    if (ph == PHASE_RUN && !(cfg->running_seconds > 0))
        return rs_error_set(err, RS_EINVAL, "running_seconds must be > 0");
    if (ph == PHASE_RUN && (cfg->target_rate < 0 || cfg->target_rate > RS_PACING_MAX_RATE ||
                            cfg->target_rate != cfg->target_rate))
        return rs_error_set(err, RS_EINVAL,
                            "target_rate %g is not in [0, %g] batches/s (0 = closed loop)",
                            cfg->target_rate, RS_PACING_MAX_RATE);
    if (ph == PHASE_RUN && cfg->target_rate > 0 && cfg->threads &&
        cfg->target_rate / cfg->threads < RS_PACING_MIN_THREAD_RATE)
        return rs_error_set(err, RS_EINVAL,
                            "target_rate %g over %u threads is below %g batches/s "
                            "per thread",
                            cfg->target_rate, cfg->threads, RS_PACING_MIN_THREAD_RATE);
    uint32_t n =
        ph == PHASE_LOAD ? (cfg->load_threads ? cfg->load_threads : cfg->threads) : cfg->threads;
    if (n == 0) return rs_error_set(err, RS_EINVAL, "thread_num must be >= 1");
    bench b = {.cfg = cfg, .ph = ph, .vs = cfg->client.value_size};
    b.key_space = cfg->fetch_key_space ? cfg->fetch_key_space : cfg->record_count;
    int rc;
    if (cfg->zipfian &&
        (rc = rs_zipf_scrambled_init(&b.zipf, b.key_space, cfg->zipfian_alpha, err)))
        return rs_error_prefix(err, "zipfian_alpha");
    worker *ws = NULL;
    if (posix_memalign((void **)&ws, 64, n * sizeof *ws))
        return rs_error_set(err, RS_ENOMEM, "bench workers");
    memset(ws, 0, n * sizeof *ws);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    uint64_t per = cfg->record_count / n, extra = cfg->record_count % n, lo = 1;
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++) {
        worker *w = &ws[i];
        w->index = i;
        w->b = &b;
        rs_hist_reset(&w->hist);
        rs_hist_reset(&w->service_hist);
        w->key_lo = lo;
        w->key_hi = lo + per + (i < extra ? 1 : 0);
        lo = w->key_hi;
    }
    rc = 0;
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i])) {
            __atomic_store_n(&b.abort, 1, __ATOMIC_RELAXED);
            rc = rs_error_set(err, RS_ENOMEM, "could only start %u of %u threads", started, n);
            break;
        }
        started++;
    }
    rs_cpu_times cpu0, cpu1;
    pthread_mutex_lock(&b.mu);
    while (b.ready < started)
        pthread_cond_wait(&b.cv, &b.mu);
    uint64_t t0 = rs_now_ns();
    uint64_t warm = ph == PHASE_RUN ? (uint64_t)(cfg->warmup_seconds * 1e9) : 0;
    b.sched_start = t0;
    b.window_start = t0 + warm;
    b.window_end =
        ph == PHASE_RUN ? b.window_start + (uint64_t)(cfg->running_seconds * 1e9) : UINT64_MAX;
    if (ph == PHASE_LOAD) rs_process_cpu(&cpu0);
    b.go = 1;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    uint64_t t_start = rs_now_ns(), t_end;
    if (ph == PHASE_RUN) {
        sleep_until(&b, b.window_start);
        rs_process_cpu(&cpu0);
        t_start = rs_now_ns();
        sleep_until(&b, b.window_end);
        rs_process_cpu(&cpu1);
        t_end = rs_now_ns();
        if (t_end > b.window_end) t_end = b.window_end;
        for (unsigned i = 0; i < started; i++)
            pthread_join(ws[i].thread, NULL);
    } else {
        for (unsigned i = 0; i < started; i++)
            pthread_join(ws[i].thread, NULL);
        rs_process_cpu(&cpu1);
        t_end = rs_now_ns();
    }
    res->stopped_early = stop_requested(&b);
    res->runtime_s = t_end > t_start ? (double)(t_end - t_start) / 1e9 : 0.0;
    rs_cpu_times d = rs_cpu_delta(cpu0, cpu1);
    res->cpu_user_s = d.user_s;
    res->cpu_sys_s = d.sys_s;

    rs_hist *h = malloc(sizeof *h);
    if (h) rs_hist_reset(h);
    res->open_loop = ph == PHASE_RUN && cfg->target_rate > 0;
    rs_hist *sh = res->open_loop ? malloc(sizeof *sh) : NULL;
    if (sh) rs_hist_reset(sh);
    int bad_worker = -1;
    uint64_t prof[6] = {0};
    for (unsigned i = 0; i < started; i++) {
        worker *w = &ws[i];
        if (i == 0 || w->batches < res->thread_batches_min) res->thread_batches_min = w->batches;
        if (w->batches > res->thread_batches_max) res->thread_batches_max = w->batches;
        res->batches += w->batches;
        res->key_ops += w->key_ops;
        res->get_batches += w->get_batches;
        res->get_parts += w->get_parts;
        res->get_parts_gathered += w->get_parts_gathered;
        res->put_batches += w->put_batches;
        res->keys_found += w->found;
        res->keys_missing += w->missing;
        res->verify_checked_rows += w->checked;
        res->verify_bad_rows += w->bad;
        prof[0] += w->prof_make_ns;
        prof[1] += w->prof_submit_ns;
        prof[2] += w->prof_wait_ns;
        prof[3] += w->prof_consume_ns;
        prof[4] += w->prof_submits;
        prof[5] += w->prof_waits;
        if (w->bad && bad_worker < 0) bad_worker = (int)i;
        if (h) rs_hist_merge(h, &w->hist);
        if (sh) rs_hist_merge(sh, &w->service_hist);
        res->late_sends += w->late_sends;
        res->budget.budget = w->budget.budget;
        res->budget.deferred += w->budget.deferred;
        res->wait_counted |= w->wait_counted;
        res->wait.spun += w->wait.spun;
        res->wait.blocked += w->wait.blocked;
        res->wait.quick += w->wait.quick;
        res->wait.unspun += w->wait.unspun;
        res->wait.preempted += w->wait.preempted;
        if (w->rc && !rc) {
            rc = w->rc;
            if (err) *err = w->err;
        }
    }
    if (prof[4]) {
        res->make_keys_avg_ns = (double)prof[0] / (double)prof[4];
        res->submit_avg_ns = (double)prof[1] / (double)prof[4];
    }
    if (prof[5]) {
        res->wait_avg_ns = (double)prof[2] / (double)prof[5];
        res->consume_avg_ns = (double)prof[3] / (double)prof[5];
    }
    if (h) {
        res->mean_us = rs_hist_mean(h) / 1e3;
        res->p50_us = (double)rs_hist_percentile(h, 50) / 1e3;
        res->p95_us = (double)rs_hist_percentile(h, 95) / 1e3;
        res->p99_us = (double)rs_hist_percentile(h, 99) / 1e3;
        res->p999_us = (double)rs_hist_percentile(h, 99.9) / 1e3;
        res->max_us = h->count ? (double)h->max / 1e3 : 0.0;
        if (cfg->hist_out) *cfg->hist_out = *h;
        free(h);
    }
    if (sh) {
        res->service = rs_hist_summary_us(sh);
        if (cfg->service_hist_out) *cfg->service_hist_out = *sh;
        free(sh);
    }
    if (!rc && bad_worker >= 0) {
        res->first_bad_key = ws[bad_worker].first_bad_key;
        rc = rs_error_set(
            err, RS_EVERIFY, "verification failed: %llu of %llu rows wrong; first: %s",
            (unsigned long long)res->verify_bad_rows, (unsigned long long)res->verify_checked_rows,
            ws[bad_worker].first_bad_msg);
    }
    if (!rc && cfg->verify && res->keys_missing) {
        rc = rs_error_set(err, RS_EVERIFY, "verification failed: %llu loaded keys were missing",
                          (unsigned long long)res->keys_missing);
    }
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    free(ws);
    return rc;
}

int rs_ps_bench_load(const rs_ps_bench_config *cfg, rs_ps_bench_result *res, rs_error *err) {
    return bench_phase(cfg, PHASE_LOAD, res, err);
}

int rs_ps_bench_run(const rs_ps_bench_config *cfg, rs_ps_bench_result *res, rs_error *err) {
    return bench_phase(cfg, PHASE_RUN, res, err);
}
