/*
 * driver.c — the YCSB thread driver: opens the binding once, makes one context and one workload
 * generator per thread, runs the load phase (each thread inserts a contiguous slice of keynums
 * 0..recordcount-1) and the run phase (operationcount operations split evenly), and measures.
 *
 * Timing: all threads of a phase wait at a start gate; the phase clock starts when the main thread
 * opens it and stops when the last worker has been joined. Every operation is timed with
 * rs_now_ns into the thread's own histograms; the only shared write on the hot path is the run
 * phase's insert counter. Process CPU time (getrusage, so engine background threads count) is
 * taken around each phase. With status on, a reporter thread prints YCSB-style lines every
 * status.interval seconds from the threads' relaxed-atomic operation counters.
 *
 * -target N (property target): every thread runs on its own timetable of N / threadcount
 * operations per second (recstore/pacing.h; uniform spacing as YCSB's throttle, or ycsb.arrival =
 * poisson) and waits for each operation's due time before starting it; a batch read of n keys takes
 * n entries. measurement.interval picks what is recorded: the op latency from the actual start,
 * the Intended- latency from the due time (what a client arriving on schedule would have seen:
 * a slow operation delays the next ones and they are charged for it), or both (the default with
 * a target). An operation due while its thread was still busy with the previous one is a late send.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recstore/clock.h"
#include "recstore/pacing.h"
#include "workload.h"

typedef struct worker {
    pthread_t tid;
    int id;
    int phase; /* 0 load, 1 run */
    struct shared *sh;
    void *db_ctx;
    rs_ycsb_wthread gen;
    rs_ycsb_measure m;
    rs_ycsb_result res;
    uint64_t begin, end; /* load: keynum slice; run: operation target */
    uint64_t errors;
    rs_pacing pc;        /* -target */
    int paced;           /* this phase runs on pc */
    uint64_t due;        /* intended start of the current top-level operation */
    uint64_t busy_until; /* when the previous top-level operation ended */
    rs_ycsb_measure im;  /* Intended- latencies */
    uint64_t late_sends;
    rs_error first_err;
    rs_error op_err;
    /* batch read scratch */
    char *bkeys;
    const char **bkptr;
    size_t *bklen;
    uint8_t *bfound;
} worker;

typedef struct shared {
    const rs_ycsb_workload *w;
    const rs_ycsb_db_ops *ops;
    rs_ycsb_ack_counter *ack;
    pthread_mutex_t gate_mu; /* start gate: workers wait until go (or abort) */
    pthread_cond_t gate_cv;
    int go, abort_phase;
    volatile int stop_status;
    pthread_mutex_t status_mu;
    pthread_cond_t status_cv;
    worker *workers;
    int nthreads;
    uint64_t phase_start_ns;
    const char *phase_name;
} shared;

/* Record one operation's outcome (it ran from t0 to t1); `top` marks an operation the driver
 * issued itself (not the READ or UPDATE inside a read-modify-write), which also goes into the ALL
 * histogram. Latency from the actual start and/or, per measurement.interval, from the intended one
 * (the due time when paced, else t0). */
static void note_result(worker *wk, rs_ycsb_op op, int rc, uint64_t t0, uint64_t t1, int top) {
    rs_ycsb_status st = rs_ycsb_status_of(rc);
    int interval = wk->sh->w->interval;
    if (interval != RS_YCSB_INTERVAL_INTENDED) {
        rs_ycsb_measure_record(&wk->m, op, st, t1 - t0);
        if (top) rs_ycsb_measure_record(&wk->m, RS_YCSB_OP_ALL, RS_YCSB_ST_OK, t1 - t0);
    }
    if (interval != RS_YCSB_INTERVAL_OP) {
        uint64_t start = wk->paced ? wk->due : t0;
        rs_ycsb_measure_record(&wk->im, op, st, t1 - start);
        if (top) rs_ycsb_measure_record(&wk->im, RS_YCSB_OP_ALL, RS_YCSB_ST_OK, t1 - start);
    }
    if (top) wk->busy_until = t1;
    if (st == RS_YCSB_ST_ERROR) {
        if (wk->errors++ == 0) {
            wk->first_err.code = rc;
            snprintf(wk->first_err.msg, sizeof wk->first_err.msg, "%s %s: %s", rs_ycsb_op_name(op),
                     wk->gen.key, wk->op_err.msg[0] ? wk->op_err.msg : rs_strerror(rc));
        }
    }
    wk->op_err.msg[0] = 0;
}

