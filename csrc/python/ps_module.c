/*
 * ps_module.c — recbench._ps: the parameter server (Server), the all-shards client core (Client),
 * the ps_bench loops (bench_load / bench_run) and transports(). Each type lives in its own
 * ps_<type>.c file and registers itself from here.
 */
#include "ps_module.h"

#include "recstore/pacing.h"
#include "recstore/ps_bench.h"
#include "recstore/ps_budget.h"
#include "recstore/transport.h"

/* transports() -> {name: None if available, else the reason it is not} */
static PyObject *ps_transports(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t i = 0;; i++) {
        const char *name = rs_ps_transport_name(i);
        if (!name) break;
        rs_error err = {0};
        int rc = rs_ps_transport_find(name, NULL, NULL, &err);
        PyObject *v = rc ? PyUnicode_FromString(err.msg) : (Py_INCREF(Py_None), Py_None);
        if (!v || PyDict_SetItemString(d, name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* default_inflight_bytes(transport) -> the budget of bytes in flight a client of that transport
 * keeps when not given one (recstore/ps_budget.h: the transport's bytes per CPU x this process's
 * CPUs), or None for none. */
static PyObject *ps_default_inflight_bytes(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    const rs_ps_conn_ops *conn = NULL;
    rs_error err = {0};
    if (rs_ps_transport_find(name, NULL, &conn, &err)) {
        PyErr_Format(PyExc_ValueError, "transport %R: %s", arg, err.msg);
        return NULL;
    }
    uint64_t b = rs_ps_budget_default(conn->budget_per_cpu);
    if (b == RS_PS_BUDGET_NONE) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(b);
}

/* The limits of the bench loops that the runner checks at parse time (recbench.runner.plan), so
 * that Python never repeats the numbers: the row size of ps_bench and the open-loop rate. */
static int add_bench_limits(PyObject *m) {
    if (PyModule_AddIntConstant(m, "BENCH_MAX_VALUE_SIZE", RS_PS_BENCH_MAX_VALUE_SIZE) < 0)
        return -1;
    PyObject *rate = PyFloat_FromDouble(RS_PACING_MAX_RATE);
    if (!rate) return -1;
    if (PyModule_AddObject(m, "PACING_MAX_RATE", rate) < 0) {
        Py_DECREF(rate);
        return -1;
    }
    return 0;
}

static PyMethodDef ps_methods[] = {
    {"build_info", rs_py_build_info, METH_NOARGS, "Build type, compiler, flags and features."},
    {"transports", ps_transports, METH_NOARGS,
     "transports() -> dict: transport name -> None when built in, else the reason it is absent."},
    {"default_inflight_bytes", ps_default_inflight_bytes, METH_O,
     "default_inflight_bytes(transport) -> the bytes in flight its clients keep to by default, or "
     "None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ps_module = {
    PyModuleDef_HEAD_INIT,
    "recbench._ps",
    "recbench parameter server, client and ps_bench (C core)",
    -1,
    ps_methods,
};

PyMODINIT_FUNC PyInit__ps(void) {
    PyObject *m = PyModule_Create(&ps_module);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, rs_py_ps_bench_methods) < 0 ||
        PyModule_AddFunctions(m, rs_py_ps_rc_methods) < 0 || rs_py_ps_server_type_init(m) < 0 ||
        rs_py_ps_client_type_init(m) < 0 || add_bench_limits(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
