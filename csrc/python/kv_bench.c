/*
 * kv_bench.c — recbench._kv.kv_bench(**config): runs benchmark_kv_engine's load and run phases
 * (csrc/kv/kv_bench.c) with the GIL released and returns their results as a dict. The engine is
 * opened here (capacity = record_count) and closed before returning; the ceiling read mode uses
 * no engine. recbench/kv_bench.py turns the dict into RecStore's YCSB_LOAD_RESULT / YCSB_RESULT
 * lines.
 */
#include "py_common.h"

#include <string.h>

#include "recstore/kv_bench.h"

static PyObject *hist_dict(const rs_hist *h) {
    return Py_BuildValue(
        "{s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "count", (unsigned long long)h->count, "mean_us",
        rs_hist_mean(h) / 1e3, "p50_us", (double)rs_hist_percentile(h, 50) / 1e3, "p95_us",
        (double)rs_hist_percentile(h, 95) / 1e3, "p99_us", (double)rs_hist_percentile(h, 99) / 1e3,
        "p999_us", (double)rs_hist_percentile(h, 99.9) / 1e3, "max_us",
        h->count ? (double)h->max / 1e3 : 0.0, "min_us", h->count ? (double)h->min / 1e3 : 0.0);
}

static PyObject *phase_dict(const rs_kv_bench_phase *p) {
    rs_hist *all = malloc(sizeof *all);
    if (!all) return PyErr_NoMemory();
    rs_hist_reset(all);
    rs_hist_merge(all, &p->read);
    rs_hist_merge(all, &p->update);
    PyObject *d = Py_BuildValue(
        "{s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:N,s:N,s:N,s:N}", "seconds", p->seconds, "ops",
        (unsigned long long)p->ops, "read_ops", (unsigned long long)p->read_ops, "update_ops",
        (unsigned long long)p->update_ops, "batches", (unsigned long long)p->batches, "not_found",
        (unsigned long long)p->not_found, "out_bytes", (unsigned long long)p->out_bytes,
        "throughput_ops_sec", p->seconds > 0 ? (double)p->ops / p->seconds : 0.0, "cpu_user_s",
        p->cpu_user_s, "cpu_sys_s", p->cpu_sys_s, "read", hist_dict(&p->read), "update",
        hist_dict(&p->update), "all", hist_dict(all), "paired", hist_dict(&p->paired));
    free(all);
    return d;
}

