/*
 * ycsb_module.c — recbench._ycsb: the YCSB driver (csrc/ycsb) for Python.
 *
 *   run(db, files=(), props=(), load=True, run=True, status=False) -> dict
 *       files: -P property files in order; props: "key=value" overrides applied after them.
 *       The whole load/run executes in C threads with the GIL released.
 *   db_names() -> list of the bindings compiled in.
 *   build_info() -> dict (shared with the other modules).
 *
 * The report dict has "threads", "seed", "hdr" and per phase ("load"/"run", None if not run):
 * runtime_s, operations, throughput, cpu_user_s, cpu_sys_s, errors, first_error and "ops": a
 * list of {name, count, min_us, max_us, avg_us, p50_us, p90_us, p99_us, p999_us} per operation
 * type and outcome ("READ", "READ-NOTFOUND", "SCAN-NOTSUPPORTED", "UPDATE-FAILED", ...), with
 * "intended_ops" the same from the intended start ("Intended-READ", ...; measurement.interval)
 * and late_sends. The report also echoes target (-target ops/s, 0 = none), arrival and interval.
 */
#include "py_common.h"

#include "recstore/ycsb.h"

/* {name, count, min_us, ...} per operation type and outcome of m; `prefix` names the measurement
 * ("" or "Intended-"). */
static PyObject *ops_list(const rs_ycsb_measure *m, const char *prefix) {
    PyObject *ops = PyList_New(0);
    if (!ops) return NULL;
    for (int o = 0; o < RS_YCSB_OP_COUNT; o++)
        for (int s = 0; s < RS_YCSB_ST_COUNT; s++) {
            const rs_hist *h = m->h[o][s];
            if (!h || !h->count) continue;
            char name[80];
            snprintf(name, sizeof name, "%s%s%s", prefix, rs_ycsb_op_name((rs_ycsb_op)o),
                     rs_ycsb_status_suffix((rs_ycsb_status)s));
            PyObject *d = Py_BuildValue(
                "{s:s,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "name", name, "count",
                (unsigned long long)h->count, "min_us", h->min / 1e3, "max_us", h->max / 1e3,
                "avg_us", rs_hist_mean(h) / 1e3, "p50_us", rs_hist_percentile(h, 50) / 1e3,
                "p90_us", rs_hist_percentile(h, 90) / 1e3, "p99_us",
                rs_hist_percentile(h, 99) / 1e3, "p999_us", rs_hist_percentile(h, 99.9) / 1e3);
            if (!d || PyList_Append(ops, d) < 0) {
                Py_XDECREF(d);
                Py_DECREF(ops);
                return NULL;
            }
            Py_DECREF(d);
        }
    return ops;
}

static PyObject *phase_dict(const rs_ycsb_phase_report *ph) {
    if (!ph->ran) Py_RETURN_NONE;
    PyObject *ops = ops_list(&ph->merged, "");
    if (!ops) return NULL;
    PyObject *iops = ops_list(&ph->intended, "Intended-");
    if (!iops) {
        Py_DECREF(ops);
        return NULL;
    }
    return Py_BuildValue("{s:d,s:K,s:d,s:d,s:d,s:K,s:s,s:N,s:N,s:K}", "runtime_s", ph->runtime_s,
                         "operations", (unsigned long long)ph->operations, "throughput",
                         ph->throughput, "cpu_user_s", ph->cpu_user_s, "cpu_sys_s", ph->cpu_sys_s,
                         "errors", (unsigned long long)ph->errors, "first_error", ph->first_error,
                         "ops", ops, "intended_ops", iops, "late_sends",
                         (unsigned long long)ph->late_sends);
}

static int add_strings(PyObject *seq, const char *what, rs_ycsb_props *props, int files) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (!s) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_TypeError, "%s must hold strings", what);
            return -1;
        }
        rs_error err = {0};
        int rc =
            files ? rs_ycsb_props_load_file(props, s, &err) : rs_ycsb_props_set_arg(props, s, &err);
        if (rc) {
            Py_DECREF(fast);
            return rs_py_raise_int(rc, files ? "property file" : "property", &err);
        }
    }
    Py_DECREF(fast);
    return 0;
}

static const char *const interval_names[] = {"op", "intended", "both"};

static PyObject *ycsb_run(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"db", "files", "props", "load", "run", "status", NULL};
    const char *db;
    PyObject *files = NULL, *props_seq = NULL;
    int do_load = 1, do_run = 1, status = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|OOppp", kwlist, &db, &files, &props_seq, &do_load,
                                     &do_run, &status))
        return NULL;
    rs_ycsb_props *props = NULL;
    if (rs_ycsb_props_new(&props)) return PyErr_NoMemory();
    PyObject *result = NULL;
    if (files && add_strings(files, "files", props, 1) < 0) goto out;
    if (props_seq && add_strings(props_seq, "props", props, 0) < 0) goto out;
    rs_ycsb_options opt = {
        .db = db, .do_load = do_load, .do_run = do_run, .status = status, .props = props};
    rs_ycsb_report rep;
    rs_error err = {0};
    int rc;
    /* The C driver touches only its own memory and `props` (owned here) while the GIL is out. */
    RS_PY_NOGIL(rc = rs_ycsb_execute(&opt, &rep, &err));
    if (rc) {
        rs_py_raise(rc, "ycsb", &err);
        goto out;
    }
    PyObject *load = phase_dict(&rep.load), *run = load ? phase_dict(&rep.run) : NULL;
    if (load && run)
        result = Py_BuildValue("{s:i,s:K,s:O,s:d,s:s,s:s,s:N,s:N}", "threads", rep.threads, "seed",
                               (unsigned long long)rep.seed, "hdr", rep.hdr ? Py_True : Py_False,
                               "target", rep.target, "arrival", rep.arrival, "interval",
                               interval_names[rep.interval], "load", load, "run", run);
    else
        Py_XDECREF(load);
    rs_ycsb_report_free(&rep);
out:
    rs_ycsb_props_free(props);
    return result;
}

static PyObject *ycsb_db_names(PyObject *self, PyObject *noargs) {
    PyObject *s = PyUnicode_FromString(rs_ycsb_db_names());
    if (!s) return NULL;
    PyObject *sep = PyUnicode_FromString(",");
    PyObject *list = sep ? PyUnicode_Split(s, sep, -1) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(s);
    return list;
}

static PyMethodDef ycsb_methods[] = {
    {"run", (PyCFunction)(void (*)(void))ycsb_run, METH_VARARGS | METH_KEYWORDS,
     "run(db, files=(), props=(), load=True, run=True, status=False) -> report dict"},
    {"db_names", ycsb_db_names, METH_NOARGS, "Names of the DB bindings compiled in."},
    {"build_info", rs_py_build_info, METH_NOARGS, "Build type, compiler, flags and features."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ycsb_module = {
    PyModuleDef_HEAD_INIT, "recbench._ycsb", "recbench YCSB driver (C core)", -1, ycsb_methods,
};

PyMODINIT_FUNC PyInit__ycsb(void) {
    return PyModule_Create(&ycsb_module);
}
