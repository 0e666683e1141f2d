/*
 * ps_client_type.c — recbench._ps.Client: the C all-shards client (rs_ps_client) for Python.
 *
 *   Client(transport, endpoints, value_size=0, prefetch_depth=1, timeout_ms=DEFAULT_TIMEOUT_MS,
 *          extra=None, auth_token_file=None, hash_method=None, max_inflight_bytes=0)
 *     DEFAULT_TIMEOUT_MS: recbench._ps.DEFAULT_TIMEOUT_MS (10000)
 *     endpoints: sequence of (host, port), one per shard in shard order
 *     hash_method: shard routing, None = the wire's own (rs_mix64; "recstore+..." transports:
 *     city_hash, or "simple_mod"); a method the wire cannot use raises ValueError
 *     max_inflight_bytes: the process's budget of bytes in flight this client keeps to
 *     (recstore/ps_budget.h; 0 = the transport's default, 2**64 - 1 = none)
 *   .get(keys, out) -> num_found     keys: uint64 buffer; out: writable buffer of n*value_size
 * bytes .put(keys, rows)  .update(keys, deltas)  .command(name, shard=0) -> str  .close()
 *   .value_size  .num_shards
 *
 * Buffers are used in place (no copies in Python) and the GIL is released around every call into
 * C. The C client belongs to one thread at a time: a call made while another thread is inside
 * this object raises RuntimeError instead of racing. close() invalidates the object (ClosedError).
 */
#include "ps_module.h"

#include <stdlib.h>
#include <string.h>

#include "recstore/auth.h"
#include "recstore/ps_client.h"
#include "recstore/transport.h"

typedef struct {
    PyObject_HEAD rs_ps_client *client; /* owned; NULL after close */
    int busy;                           /* set (under the GIL) while a thread is inside a call */
    uint32_t value_size, num_shards;
} ClientObject;

static int client_enter(ClientObject *self, const char *what) {
    if (!self->client) {
        rs_py_raise(RS_ECLOSED, what, NULL);
        return -1;
    }
    if (self->busy) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: this PSClient is in use by another thread (use one client per thread)",
                     what);
        return -1;
    }
    self->busy = 1;
    return 0;
}

static int Client_init(ClientObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"transport",          "endpoints", "value_size",      "prefetch_depth",
                             "timeout_ms",         "extra",     "auth_token_file", "hash_method",
                             "max_inflight_bytes", NULL};
    const char *transport, *extra = NULL, *token_file = NULL, *hash_method = NULL;
    PyObject *endpoints;
    unsigned int value_size = 0, depth = 1, timeout_ms = RS_PS_DEFAULT_TIMEOUT_MS;
    unsigned long long max_inflight = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sO|IIIzzzK", kwlist, &transport, &endpoints,
                                     &value_size, &depth, &timeout_ms, &extra, &token_file,
                                     &hash_method, &max_inflight))
        return -1;
    if (self->client) {
        PyErr_SetString(PyExc_RuntimeError, "Client is already connected");
        return -1;
    }
    rs_auth_token token = {0};
    rs_error terr = {0};
    int trc = token_file ? rs_auth_token_load(token_file, &token, &terr) : 0;
    if (trc) return rs_py_raise_int(trc, "auth_token_file", &terr);
    rs_py_ps_endpoints ep;
    if (rs_py_ps_endpoints_parse(endpoints, &ep)) return -1;
    int ret = -1;
    rs_ps_client_config cfg = {.transport = transport,
                               .num_shards = ep.n,
                               .hosts = (const char *const *)ep.hosts,
                               .ports = ep.ports,
                               .value_size = value_size,
                               .prefetch_depth = depth,
                               .timeout_ms = timeout_ms,
                               .extra = extra,
                               .hash_method = hash_method,
                               .auth = token.len ? &token : NULL,
                               .max_inflight_bytes = max_inflight};
    rs_error err = {0};
    rs_ps_client *c = NULL;
    int rc;
    RS_PY_NOGIL(rc = rs_ps_client_open(&cfg, &c, &err));
    if (rc) {
        rs_py_raise(rc, "PSClient", &err);
        goto out;
    }
    self->client = c;
    self->value_size = rs_ps_client_value_size(c);
    self->num_shards = ep.n;
    ret = 0;
out:
    memset(&token, 0, sizeof token); /* the connections keep their own copies */
    rs_py_ps_endpoints_free(&ep);
    return ret;
}

static void Client_dealloc(ClientObject *self) {
    rs_ps_client *c = self->client;
    self->client = NULL;
    if (c) RS_PY_NOGIL(rs_ps_client_close(c));
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Client_close(ClientObject *self, PyObject *noargs) {
    (void)noargs;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close: this PSClient is in use by another thread");
        return NULL;
    }
    rs_ps_client *c = self->client;
    self->client = NULL;
    if (c) RS_PY_NOGIL(rs_ps_client_close(c));
    Py_RETURN_NONE;
}

