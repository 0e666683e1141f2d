/*
 * ps_endpoints.c — the `endpoints` argument of recbench._ps.Client and the bench functions: a
 * sequence of (host, port), one per shard, turned into the C arrays rs_ps_client_config takes.
 */
#include "ps_module.h"

#include <stdlib.h>
#include <string.h>

int rs_py_ps_endpoints_parse(PyObject *endpoints, rs_py_ps_endpoints *out) {
    memset(out, 0, sizeof *out);
    PyObject *seq = PySequence_Fast(endpoints, "endpoints must be a sequence of (host, port)");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int ret = -1;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "endpoints must name at least one server");
        goto out;
    }
    out->hosts = calloc((size_t)n, sizeof *out->hosts);
    out->ports = calloc((size_t)n, sizeof *out->ports);
    if (!out->hosts || !out->ports) {
        PyErr_NoMemory();
        goto out;
    }
    out->n = (uint32_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *h;
        unsigned int p;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sI;endpoint must be (host, port)",
                              &h, &p))
            goto out;
        if (p == 0 || p > 65535) {
            PyErr_Format(PyExc_ValueError, "endpoint %zd: port %u is out of range", i, p);
            goto out;
        }
        if (!(out->hosts[i] = strdup(h))) {
            PyErr_NoMemory();
            goto out;
        }
        out->ports[i] = (uint16_t)p;
    }
    ret = 0;
out:
    Py_DECREF(seq);
    if (ret) rs_py_ps_endpoints_free(out);
    return ret;
}

void rs_py_ps_endpoints_free(rs_py_ps_endpoints *e) {
    for (uint32_t i = 0; e->hosts && i < e->n; i++)
        free(e->hosts[i]);
    free(e->hosts);
    free(e->ports);
    memset(e, 0, sizeof *e);
}