/* -target: wait for the due time of the next operation (n entries of the timetable for a batch of
 * n), which becomes its intended start; late when the previous one ended after it. */
static void pace(worker *wk, uint64_t n) {
    if (!wk->paced) return;
    uint64_t due = rs_pacing_due(&wk->pc);
    if (due > rs_now_ns()) rs_pacing_sleep_until(due);
    wk->due = rs_pacing_take(&wk->pc);
    for (uint64_t i = 1; i < n; i++)
        rs_pacing_take(&wk->pc);
    wk->late_sends += (uint64_t)rs_pacing_note_send(&wk->pc, wk->due, wk->busy_until);
}

static inline void count_ops(worker *wk, uint64_t n) {
    __atomic_store_n(&wk->m.ops_done, wk->m.ops_done + n, __ATOMIC_RELAXED);
}

static void do_insert(worker *wk, uint64_t keynum) {
    const rs_ycsb_workload *w = wk->sh->w;
    const rs_ycsb_field *vals;
    size_t n;
    rs_ycsb_build_key(&wk->gen, keynum);
    rs_ycsb_build_values(&wk->gen, 1, &vals, &n);
    uint64_t t0 = rs_now_ns();
    int rc =
        wk->sh->ops->insert(wk->db_ctx, w->table, wk->gen.key, wk->gen.klen, vals, n, &wk->op_err);
    note_result(wk, RS_YCSB_OP_INSERT, rc, t0, rs_now_ns(), 1);
}

static int do_read(worker *wk, uint64_t last, int top) {
    const rs_ycsb_workload *w = wk->sh->w;
    rs_ycsb_fieldset fs;
    rs_ycsb_build_key(&wk->gen, rs_ycsb_next_keynum(&wk->gen, last));
    rs_ycsb_read_fields(&wk->gen, w->readallfields, &fs);
    rs_ycsb_result_reset(&wk->res);
    uint64_t t0 = rs_now_ns();
    int rc = wk->sh->ops->read(wk->db_ctx, w->table, wk->gen.key, wk->gen.klen, &fs, &wk->res,
                               &wk->op_err);
    note_result(wk, RS_YCSB_OP_READ, rc, t0, rs_now_ns(), top);
    return rc;
}

static int do_update_key(worker *wk, int top) {
    const rs_ycsb_workload *w = wk->sh->w;
    const rs_ycsb_field *vals;
    size_t n;
    rs_ycsb_build_values(&wk->gen, w->writeallfields, &vals, &n);
    uint64_t t0 = rs_now_ns();
    int rc =
        wk->sh->ops->update(wk->db_ctx, w->table, wk->gen.key, wk->gen.klen, vals, n, &wk->op_err);
    note_result(wk, RS_YCSB_OP_UPDATE, rc, t0, rs_now_ns(), top);
    return rc;
}

static uint64_t do_batch_read(worker *wk, uint64_t last, uint64_t n) {
    const rs_ycsb_workload *w = wk->sh->w;
    for (uint64_t i = 0; i < n; i++) {
        char *k = wk->bkeys + i * RS_YCSB_KEY_MAX;
        rs_ycsb_build_key_into(w, rs_ycsb_next_keynum(&wk->gen, last), k, &wk->bklen[i]);
        wk->bkptr[i] = k;
    }
    rs_ycsb_fieldset fs;
    rs_ycsb_read_fields(&wk->gen, w->readallfields, &fs);
    rs_ycsb_result_reset(&wk->res);
    uint64_t t0 = rs_now_ns();
    int rc = wk->sh->ops->batch_read(wk->db_ctx, w->table, wk->bkptr, wk->bklen, n, &fs, &wk->res,
                                     wk->bfound, &wk->op_err);
    uint64_t t1 = rs_now_ns();
    if (rc == RS_OK) /* a batch is OK when it ran; misses are counted per key */
        for (uint64_t i = 0; i < n; i++)
            if (!wk->bfound[i]) rc = RS_ENOTFOUND;
    snprintf(wk->gen.key, sizeof wk->gen.key, "%s", wk->bkptr[0]);
    note_result(wk, RS_YCSB_OP_BATCH_READ, rc, t0, t1, 1);
    return n;
}

