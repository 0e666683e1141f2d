/*
 * ps_rc_debug.c — recbench._ps.rc_debug_inject: a test hook of the RC transports (shm, rdma).
 *
 *   rc_debug_inject(transport, host, port, payload, qp=0, slot=0, timeout_ms=5000, extra=None)
 *       -> (status, error_text)
 *
 * Attaches a fresh logical client to the RC server at host:port, writes `payload` (raw bytes: a
 * descriptor and whatever follows, typically corrupt) into the server's request slot (qp, slot),
 * commits it with the lane's next seq, waits for the status word and returns the server's status
 * (rs_ps_status) and error text; then detaches. Used by the end-to-end tests to show a corrupted
 * descriptor is answered with an error while other clients keep working.
 */
#include "py_common.h"
#include "recstore/rc.h"

static PyObject *ps_rc_debug_inject(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"transport", "host",       "port",  "payload", "qp",
                             "slot",      "timeout_ms", "extra", NULL};
    const char *transport, *host, *extra = NULL;
    int port;
    Py_buffer payload;
    unsigned int qp = 0, slot = 0, timeout_ms = 5000;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ssiy*|IIIz", kwlist, &transport, &host, &port,
                                     &payload, &qp, &slot, &timeout_ms, &extra))
        return NULL;
    PyObject *ret = NULL;
    rs_error err = {0};
    const rs_rc_fabric_ops *fab =
        rs_rc_fabric_find(!strcmp(transport, "rdma") ? "verbs" : transport);
    if (!fab || (strcmp(transport, "shm") && strcmp(transport, "rdma"))) {
        PyErr_Format(PyExc_ValueError, "rc_debug_inject: transport must be shm or rdma, not %s",
                     transport);
        goto out;
    }
    if (port <= 0 || port > 65535) {
        PyErr_Format(PyExc_ValueError, "rc_debug_inject: port %d out of range", port);
        goto out;
    }
    rs_rc_options o;
    rs_rc_options_default(&o);
    int rc = rs_rc_options_parse(&o, extra, &err);
    if (rc) {
        rs_py_raise(rc, "rc_debug_inject", &err);
        goto out;
    }
    if (qp >= o.qps) o.qps = qp + 1;
    if (slot >= o.slots) o.slots = slot + 1;
    int32_t status = 0;
    char why[256] = "";
    rs_rc_client *c = NULL;
    RS_PY_NOGIL(rc = rs_rc_client_connect(fab, host, (uint16_t)port, 1, &o, &c, &err);
                if (rc == 0) rc =
                    rs_rc_client_debug_inject(c, qp, slot, payload.buf, (size_t)payload.len,
                                              timeout_ms, &status, why, sizeof why, &err);
                rs_rc_client_close(c));
    if (rc) {
        rs_py_raise(rc, "rc_debug_inject", &err);
        goto out;
    }
    ret = Py_BuildValue("(is)", (int)status, why);
out:
    PyBuffer_Release(&payload);
    return ret;
}

PyMethodDef rs_py_ps_rc_methods[] = {
    {"rc_debug_inject", (PyCFunction)(void (*)(void))ps_rc_debug_inject,
     METH_VARARGS | METH_KEYWORDS,
     "rc_debug_inject(transport, host, port, payload, qp=0, slot=0, timeout_ms=5000, extra=None) "
     "-> "
     "(status, error): write raw bytes into an RC request slot and return the server's answer "
     "(tests)."},
    {NULL, NULL, 0, NULL},
};
