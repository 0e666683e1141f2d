/*
 * ps_bench_funcs.c — recbench._ps bench functions: bench_load / bench_run (the C loops of
 * ps_bench, GIL released for the whole phase), bench_stop / bench_clear_stop (a flag the loops
 * poll, set from a Python signal handler), bench_row (the deterministic row of a key).
 *
 * Both phases take the same keyword arguments:
 *   transport, endpoints [(host, port) per shard], value_size, prefetch_depth, timeout_ms, extra,
 *   mode, record_count, batch_keys, threads, load_threads, running_seconds, warmup_seconds,
 *   distribution ("uniform" | "zipfian"), zipfian_alpha, read_ratio, fetch_key_space, verify, seed,
 *   profile, target_rate (batches/s of the run phase; 0 = closed loop), arrival ("uniform" |
 *   "poisson"), arrival_seed, auth_token_file, hash_method, max_inflight_bytes (the process's
 *   budget of bytes in flight; 0 = the transport's default, 2**64 - 1 = none), rows_in_slots (run
 *   phase: GET rows into the client's row buffers, rdma/shm with rows_buffers >= prefetch_depth)
 * and return a dict of results (runtime_s, batches, key_ops, latency percentiles in us, CPU s, and
 * "hist": the batch-latency histogram as (count, min_ns, max_ns, sum_ns, [(bucket_high_ns,
 * count), ...]) over non-empty buckets, for exact merging across clients). An open-loop run adds
 * late_sends, the service_* percentiles and "service_hist" (from the actual send; the p*_us fields
 * and "hist" are then from the due time).
 * redis_bench runs the Redis MGET baseline (redis_bench.h) with the same stop flag.
 */
#include "ps_module.h"

#include <stdlib.h>
#include <string.h>

#include "recstore/auth.h"
#include "recstore/ps_bench.h"
#include "recstore/redis_bench.h"
#include "recstore/transport.h"

static volatile int bench_stop_flag;