static void run_ops(worker *wk) {
    shared *sh = wk->sh;
    const rs_ycsb_workload *w = sh->w;
    uint64_t done = 0, target = wk->end;
    while (done < target) {
        rs_ycsb_wop op = rs_ycsb_next_op(&wk->gen);
        uint64_t n = 1;
        if (op == RS_WOP_READ && w->batch) {
            uint64_t left = target - done;
            n = left < w->batch_size ? left : w->batch_size;
        }
        pace(wk, n);
        uint64_t last = rs_ycsb_ack_counter_last(sh->ack);
        switch (op) {
        case RS_WOP_READ:
            if (w->batch) {
                do_batch_read(wk, last, n);
            } else {
                do_read(wk, last, 1);
            }
            break;
        case RS_WOP_UPDATE:
            rs_ycsb_build_key(&wk->gen, rs_ycsb_next_keynum(&wk->gen, last));
            do_update_key(wk, 1);
            break;
        case RS_WOP_INSERT: {
            uint64_t k = rs_ycsb_ack_counter_next(sh->ack);
            do_insert(wk, k);
            rs_ycsb_ack_counter_ack(sh->ack, k);
            break;
        }
        case RS_WOP_SCAN: {
            rs_ycsb_fieldset fs;
            rs_ycsb_build_key(&wk->gen, rs_ycsb_next_keynum(&wk->gen, last));
            uint32_t len = rs_ycsb_next_scan_length(&wk->gen);
            rs_ycsb_read_fields(&wk->gen, w->readallfields, &fs);
            rs_ycsb_result_reset(&wk->res);
            uint64_t t0 = rs_now_ns();
            int rc = sh->ops->scan(wk->db_ctx, w->table, wk->gen.key, wk->gen.klen, len, &fs,
                                   &wk->res, &wk->op_err);
            note_result(wk, RS_YCSB_OP_SCAN, rc, t0, rs_now_ns(), 1);
            break;
        }
        case RS_WOP_RMW: {
            uint64_t t0 = rs_now_ns();
            int rc = do_read(wk, last, 0);
            if (rc == RS_OK) rc = do_update_key(wk, 0);
            note_result(wk, RS_YCSB_OP_RMW, rc, t0, rs_now_ns(), 1);
            break;
        }
        }
        done += n;
        count_ops(wk, n);
    }
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    shared *sh = wk->sh;
    pthread_mutex_lock(&sh->gate_mu);
    while (!sh->go && !sh->abort_phase)
        pthread_cond_wait(&sh->gate_cv, &sh->gate_mu);
    int abort_phase = sh->abort_phase;
    pthread_mutex_unlock(&sh->gate_mu);
    if (abort_phase) return NULL;
    if (wk->paced) rs_pacing_thread_setup();
    if (wk->phase == 0) {
        for (uint64_t k = wk->begin; k < wk->end; k++) {
            pace(wk, 1);
            do_insert(wk, k);
            count_ops(wk, 1);
        }
    } else {
        run_ops(wk);
    }
    return NULL;
}

static void print_status(shared *sh, uint64_t now, uint64_t *prev_ops, uint64_t *prev_ns) {
    uint64_t ops = 0;
    for (int i = 0; i < sh->nthreads; i++)
        ops += __atomic_load_n(&sh->workers[i].m.ops_done, __ATOMIC_RELAXED);
    double el = (double)(now - sh->phase_start_ns) / 1e9;
    double dt = (double)(now - *prev_ns) / 1e9;
    double cur = dt > 0 ? (double)(ops - *prev_ops) / dt : 0;
    time_t t = time(NULL);
    struct tm tm;
    char ts[32];
    localtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    printf("%s %d sec: %llu operations; %.1f current ops/sec [%s]\n", ts, (int)(el + 0.5),
           (unsigned long long)ops, cur, sh->phase_name);
    fflush(stdout);
    *prev_ops = ops;
    *prev_ns = now;
}

static void *status_main(void *arg) {
    shared *sh = arg;
    uint64_t prev_ops = 0, prev_ns = sh->phase_start_ns;
    pthread_mutex_lock(&sh->status_mu);
    while (!sh->stop_status) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)sh->w->status_interval_s;
        pthread_cond_timedwait(&sh->status_cv, &sh->status_mu, &dl);
        if (sh->stop_status) break;
        print_status(sh, rs_now_ns(), &prev_ops, &prev_ns);
    }
    pthread_mutex_unlock(&sh->status_mu);
    print_status(sh, rs_now_ns(), &prev_ops, &prev_ns); /* the final line, as YCSB prints */
    return NULL;
}

/* Release the `started` threads waiting at the start gate without running the phase; join them. */
static void abort_at_gate(shared *sh, int started) {
    pthread_mutex_lock(&sh->gate_mu);
    sh->abort_phase = 1;
    pthread_cond_broadcast(&sh->gate_cv);
    pthread_mutex_unlock(&sh->gate_mu);
    for (int i = 0; i < started; i++)
        pthread_join(sh->workers[i].tid, NULL);
}

