/*
 * ps_server_type.c — recbench._ps.Server: one PS shard (rs_kv engine + shard handler) served on
 * one transport endpoint. The transport's threads run in C; Python only starts, queries and stops.
 *
 *   Server(transport="brpc", host="127.0.0.1", port=0, shard=0, num_shards=1,
 *          index_type="DRAM_PET_HASH", value_size=512, capacity=1000000, num_threads=1,
 *          max_keys_per_request=500, path=None, max_body_bytes=0, extra=None,
 *          max_connections=0, load_checkpoint=None, sync="none", auth_token_file=None,
 *          checkpoint_root=None, huge_pages="auto")
 *   .port  .transport  .shard  .value_size   .stats() -> dict   .stop()   context manager
 *
 * huge_pages (auto | explicit | thp | off) picks the pages of the engine's DRAM regions (kv.h);
 * stats() reports it with the pages the index and the value slab got (index_pages, slab_pages).
 *
 * Ownership: the object owns the shard and the transport state; stop() (or dealloc) stops the
 * transport first (joining its threads) and then closes the shard, so no thread touches a closed
 * engine. After stop(), stats() raises ClosedError. load_checkpoint=DIR loads the shard's rows
 * from DIR/shard_<id>.rsckpt (verified) before the transport starts.
 */
#include "ps_module.h"

#include <string.h>

#include "recstore/auth.h"
#include "recstore/transport.h"

typedef struct {
    PyObject_HEAD const rs_ps_server_ops *ops; /* static table */
    void *state;                               /* transport state; NULL after stop */
    rs_ps_shard *shard;                        /* owned; NULL after stop */
    uint16_t port;
    uint32_t shard_id, value_size;
    char transport[16];
    rs_kv_huge_pages huge_pages; /* what the shard's engine was asked for */
} ServerObject;

static void Server_close(ServerObject *self) {
    void *state = self->state;
    rs_ps_shard *shard = self->shard;
    const rs_ps_server_ops *ops = self->ops;
    self->state = NULL;
    self->shard = NULL;
    if (!state && !shard) return;
    RS_PY_NOGIL({
        if (state) ops->stop(state);
        rs_ps_shard_close(shard);
    });
}

