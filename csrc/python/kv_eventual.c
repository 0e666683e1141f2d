/*
 * kv_eventual.c — recbench._kv.eventual_bench(): the wait-primitive benchmark
 * (csrc/common/eventual_bench.c) behind one function call.
 *
 * The whole run happens with the GIL released: the C code touches only its own allocations and
 * the config/result structs on this function's stack.
 */
#include "py_common.h"

#include "recstore/eventual_bench.h"

static PyObject *kv_eventual_bench(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"num_waiters", "duration_s", "interval_ms", "wait_mode", NULL};
    long long num_waiters;
    double duration_s, interval_ms;
    const char *mode = "block";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ldd|s", kwlist, &num_waiters, &duration_s,
                                     &interval_ms, &mode))
        return NULL;
    rs_error err = {0};
    rs_eventual_bench_cfg cfg = {.duration_s = duration_s, .interval_ms = interval_ms};
    if (rs_wait_mode_parse(mode, &cfg.wait_mode) != RS_OK) {
        rs_error_set(&err, RS_EINVAL, "wait_mode '%s' is neither 'block' nor 'spin'", mode);
        return rs_py_raise(RS_EINVAL, "rs_eventual_bench_run", &err);
    }
    if (num_waiters < 1 || num_waiters > (long long)RS_EVENTUAL_BENCH_MAX_WAITERS) {
        rs_error_set(&err, RS_EINVAL, "num_waiters %lld is outside 1..%u", num_waiters,
                     RS_EVENTUAL_BENCH_MAX_WAITERS);
        return rs_py_raise(RS_EINVAL, "rs_eventual_bench_run", &err);
    }
    cfg.num_waiters = (uint32_t)num_waiters;
    rs_eventual_bench_result r;
    int rc;
    RS_PY_NOGIL(rc = rs_eventual_bench_run(&cfg, &r, &err));
    if (rc) return rs_py_raise(rc, "rs_eventual_bench_run", &err);
    return Py_BuildValue("{s:I,s:d,s:d,s:s,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "num_waiters",
                         cfg.num_waiters, "duration_s", cfg.duration_s, "interval_ms",
                         cfg.interval_ms, "wait_mode", mode, "ops", (unsigned long long)r.ops,
                         "elapsed_s", r.elapsed_s, "ops_per_sec", r.ops_per_sec, "cpu_user_s",
                         r.cpu_user_s, "cpu_sys_s", r.cpu_sys_s, "cpu_time_s", r.cpu_time_s,
                         "wall_s", r.wall_s, "late_p50_us", r.late_p50_us, "late_p99_us",
                         r.late_p99_us, "late_max_us", r.late_max_us);
}

static PyMethodDef kv_eventual_methods[] = {
    {"eventual_bench", (PyCFunction)(void (*)(void))kv_eventual_bench, METH_VARARGS | METH_KEYWORDS,
     "eventual_bench(num_waiters, duration_s, interval_ms, wait_mode='block') -> dict of ops, "
     "ops_per_sec, CPU seconds and wake lateness."},
    {NULL, NULL, 0, NULL},
};

int kv_eventual_module_init(PyObject *m) {
    return PyModule_AddFunctions(m, kv_eventual_methods);
}