static int run_phase(shared *sh, int phase, int status, rs_ycsb_phase_report *rep, rs_error *err) {
    const rs_ycsb_workload *w = sh->w;
    int n = sh->nthreads;
    uint64_t total = phase == 0 ? w->recordcount : w->operationcount;
    for (int i = 0; i < n; i++) {
        worker *wk = &sh->workers[i];
        wk->phase = phase;
        uint64_t per = total / (uint64_t)n, extra = total % (uint64_t)n;
        uint64_t lo = per * (uint64_t)i + ((uint64_t)i < extra ? (uint64_t)i : extra);
        uint64_t cnt = per + ((uint64_t)i < extra ? 1 : 0);
        wk->begin = phase == 0 ? lo : 0;
        wk->end = phase == 0 ? lo + cnt : cnt;
        rs_ycsb_measure_free(&wk->m);
        rs_ycsb_measure_init(&wk->m);
        rs_ycsb_measure_free(&wk->im);
        rs_ycsb_measure_init(&wk->im);
        wk->late_sends = wk->busy_until = 0;
        wk->paced = 0;
        wk->errors = 0;
        wk->first_err = (rs_error){0};
    }
    sh->go = sh->abort_phase = 0;
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&sh->workers[started].tid, NULL, worker_main, &sh->workers[started]))
            break;
    if (started < n) {
        abort_at_gate(sh, started);
        return rs_error_set(err, RS_ENOMEM, "cannot start YCSB thread %d of %d", started, n);
    }
    sh->phase_name = phase == 0 ? "LOAD" : "RUN";
    sh->stop_status = 0;
    pthread_t st;
    int have_status = 0;
    rs_cpu_times c0, c1;
    rs_process_cpu(&c0);
    sh->phase_start_ns = rs_now_ns();
    for (int i = 0; i < n && w->target > 0; i++) {
        worker *wk = &sh->workers[i];
        /* threads start at the gate below: the timetable starts now */
        int rc = rs_pacing_init(&wk->pc, (rs_pacing_arrival)w->arrival, w->target, (uint32_t)i,
                                (uint32_t)n, sh->phase_start_ns, w->seed + 0x7ace, err);
        if (rc) { /* rs_ycsb_workload_parse checked the rate; this is for a changed caller */
            abort_at_gate(sh, n);
            return rc;
        }
        wk->paced = 1;
    }
    if (status && pthread_create(&st, NULL, status_main, sh) == 0) have_status = 1;
    uint64_t t0 = rs_now_ns();
    pthread_mutex_lock(&sh->gate_mu);
    sh->go = 1;
    pthread_cond_broadcast(&sh->gate_cv);
    pthread_mutex_unlock(&sh->gate_mu);
    for (int i = 0; i < n; i++)
        pthread_join(sh->workers[i].tid, NULL);
    uint64_t t1 = rs_now_ns();
    rs_process_cpu(&c1);
    if (have_status) {
        pthread_mutex_lock(&sh->status_mu);
        sh->stop_status = 1;
        pthread_cond_signal(&sh->status_cv);
        pthread_mutex_unlock(&sh->status_mu);
        pthread_join(st, NULL);
    }

    rep->ran = 1;
    rep->runtime_s = (double)(t1 - t0) / 1e9;
    rs_cpu_times d = rs_cpu_delta(c0, c1);
    rep->cpu_user_s = d.user_s;
    rep->cpu_sys_s = d.sys_s;
    rs_ycsb_measure_init(&rep->merged);
    rs_ycsb_measure_init(&rep->intended);
    for (int i = 0; i < n; i++) {
        worker *wk = &sh->workers[i];
        if (rs_ycsb_measure_merge(&rep->merged, &wk->m) ||
            rs_ycsb_measure_merge(&rep->intended, &wk->im))
            return rs_error_set(err, RS_ENOMEM, "out of memory merging histograms");
        rep->late_sends += wk->late_sends;
        if (wk->errors && !rep->errors)
            snprintf(rep->first_error, sizeof rep->first_error, "%s", wk->first_err.msg);
        rep->errors += wk->errors;
    }
    rep->operations = rep->merged.ops_done;
    rep->throughput = rep->runtime_s > 0 ? (double)rep->operations / rep->runtime_s : 0;
    return RS_OK;
}