static PyObject *result_dict(const rs_ps_bench_result *r) {
    PyObject *d = Py_BuildValue(
        "{s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:K,s:K,s:K,s:O}",
        "runtime_s", r->runtime_s, "batches", (unsigned long long)r->batches, "key_ops",
        (unsigned long long)r->key_ops, "get_batches", (unsigned long long)r->get_batches,
        "put_batches", (unsigned long long)r->put_batches, "keys_found",
        (unsigned long long)r->keys_found, "keys_missing", (unsigned long long)r->keys_missing,
        "mean_us", r->mean_us, "p50_us", r->p50_us, "p95_us", r->p95_us, "p99_us", r->p99_us,
        "p999_us", r->p999_us, "max_us", r->max_us, "cpu_user_s", r->cpu_user_s, "cpu_sys_s",
        r->cpu_sys_s, "verify_checked_rows", (unsigned long long)r->verify_checked_rows,
        "verify_bad_rows", (unsigned long long)r->verify_bad_rows, "first_bad_key",
        (unsigned long long)r->first_bad_key, "stopped_early",
        r->stopped_early ? Py_True : Py_False);
    if (!d) return NULL;
    PyObject *g =
        Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "get_parts", (unsigned long long)r->get_parts,
                      "get_parts_gathered", (unsigned long long)r->get_parts_gathered,
                      "thread_batches_min", (unsigned long long)r->thread_batches_min,
                      "thread_batches_max", (unsigned long long)r->thread_batches_max,
                      "budget_bytes", (unsigned long long)r->budget.budget, "budget_deferred",
                      (unsigned long long)r->budget.deferred);
    if (!g || PyDict_Update(d, g) != 0) {
        Py_XDECREF(g);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(g);
    PyObject *p = Py_BuildValue("{s:d,s:d,s:d,s:d}", "make_keys_avg_ns", r->make_keys_avg_ns,
                                "submit_avg_ns", r->submit_avg_ns, "wait_avg_ns", r->wait_avg_ns,
                                "consume_avg_ns", r->consume_avg_ns);
    if (!p || PyDict_Update(d, p) < 0) {
        Py_XDECREF(p);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(p);
    if (r->wait_counted) {
        p = Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}", "wait_spun", (unsigned long long)r->wait.spun,
                          "wait_blocked", (unsigned long long)r->wait.blocked, "wait_quick",
                          (unsigned long long)r->wait.quick, "wait_unspun",
                          (unsigned long long)r->wait.unspun, "wait_preempted",
                          (unsigned long long)r->wait.preempted);
        if (!p || PyDict_Update(d, p) < 0) {
            Py_XDECREF(p);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(p);
    }
    if (!r->open_loop) return d;
    p = Py_BuildValue("{s:K,s:d,s:d,s:d,s:d,s:d,s:d}", "late_sends",
                      (unsigned long long)r->late_sends, "service_mean_us", r->service.mean,
                      "service_p50_us", r->service.p50, "service_p95_us", r->service.p95,
                      "service_p99_us", r->service.p99, "service_p999_us", r->service.p999,
                      "service_max_us", r->service.max);
    if (!p || PyDict_Update(d, p) < 0) {
        Py_XDECREF(p);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(p);
    return d;
}

/* The non-empty buckets of h as (count, min_ns, max_ns, sum_ns, [(high_ns, count), ...]). */
static PyObject *hist_tuple(const rs_hist *h) {
    PyObject *buckets = PyList_New(0);
    if (!buckets) return NULL;
    for (uint32_t i = 0; i < RS_HIST_BUCKETS; i++) {
        if (!h->buckets[i]) continue;
        PyObject *b = Py_BuildValue("(KK)", (unsigned long long)rs_hist_bucket_high(i),
                                    (unsigned long long)h->buckets[i]);
        if (!b || PyList_Append(buckets, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(buckets);
            return NULL;
        }
        Py_DECREF(b);
    }
    return Py_BuildValue("(KKKdN)", (unsigned long long)h->count,
                         (unsigned long long)(h->count ? h->min : 0), (unsigned long long)h->max,
                         h->sum, buckets);
}

static int add_hist(PyObject *d, const char *name, const rs_hist *h) {
    PyObject *t = hist_tuple(h);
    if (!t) return -1;
    int rc = PyDict_SetItemString(d, name, t);
    Py_DECREF(t);
    return rc;
}

static PyObject *bench_phase(PyObject *args, PyObject *kwds, int load) {
    static char *kwlist[] = {"transport",
                             "endpoints",
                             "value_size",
                             "prefetch_depth",
                             "timeout_ms",
                             "extra",
                             "mode",
                             "record_count",
                             "batch_keys",
                             "threads",
                             "load_threads",
                             "running_seconds",
                             "warmup_seconds",
                             "distribution",
                             "zipfian_alpha",
                             "read_ratio",
                             "fetch_key_space",
                             "verify",
                             "seed",
                             "profile",
                             "target_rate",
                             "arrival",
                             "arrival_seed",
                             "auth_token_file",
                             "hash_method",
                             "max_inflight_bytes",
                             "rows_in_slots",
                             NULL};
    const char *transport, *extra = NULL, *mode = "fetch", *dist = "uniform", *arrival = "poisson";
    const char *token_file = NULL, *hash_method = NULL;
    PyObject *endpoints;
    unsigned int value_size = RS_PS_DEFAULT_VALUE_SIZE, depth = 1,
                 timeout_ms = RS_PS_DEFAULT_TIMEOUT_MS, batch_keys = RS_PS_DEFAULT_BATCH_KEYS,
                 threads = 1;
    unsigned int load_threads = 0, read_ratio = 100;
    unsigned long long record_count = 1000000, key_space = 0, seed = 0x9e3779b97f4a7c15ull;
    unsigned long long arrival_seed = 1, max_inflight = 0;
    double running = 5.0, warmup = 0.0, alpha = 0.9, target_rate = 0.0;
    int verify = 0, profile = 0, rows_in_slots = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sO|IIIzsKIIIddsdIKpKpdsKzzKp", kwlist, &transport,
                                     &endpoints, &value_size, &depth, &timeout_ms, &extra, &mode,
                                     &record_count, &batch_keys, &threads, &load_threads, &running,
                                     &warmup, &dist, &alpha, &read_ratio, &key_space, &verify,
                                     &seed, &profile, &target_rate, &arrival, &arrival_seed,
                                     &token_file, &hash_method, &max_inflight, &rows_in_slots))
        return NULL;
    rs_error err = {0};
    rs_auth_token token = {0}; /* lives until the bench returns */
    if (token_file) {
        int trc = rs_auth_token_load(token_file, &token, &err);
        if (trc) return rs_py_raise(trc, "auth_token_file", &err);
    }
    rs_ps_bench_config cfg = {.client = {.transport = transport,
                                         .value_size = value_size,
                                         .prefetch_depth = depth,
                                         .timeout_ms = timeout_ms,
                                         .extra = extra,
                                         .hash_method = hash_method,
                                         .auth = token.len ? &token : NULL,
                                         .max_inflight_bytes = max_inflight},
                              .record_count = record_count,
                              .batch_keys = batch_keys,
                              .threads = threads,
                              .load_threads = load_threads,
                              .running_seconds = running,
                              .warmup_seconds = warmup,
                              .zipfian_alpha = alpha,
                              .read_ratio = read_ratio,
                              .fetch_key_space = key_space,
                              .verify = verify,
                              .rows_in_slots = rows_in_slots,
                              .seed = seed,
                              .stop = &bench_stop_flag,
                              .profile = profile,
                              .target_rate = target_rate,
                              .arrival_seed = arrival_seed};
    int rc = rs_ps_bench_mode_parse(mode, &cfg.mode, &err);
    if (rc) return rs_py_raise(rc, "mode", &err);
    if ((rc = rs_pacing_arrival_parse(arrival, &cfg.arrival, &err)))
        return rs_py_raise(rc, "arrival", &err);
    if (strcmp(dist, "uniform") == 0) {
        cfg.zipfian = 0;
    } else if (strcmp(dist, "zipfian") == 0) {
        cfg.zipfian = 1;
    } else {
        PyErr_Format(PyExc_ValueError, "distribution '%s' is not uniform or zipfian", dist);
        return NULL;
    }
    rs_py_ps_endpoints ep;
    if (rs_py_ps_endpoints_parse(endpoints, &ep)) return NULL;
    PyObject *ret = NULL;
    rs_hist *hist = NULL, *service_hist = NULL;
    cfg.client.num_shards = ep.n;
    cfg.client.hosts = (const char *const *)ep.hosts;
    cfg.client.ports = ep.ports;
    if (!(hist = malloc(sizeof *hist))) {
        PyErr_NoMemory();
        goto out;
    }
    rs_hist_reset(hist);
    cfg.hist_out = hist;
    if (!load && target_rate > 0) {
        if (!(service_hist = malloc(sizeof *service_hist))) {
            PyErr_NoMemory();
            goto out;
        }
        rs_hist_reset(service_hist);
        cfg.service_hist_out = service_hist;
    }
    rs_ps_bench_result res;
    RS_PY_NOGIL(rc = load ? rs_ps_bench_load(&cfg, &res, &err) : rs_ps_bench_run(&cfg, &res, &err));
    memset(&token, 0, sizeof token);
    if (rc == RS_EVERIFY) {
        /* the result is complete: return it together with the failure for the caller to print */
        PyObject *d = result_dict(&res);
        if (d) {
            PyObject *msg = PyUnicode_FromString(err.msg);
            if (msg) PyDict_SetItemString(d, "verify_error", msg);
            Py_XDECREF(msg);
        }
        ret = d;
    } else if (rc) {
        rs_py_raise(rc, load ? "ps_bench load" : "ps_bench run", &err);
    } else {
        ret = result_dict(&res);
    }
    if (ret && add_hist(ret, "hist", hist) < 0) Py_CLEAR(ret);
    if (ret && res.open_loop && add_hist(ret, "service_hist", service_hist) < 0) Py_CLEAR(ret);
out:
    free(hist);
    free(service_hist);
    rs_py_ps_endpoints_free(&ep);
    return ret;
}