static int Server_init(ServerObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"transport",
                             "host",
                             "port",
                             "shard",
                             "num_shards",
                             "index_type",
                             "value_size",
                             "capacity",
                             "num_threads",
                             "max_keys_per_request",
                             "path",
                             "max_body_bytes",
                             "extra",
                             "max_connections",
                             "load_checkpoint",
                             "sync",
                             "auth_token_file",
                             "checkpoint_root",
                             "huge_pages",
                             NULL};
    const char *transport = "brpc", *host = "127.0.0.1", *index_type = "DRAM_PET_HASH";
    const char *path = NULL, *extra = NULL, *load_dir = NULL, *sync = "none", *token_file = NULL;
    const char *ckpt_root = NULL, *huge = "auto";
    unsigned int port = 0, shard = 0, num_shards = 1, value_size = RS_PS_DEFAULT_VALUE_SIZE;
    unsigned int num_threads = 1;
    unsigned int max_keys = RS_PS_DEFAULT_BATCH_KEYS, max_conns = 0;
    unsigned long long capacity = 1000000, max_body = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|ssIIIsIKIIzKzIzszzs", kwlist, &transport, &host,
                                     &port, &shard, &num_shards, &index_type, &value_size,
                                     &capacity, &num_threads, &max_keys, &path, &max_body, &extra,
                                     &max_conns, &load_dir, &sync, &token_file, &ckpt_root, &huge))
        return -1;
    if (self->state || self->shard) {
        PyErr_SetString(PyExc_RuntimeError, "Server is already started");
        return -1;
    }
    if (port > 65535) {
        PyErr_Format(PyExc_ValueError, "port %u is out of range (0..65535)", port);
        return -1;
    }
    rs_error err = {0};
    const rs_ps_server_ops *ops = NULL;
    int rc = rs_ps_transport_find(transport, &ops, NULL, &err);
    if (rc) return rs_py_raise_int(rc, "rs_ps_transport_find", &err);
    rs_kv_index_type it;
    rc = rs_kv_index_type_parse(index_type, &it, &err);
    if (rc) return rs_py_raise_int(rc, "index_type", &err);
    rs_ps_shard_config sc = {
        .shard_id = shard,
        .num_shards = num_shards,
        .kv = {.index_type = it, .value_size = value_size, .capacity = capacity, .path = path},
        .max_keys_per_request = max_keys,
        .server_threads = num_threads,
        .checkpoint_root = ckpt_root};
    rc = rs_kv_sync_parse(sync, &sc.kv.sync, &sc.kv.sync_interval_ms, &err);
    if (rc) return rs_py_raise_int(rc, "sync", &err);
    rc = rs_kv_huge_pages_parse(huge, &sc.kv.huge_pages, &err);
    if (rc) return rs_py_raise_int(rc, "huge_pages", &err);
    rs_auth_token token = {0};
    if (token_file && (rc = rs_auth_token_load(token_file, &token, &err)))
        return rs_py_raise_int(rc, "auth_token_file", &err);
    rs_ps_server_opts so = {.host = host,
                            .port = (uint16_t)port,
                            .num_threads = num_threads,
                            .max_body_bytes = max_body,
                            .max_connections = max_conns,
                            .extra = extra,
                            .auth = token.len ? &token : NULL};
    rs_ps_shard *sh = NULL;
    void *state = NULL;
    const char *where = "rs_ps_shard_open";
    RS_PY_NOGIL({
        rc = rs_ps_shard_open(&sc, &sh, &err);
        if (!rc && load_dir) { /* rows in place before the first request can arrive */
            char reply[512];
            where = "load_checkpoint";
            rc = rs_ps_shard_load(sh, load_dir, reply, sizeof reply, &err);
            if (rc) {
                rs_ps_shard_close(sh);
                sh = NULL;
            }
        }
        if (!rc) {
            where = "server start";
            rc = ops->start(&so, sh, &state, &err);
            if (rc) {
                rs_ps_shard_close(sh);
                sh = NULL;
            }
        }
    });
    if (rc) return rs_py_raise_int(rc, where, &err);
    self->ops = ops;
    self->state = state;
    self->shard = sh;
    self->port = ops->bound_port(state);
    self->shard_id = shard;
    self->value_size = value_size;
    self->huge_pages = sc.kv.huge_pages;
    snprintf(self->transport, sizeof self->transport, "%s", ops->name);
    memset(&token, 0, sizeof token); /* the transport keeps its own copy */
    return 0;
}

static void Server_dealloc(ServerObject *self) {
    Server_close(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Server_stop(ServerObject *self, PyObject *noargs) {
    (void)noargs;
    Server_close(self);
    Py_RETURN_NONE;
}

static PyObject *Server_stats(ServerObject *self, PyObject *noargs) {
    (void)noargs;
    if (!self->state) return rs_py_raise(RS_ECLOSED, "Server.stats", NULL);
    rs_ps_shard_stats st;
    rs_ps_transport_stats ts;
    rs_ps_shard_get_stats(self->shard, &st);
    self->ops->stats(self->state, &ts);
    rs_kv_memory mem;
    rs_kv_get_memory(rs_ps_shard_kv(self->shard), &mem);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
        "s:K,s:K,s:K,s:K,s:K,s:s,s:s,s:s,s:s}",
        "handled_get", (unsigned long long)st.handled_get, "handled_put",
        (unsigned long long)st.handled_put, "handled_update", (unsigned long long)st.handled_update,
        "handled_command", (unsigned long long)st.handled_command, "handled_error",
        (unsigned long long)st.handled_error, "keys_get", (unsigned long long)st.keys_get,
        "keys_put", (unsigned long long)st.keys_put, "keys_update",
        (unsigned long long)st.keys_update, "keys_found", (unsigned long long)st.keys_found,
        "connections_accepted", (unsigned long long)ts.connections_accepted, "connections_open",
        (unsigned long long)ts.connections_open, "requests", (unsigned long long)ts.requests,
        "bad_frames", (unsigned long long)ts.bad_frames, "bytes_in",
        (unsigned long long)ts.bytes_in, "bytes_out", (unsigned long long)ts.bytes_out,
        "auth_failures", (unsigned long long)ts.auth_failures, "pollers_sleeping",
        (unsigned long long)ts.pollers_sleeping, "poller_naps", (unsigned long long)ts.poller_naps,
        "poller_awake_idle_rounds", (unsigned long long)ts.poller_awake_idle_rounds,
        "poller_blocks", (unsigned long long)ts.poller_blocks, "poller_doorbell_wakes",
        (unsigned long long)ts.poller_doorbell_wakes, "client_wakes",
        (unsigned long long)ts.client_wakes, "client_wake_checks_deferred",
        (unsigned long long)ts.client_wake_checks_deferred, "poller_quick_idles",
        (unsigned long long)ts.poller_quick_idles, "lanes_ringing",
        (unsigned long long)ts.lanes_ringing, "worker_connections_max",
        (unsigned long long)ts.worker_connections_max, "worker_connections_min",
        (unsigned long long)ts.worker_connections_min, "huge_pages",
        rs_kv_huge_pages_name(self->huge_pages), "index_pages",
        mem.index_pages ? mem.index_pages : "?", "slab_pages",
        mem.slab_pages ? mem.slab_pages : "?", "tcp_congestion", ts.tcp_congestion);
}

static PyObject *Server_enter(ServerObject *self, PyObject *noargs) {
    (void)noargs;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Server_exit(ServerObject *self, PyObject *args) {
    (void)args;
    Server_close(self);
    Py_RETURN_FALSE;
}

static PyObject *Server_get_port(ServerObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->port);
}

static PyObject *Server_get_transport(ServerObject *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(self->transport);
}

static PyObject *Server_get_shard(ServerObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->shard_id);
}