static PyObject *kv_bench_run(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"index_type",
                             "value_size",
                             "record_count",
                             "threads",
                             "load_threads",
                             "workload",
                             "distribution",
                             "zipfian_alpha",
                             "read_mode",
                             "batch_keys",
                             "running_seconds",
                             "operation_count",
                             "seed",
                             "bind_core",
                             "path",
                             "load",
                             "run",
                             "huge_pages",
                             "row_kernel",
                             "ceiling_index_lines",
                             "ceiling_index_bytes",
                             "paired_ceiling",
                             "out_buffers",
                             NULL};
    const char *index_type = "DRAM_PET_HASH", *workload = "c", *distribution = "uniform",
               *read_mode = "batch_get_flat", *path = NULL, *huge = "auto", *kernel = "auto";
    unsigned int value_size = 128, threads = 1, load_threads = 0, batch_keys = 500, index_lines = 0,
                 out_buffers = 1;
    unsigned long long record_count = 100000, operation_count = 0, seed = 1, index_bytes = 0;
    double zipfian_alpha = 0.99, running_seconds = 0;
    int bind_core = 0, do_load = 1, do_run = 1, paired = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "|sIKIIssdsIdKKpzppssIKpI:kv_bench", kwlist, &index_type, &value_size,
            &record_count, &threads, &load_threads, &workload, &distribution, &zipfian_alpha,
            &read_mode, &batch_keys, &running_seconds, &operation_count, &seed, &bind_core, &path,
            &do_load, &do_run, &huge, &kernel, &index_lines, &index_bytes, &paired, &out_buffers))
        return NULL;
    rs_kv_bench_config cfg = {
        .record_count = record_count,
        .value_size = value_size,
        .threads = threads,
        .load_threads = load_threads,
        .workload = workload[0] && !workload[1] ? workload[0] : '?',
        .zipfian_alpha = zipfian_alpha,
        .batch_keys = batch_keys,
        .running_seconds = running_seconds,
        .operation_count = operation_count,
        .seed = seed,
        .bind_core = bind_core,
        .ceiling_index_lines = index_lines,
        .ceiling_index_bytes = index_bytes,
        .paired_ceiling = paired,
        .out_buffers = out_buffers,
    };
    if (strcmp(distribution, "uniform") == 0)
        cfg.distribution = RS_KV_BENCH_UNIFORM;
    else if (strcmp(distribution, "zipfian") == 0)
        cfg.distribution = RS_KV_BENCH_ZIPFIAN;
    else
        return PyErr_Format(PyExc_ValueError, "distribution must be uniform or zipfian, got '%s'",
                            distribution);
    if (strcmp(read_mode, "get") == 0)
        cfg.read_mode = RS_KV_BENCH_GET;
    else if (strcmp(read_mode, "batch_get_flat") == 0)
        cfg.read_mode = RS_KV_BENCH_BATCH;
    else if (strcmp(read_mode, "ceiling") == 0)
        cfg.read_mode = RS_KV_BENCH_CEILING;
    else
        return PyErr_Format(PyExc_ValueError,
                            "read_mode must be get, batch_get_flat or ceiling, got '%s'",
                            read_mode);
    rs_error err = {0};
    rs_kv_config kcfg = {.value_size = value_size, .capacity = record_count, .path = path};
    int rc = rs_kv_huge_pages_parse(huge, &kcfg.huge_pages, &err);
    if (rc) return PyErr_Format(PyExc_ValueError, "huge_pages: %s", err.msg);
    cfg.huge_pages = kcfg.huge_pages;
    /* the row kernel is process-wide: chosen for this run, back to the CPU's best afterwards */
    if ((rc = rs_kv_row_kernel_select(kernel, &err))) return rs_py_raise(rc, "row_kernel", &err);
    const char *kernel_used = rs_kv_row_kernel();
    rs_kv_memory mem = {0};
    double rows_huge = -1.0;
    if (cfg.read_mode != RS_KV_BENCH_CEILING) {
        rc = rs_kv_index_type_parse(index_type, &kcfg.index_type, &err);
        if (rc) return PyErr_Format(PyExc_ValueError, "index_type: %s", err.msg);
    }
    rs_kv_bench_phase *lp = calloc(1, sizeof *lp), *rp = calloc(1, sizeof *rp);
    PyObject *ret = NULL;
    const char *failed = NULL;
    rs_kv *kv = NULL;
    rs_kv_bench *b = NULL;
    if (!lp || !rp) {
        PyErr_NoMemory();
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS if (cfg.read_mode != RS_KV_BENCH_CEILING) {
        rc = rs_kv_open(&kcfg, &kv, &err);
        if (rc) failed = "rs_kv_open";
        cfg.kv = kv;
    }
    if (!rc) {
        rc = rs_kv_bench_open(&cfg, &b, &err);
        if (rc) failed = "rs_kv_bench_open";
    }
    if (!rc && do_load) {
        rc = rs_kv_bench_load(b, lp, &err);
        if (rc) failed = "rs_kv_bench_load";
    }
    if (!rc && do_run) {
        rc = rs_kv_bench_run(b, rp, &err);
        if (rc) failed = "rs_kv_bench_run";
    }
    if (b) {
        rs_kv_bench_memory(b, &mem);
        rows_huge = rs_kv_bench_rows_huge_share(b);
    }
    rs_kv_bench_close(b);
    rs_kv_close(kv);
    rs_kv_row_kernel_select("auto", NULL);
    Py_END_ALLOW_THREADS if (rc) {
        rs_py_raise(rc, failed, &err);
        goto out;
    }
    PyObject *l = do_load ? phase_dict(lp) : (Py_INCREF(Py_None), Py_None);
    PyObject *r = do_run ? phase_dict(rp) : (Py_INCREF(Py_None), Py_None);
    PyObject *m = Py_BuildValue(
        "{s:K,s:K,s:K,s:I,s:I,s:d,s:d,s:s,s:s}", "capacity", (unsigned long long)mem.capacity,
        "index_bytes", (unsigned long long)mem.index_bytes, "slab_bytes_at_capacity",
        (unsigned long long)mem.slab_bytes_at_capacity, "row_bytes", mem.row_bytes, "row_stride",
        mem.row_stride, "bytes_per_key", mem.bytes_per_key, "overhead_per_key",
        mem.overhead_per_key, "index_pages", mem.index_pages ? mem.index_pages : "?", "slab_pages",
        mem.slab_pages ? mem.slab_pages : "?");
    if (l && r && m)
        ret = Py_BuildValue("{s:N,s:N,s:N,s:s,s:d}", "load", l, "run", r, "memory", m, "row_kernel",
                            kernel_used, "rows_huge_share", rows_huge);
    else {
        Py_XDECREF(l);
        Py_XDECREF(r);
        Py_XDECREF(m);
    }
out:
    free(lp);
    free(rp);
    return ret;
}

static PyMethodDef kv_bench_methods[] = {
    {"kv_bench", (PyCFunction)(void (*)(void))kv_bench_run, METH_VARARGS | METH_KEYWORDS,
     "kv_bench(index_type, value_size, record_count, threads, load_threads, workload, "
     "distribution, zipfian_alpha, read_mode, batch_keys, running_seconds, operation_count, seed, "
     "bind_core, path, load, run, huge_pages, row_kernel, ceiling_index_lines, "
     "ceiling_index_bytes, paired_ceiling, out_buffers) -> {'load': "
     "phase|None, "
     "'run': phase|None, 'memory': {...}, 'row_kernel': name, 'rows_huge_share': 0..1 or -1}"},
    {NULL, NULL, 0, NULL},
};

int kv_bench_module_init(PyObject *m) {
    return PyModule_AddFunctions(m, kv_bench_methods);
}