static PyObject *bench_load(PyObject *self, PyObject *args, PyObject *kwds) {
    (void)self;
    return bench_phase(args, kwds, 1);
}

static PyObject *bench_run(PyObject *self, PyObject *args, PyObject *kwds) {
    (void)self;
    return bench_phase(args, kwds, 0);
}

static PyObject *bench_stop(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    bench_stop_flag = 1;
    Py_RETURN_NONE;
}

static PyObject *bench_clear_stop(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    bench_stop_flag = 0;
    Py_RETURN_NONE;
}

static PyObject *bench_row(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long key;
    unsigned int vs;
    if (!PyArg_ParseTuple(args, "KI:bench_row", &key, &vs)) return NULL;
    if (vs == 0 || vs % 4 || vs > (1u << 20)) {
        PyErr_Format(PyExc_ValueError, "value_size %u must be a positive multiple of 4", vs);
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, vs);
    if (!b) return NULL;
    rs_ps_bench_row(key, vs, (float *)PyBytes_AS_STRING(b));
    return b;
}

static PyObject *redis_bench(PyObject *self, PyObject *args, PyObject *kwds) {
    (void)self;
    static char *kwlist[] = {"host",
                             "port",
                             "connections",
                             "batch_keys",
                             "record_count",
                             "value_size",
                             "running_seconds",
                             "load",
                             "verify",
                             "seed",
                             NULL};
    const char *host;
    unsigned int port, conns = 8, batch = RS_PS_DEFAULT_BATCH_KEYS, vs = RS_PS_DEFAULT_VALUE_SIZE;
    unsigned long long records = 100000, seed = 1;
    double seconds = 5.0;
    int load = 0, verify = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sI|IIKIdppK", kwlist, &host, &port, &conns,
                                     &batch, &records, &vs, &seconds, &load, &verify, &seed))
        return NULL;
    if (port == 0 || port > 65535) {
        PyErr_Format(PyExc_ValueError, "port %u is out of range", port);
        return NULL;
    }
    rs_redis_bench_config cfg = {.host = host,
                                 .port = (uint16_t)port,
                                 .connections = conns,
                                 .batch_keys = batch,
                                 .record_count = records,
                                 .value_size = vs,
                                 .running_seconds = seconds,
                                 .load = load,
                                 .verify = verify,
                                 .seed = seed,
                                 .stop = &bench_stop_flag};
    rs_redis_bench_result r;
    rs_error err = {0};
    int rc;
    RS_PY_NOGIL(rc = rs_redis_bench(&cfg, &r, &err));
    if (rc) return rs_py_raise(rc, "redis_bench", &err);
    return Py_BuildValue("{s:d,s:d,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "load_s",
                         r.load_s, "runtime_s", r.runtime_s, "batches", (unsigned long long)r.mgets,
                         "key_ops", (unsigned long long)r.key_ops, "keys_found",
                         (unsigned long long)r.keys_found, "mean_us", r.mean_us, "p50_us", r.p50_us,
                         "p95_us", r.p95_us, "p99_us", r.p99_us, "p999_us", r.p999_us, "max_us",
                         r.max_us, "cpu_user_s", r.cpu_user_s, "cpu_sys_s", r.cpu_sys_s);
}

PyMethodDef rs_py_ps_bench_methods[] = {
    {"redis_bench", (PyCFunction)(void (*)(void))redis_bench, METH_VARARGS | METH_KEYWORDS,
     "Redis MGET baseline: redis_bench(host, port, connections=8, batch_keys=500, "
     "record_count=100000, value_size=512, running_seconds=5, load=False, verify=False, seed=1)."},
    {"bench_load", (PyCFunction)(void (*)(void))bench_load, METH_VARARGS | METH_KEYWORDS,
     "Load phase of ps_bench (keys 1..record_count); returns a result dict."},
    {"bench_run", (PyCFunction)(void (*)(void))bench_run, METH_VARARGS | METH_KEYWORDS,
     "Timed run phase of ps_bench; returns a result dict (with verify_error on a bad row)."},
    {"bench_stop", bench_stop, METH_NOARGS, "Ask a running bench phase to end early."},
    {"bench_clear_stop", bench_clear_stop, METH_NOARGS, "Reset the stop request."},
    {"bench_row", bench_row, METH_VARARGS,
     "bench_row(key, value_size) -> bytes: the row ps_bench writes for key."},
    {NULL, NULL, 0, NULL},
};