static PyObject *Server_get_value_size(ServerObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(self->value_size);
}

static PyObject *Server_get_running(ServerObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->state != NULL);
}

static PyMethodDef Server_methods[] = {
    {"stop", (PyCFunction)Server_stop, METH_NOARGS,
     "Stop serving: close every connection, join the transport threads, close the engine."},
    {"stats", (PyCFunction)Server_stats, METH_NOARGS,
     "Counters: handled_* and keys_* from the shard, connections/requests/bad_frames/bytes from "
     "the transport; tcp_congestion: the congestion control of a brpc or gRPC server's listening "
     "socket, which its connections inherit (\"\" for shm and rdma)."},
    {"__enter__", (PyCFunction)Server_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Server_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Server_getset[] = {
    {"port", (getter)Server_get_port, NULL, "bound port", NULL},
    {"transport", (getter)Server_get_transport, NULL, "transport name", NULL},
    {"shard", (getter)Server_get_shard, NULL, "shard id", NULL},
    {"value_size", (getter)Server_get_value_size, NULL, "row bytes", NULL},
    {"running", (getter)Server_get_running, NULL, "True until stop()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ServerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recbench._ps.Server",
    .tp_basicsize = sizeof(ServerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One PS shard served on one transport endpoint (threads in C).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Server_init,
    .tp_dealloc = (destructor)Server_dealloc,
    .tp_methods = Server_methods,
    .tp_getset = Server_getset,
};

int rs_py_ps_server_type_init(PyObject *module) {
    if (PyType_Ready(&ServerType) < 0) return -1;
    Py_INCREF(&ServerType);
    if (PyModule_AddObject(module, "Server", (PyObject *)&ServerType) < 0) {
        Py_DECREF(&ServerType);
        return -1;
    }
    /* the server defaults of ps.h and transport.h (max_body_bytes=0 / max_connections=0 mean
     * these) */
    if (PyModule_AddIntConstant(module, "DEFAULT_VALUE_SIZE", RS_PS_DEFAULT_VALUE_SIZE) < 0 ||
        PyModule_AddIntConstant(module, "DEFAULT_BATCH_KEYS", RS_PS_DEFAULT_BATCH_KEYS) < 0 ||
        PyModule_AddIntConstant(module, "DEFAULT_MAX_BODY_BYTES", RS_PS_DEFAULT_MAX_BODY_BYTES) <
            0 ||
        PyModule_AddIntConstant(module, "DEFAULT_MAX_CONNECTIONS", RS_PS_DEFAULT_MAX_CONNECTIONS) <
            0)
        return -1;
    return 0;
}