int rs_ycsb_execute(const rs_ycsb_options *opt, rs_ycsb_report *rep, rs_error *err) {
    rs_ycsb_workload w;
    shared sh = {0};
    void *db = NULL;
    int rc, nctx = 0;
    memset(rep, 0, sizeof *rep);
    if ((rc = rs_ycsb_workload_parse(opt->props, &w, err))) return rc;
    if ((rc = rs_ycsb_db_find(opt->db, &sh.ops, err))) goto out_w;
    rep->threads = w.threads;
    rep->seed = w.seed;
    rep->hdr = w.hdr;
    rep->target = w.target;
    rep->arrival = rs_pacing_arrival_name((rs_pacing_arrival)w.arrival);
    rep->interval = w.interval;
    sh.w = &w;
    sh.nthreads = w.threads;
    pthread_mutex_init(&sh.status_mu, NULL);
    pthread_cond_init(&sh.status_cv, NULL);
    pthread_mutex_init(&sh.gate_mu, NULL);
    pthread_cond_init(&sh.gate_cv, NULL);
    if ((rc = rs_ycsb_ack_counter_new(w.recordcount, &sh.ack))) {
        rs_error_set(err, rc, "out of memory for the insert counter");
        goto out_sync;
    }
    sh.workers = calloc((size_t)w.threads, sizeof *sh.workers);
    if (!sh.workers) {
        rc = rs_error_set(err, RS_ENOMEM, "out of memory for %d threads", w.threads);
        goto out_ack;
    }
    if ((rc = sh.ops->open(opt->props, &db, err))) {
        rs_error_prefix(err, "db %s", sh.ops->name);
        goto out_workers;
    }
    for (; nctx < w.threads; nctx++) {
        worker *wk = &sh.workers[nctx];
        wk->id = nctx;
        wk->sh = &sh;
        rs_ycsb_result_init(&wk->res);
        rs_ycsb_measure_init(&wk->m);
        rs_ycsb_measure_init(&wk->im);
        if ((rc = rs_ycsb_wthread_init(&wk->gen, &w, nctx))) {
            rs_error_set(err, rc, "out of memory for thread %d", nctx);
            goto out_ctx;
        }
        size_t bn = w.batch ? w.batch_size : 1;
        wk->bkeys = malloc(bn * RS_YCSB_KEY_MAX);
        wk->bkptr = malloc(bn * sizeof *wk->bkptr);
        wk->bklen = malloc(bn * sizeof *wk->bklen);
        wk->bfound = malloc(bn);
        if (!wk->bkeys || !wk->bkptr || !wk->bklen || !wk->bfound) {
            rc = rs_error_set(err, RS_ENOMEM, "out of memory for thread %d", nctx);
            nctx++;
            goto out_ctx;
        }
        if ((rc = sh.ops->thread_init(db, nctx, &wk->db_ctx, err))) {
            rs_error_prefix(err, "db %s thread %d", sh.ops->name, nctx);
            nctx++;
            goto out_ctx;
        }
    }
    if (opt->do_load && (rc = run_phase(&sh, 0, opt->status, &rep->load, err))) goto out_ctx;
    if (opt->do_run && (rc = run_phase(&sh, 1, opt->status, &rep->run, err))) goto out_ctx;
out_ctx:
    for (int i = 0; i < nctx; i++) {
        worker *wk = &sh.workers[i];
        if (wk->db_ctx) sh.ops->thread_cleanup(wk->db_ctx);
        rs_ycsb_wthread_free(&wk->gen);
        rs_ycsb_measure_free(&wk->m);
        rs_ycsb_measure_free(&wk->im);
        rs_ycsb_result_free(&wk->res);
        free(wk->bkeys);
        free((void *)wk->bkptr);
        free(wk->bklen);
        free(wk->bfound);
    }
    sh.ops->close(db);
out_workers:
    free(sh.workers);
out_ack:
    rs_ycsb_ack_counter_free(sh.ack);
out_sync:
    pthread_cond_destroy(&sh.status_cv);
    pthread_mutex_destroy(&sh.status_mu);
    pthread_cond_destroy(&sh.gate_cv);
    pthread_mutex_destroy(&sh.gate_mu);
out_w:
    rs_ycsb_workload_free(&w);
    return rc;
}

void rs_ycsb_report_free(rs_ycsb_report *rep) {
    rs_ycsb_measure_free(&rep->load.merged);
    rs_ycsb_measure_free(&rep->run.merged);
    rs_ycsb_measure_free(&rep->load.intended);
    rs_ycsb_measure_free(&rep->run.intended);
}