/* Rows buffer of exactly n * value_size bytes (writable for GET output). */
static int get_rows(ClientObject *self, PyObject *obj, const char *name, size_t n, int writable,
                    Py_buffer *view) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s buffer (got %s)", name,
                     writable ? " writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    size_t want = n * self->value_size;
    if ((size_t)view->len != want) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes; %zu keys x %u-byte rows need %zu bytes",
                     name, view->len, n, self->value_size, want);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *Client_get(ClientObject *self, PyObject *args) {
    PyObject *kobj, *oobj;
    if (!PyArg_ParseTuple(args, "OO:get", &kobj, &oobj)) return NULL;
    if (client_enter(self, "PSClient.get")) return NULL;
    Py_buffer kv, ov;
    size_t n;
    PyObject *ret = NULL;
    if (rs_py_get_keys(kobj, "keys", &kv, &n) < 0) goto out;
    if (get_rows(self, oobj, "out", n, 1, &ov) < 0) {
        PyBuffer_Release(&kv);
        goto out;
    }
    rs_error err = {0};
    uint64_t found = 0;
    int rc;
    RS_PY_NOGIL(rc = rs_ps_client_get(self->client, kv.buf, n, ov.buf, &found, &err));
    PyBuffer_Release(&kv);
    PyBuffer_Release(&ov);
    ret = rc ? rs_py_raise(rc, "PSClient.get", &err) : PyLong_FromUnsignedLongLong(found);
out:
    self->busy = 0;
    return ret;
}

static PyObject *write_op(ClientObject *self, PyObject *args, rs_ps_op op, const char *what) {
    PyObject *kobj, *robj;
    if (!PyArg_ParseTuple(args, "OO", &kobj, &robj)) return NULL;
    if (client_enter(self, what)) return NULL;
    Py_buffer kv, rv;
    size_t n;
    PyObject *ret = NULL;
    if (rs_py_get_keys(kobj, "keys", &kv, &n) < 0) goto out;
    if (get_rows(self, robj, op == RS_PS_PUT ? "rows" : "deltas", n, 0, &rv) < 0) {
        PyBuffer_Release(&kv);
        goto out;
    }
    rs_error err = {0};
    int rc;
    if (op == RS_PS_PUT)
        RS_PY_NOGIL(rc = rs_ps_client_put(self->client, kv.buf, n, rv.buf, &err));
    else
        RS_PY_NOGIL(rc = rs_ps_client_update(self->client, kv.buf, n, rv.buf, &err));
    PyBuffer_Release(&kv);
    PyBuffer_Release(&rv);
    if (rc)
        rs_py_raise(rc, what, &err);
    else
        ret = (Py_INCREF(Py_None), Py_None);
out:
    self->busy = 0;
    return ret;
}

static PyObject *Client_put(ClientObject *self, PyObject *args) {
    return write_op(self, args, RS_PS_PUT, "PSClient.put");
}

static PyObject *Client_update(ClientObject *self, PyObject *args) {
    return write_op(self, args, RS_PS_UPDATE, "PSClient.update");
}

static PyObject *Client_command(ClientObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"name", "shard", NULL};
    const char *name;
    unsigned int shard = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|I:command", kwlist, &name, &shard)) return NULL;
    if (client_enter(self, "PSClient.command")) return NULL;
    char reply[2048];
    rs_error err = {0};
    int rc;
    RS_PY_NOGIL(rc = rs_ps_client_command(self->client, shard, name, reply, sizeof reply, &err));
    self->busy = 0;
    if (rc) return rs_py_raise(rc, "PSClient.command", &err);
    return PyUnicode_FromString(reply);
}

static PyObject *Client_get_value_size(ClientObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->value_size);
}

static PyObject *Client_get_num_shards(ClientObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->num_shards);
}

static PyObject *Client_get_closed(ClientObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->client == NULL);
}

static PyMethodDef Client_methods[] = {
    {"get", (PyCFunction)Client_get, METH_VARARGS,
     "get(keys, out) -> number of keys found; rows in key order (misses are zero rows)."},
    {"put", (PyCFunction)Client_put, METH_VARARGS, "put(keys, rows): store rows."},
    {"update", (PyCFunction)Client_update, METH_VARARGS,
     "update(keys, deltas): add float32 deltas element-wise."},
    {"command", (PyCFunction)(void (*)(void))Client_command, METH_VARARGS | METH_KEYWORDS,
     "command(name, shard=0) -> reply text (ping, ready, stats, clear)."},
    {"close", (PyCFunction)Client_close, METH_NOARGS, "Close every connection."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Client_getset[] = {
    {"value_size", (getter)Client_get_value_size, NULL, "row bytes", NULL},
    {"num_shards", (getter)Client_get_num_shards, NULL, "number of shards", NULL},
    {"closed", (getter)Client_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recbench._ps.Client",
    .tp_basicsize = sizeof(ClientObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "All-shards PS client over one transport (C core).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_methods = Client_methods,
    .tp_getset = Client_getset,
};

int rs_py_ps_client_type_init(PyObject *module) {
    if (PyType_Ready(&ClientType) < 0) return -1;
    Py_INCREF(&ClientType);
    if (PyModule_AddObject(module, "Client", (PyObject *)&ClientType) < 0) {
        Py_DECREF(&ClientType);
        return -1;
    }
    /* the client defaults and limits of transport.h, for callers that validate before connecting */
    if (PyModule_AddIntConstant(module, "DEFAULT_TIMEOUT_MS", RS_PS_DEFAULT_TIMEOUT_MS) < 0 ||
        PyModule_AddIntConstant(module, "MAX_REPLY_BYTES", RS_PS_MAX_REPLY_BYTES) < 0)
        return -1;
    return 0;
}
