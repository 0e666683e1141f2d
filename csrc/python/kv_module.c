/*
 * kv_module.c — recbench._kv: the KV engine, histogram/zipf helpers and the kv bench loops.
 * Each Python type lives in its own kv_<type>.c file and registers itself from here.
 */
#include "py_common.h"

int kv_engine_module_init(PyObject *m);   /* kv_engine.c */
int kv_bench_module_init(PyObject *m);    /* kv_bench.c */
int kv_eventual_module_init(PyObject *m); /* kv_eventual.c */

static PyMethodDef kv_methods[] = {
    {"build_info", rs_py_build_info, METH_NOARGS, "Build type, compiler, flags and features."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kv_module = {
    PyModuleDef_HEAD_INIT, "recbench._kv", "recbench KV engine (C core)", -1, kv_methods,
};

PyMODINIT_FUNC PyInit__kv(void) {
    PyObject *m = PyModule_Create(&kv_module);
    if (!m) return NULL;
    if (kv_engine_module_init(m) < 0 || kv_bench_module_init(m) < 0 ||
        kv_eventual_module_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
