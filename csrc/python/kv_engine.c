/*
 * kv_engine.c — the Python type recbench.KVEngine over rs_kv (recstore/kv.h).
 *
 *   KVEngine(index_type="DRAM_PET_HASH", value_size=None, capacity=..., path=None)
 *   put(key, value) / get(key) -> bytes | None / delete(key) / key in kv / len(kv) / count()
 *   batch_put(keys, rows) / batch_get_flat(keys, out=None) -> (rows, found) / update(keys, deltas)
 *   close(); usable as a context manager.
 *
 * value_size=None selects variable-length values; otherwise every value is value_size bytes (a
 * positive multiple of 4: float32 rows). Keys are Python ints in [0, 2^64) or, in batches, any
 * contiguous buffer of 8-byte integers (numpy uint64/int64, bytes) or a sequence of ints; rows and
 * values are any contiguous buffer, read and written in place (no copies in Python). Every call
 * into the engine releases the GIL (RS_PY_NOGIL); while it runs, the object holds the Py_buffer
 * views it reads or writes.
 *
 * Ownership: the object owns `kv`. `inflight` counts calls running without the GIL; close() while
 * any is running raises Busy instead of freeing the engine under them, and every method of a
 * closed engine raises ClosedError.
 */
#include "py_common.h"

#include <string.h>

#include "recstore/kv.h"

typedef struct {
    PyObject_HEAD rs_kv *kv; /* owned; NULL once closed */
    long inflight;           /* calls in progress with the GIL released (changed under the GIL) */
    PyObject *path;          /* str or None */
} KVEngineObject;

static PyObject *np_module(void) {
    static PyObject *np;
    if (!np) np = PyImport_ImportModule("numpy");
    return np;
}

static int KVEngine_check_open(KVEngineObject *self) {
    if (self->kv) return 0;
    rs_error e = {0};
    rs_error_set(&e, RS_ECLOSED, "this KVEngine was closed");
    rs_py_raise_int(RS_ECLOSED, "KVEngine", &e);
    return -1;
}

/* A key argument: int in [0, 2^64). */
static int KVEngine_key(PyObject *obj, const char *argname, uint64_t *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int in [0, 2**64), got %s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be an int in [0, 2**64), got %R", argname, obj);
        return -1;
    }
    *out = v;
    return 0;
}

/* Keys of a batch: a buffer of 8-byte ints, or any sequence numpy turns into uint64. */
static int KVEngine_keys(PyObject *obj, const char *argname, Py_buffer *view, size_t *n) {
    if (!PyObject_CheckBuffer(obj) && PySequence_Check(obj) && !PyUnicode_Check(obj)) {
        PyObject *np = np_module();
        if (!np) return -1;
        PyObject *arr = PyObject_CallMethod(np, "ascontiguousarray", "Os", obj, "uint64");
        if (!arr) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be ints in [0, 2**64)", argname);
            return -1;
        }
        int rc = rs_py_get_keys(arr, argname, view, n);
        Py_DECREF(arr);
        return rc;
    }
    return rs_py_get_keys(obj, argname, view, n);
}

static int KVEngine_init(KVEngineObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"index_type", "value_size", "capacity", "path", "huge_pages", NULL};
    const char *index_type = "DRAM_PET_HASH", *huge = "auto";
    PyObject *value_size = Py_None, *capacity = NULL, *path = Py_None, *path_bytes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|sOOOs:KVEngine", kwlist, &index_type,
                                     &value_size, &capacity, &path, &huge))
        return -1;
    if (self->kv) {
        PyErr_SetString(PyExc_RuntimeError, "KVEngine is already open");
        return -1;
    }
    rs_error err = {0};
    rs_kv_config cfg = {0};
    int rc = rs_kv_index_type_parse(index_type, &cfg.index_type, &err);
    if (rc) {
        PyErr_Format(PyExc_ValueError, "index_type: %s", err.msg);
        return -1;
    }
    if (rs_kv_huge_pages_parse(huge, &cfg.huge_pages, &err)) {
        PyErr_Format(PyExc_ValueError, "huge_pages: %s", err.msg);
        return -1;
    }
    if (value_size != Py_None) {
        long long vs = PyLong_Check(value_size) ? PyLong_AsLongLong(value_size) : -1;
        if (PyErr_Occurred()) PyErr_Clear();
        if (!PyLong_Check(value_size) || vs <= 0 || vs % 4 != 0 || vs > RS_KV_MAX_VALUE) {
            PyErr_Format(PyExc_ValueError,
                         "value_size must be a positive multiple of 4 up to %u (float32 rows), or "
                         "None for variable-length values; got %R",
                         RS_KV_MAX_VALUE, value_size);
            return -1;
        }
        cfg.value_size = (uint32_t)vs;
    }
    if (!capacity) {
        PyErr_SetString(PyExc_TypeError, "capacity is required (the maximum number of keys)");
        return -1;
    }
    long long cap = PyLong_Check(capacity) ? PyLong_AsLongLong(capacity) : -1;
    if (PyErr_Occurred()) PyErr_Clear();
    if (!PyLong_Check(capacity) || cap <= 0) {
        PyErr_Format(PyExc_ValueError, "capacity must be a positive int, got %R", capacity);
        return -1;
    }
    cfg.capacity = (uint64_t)cap;
    if (path != Py_None) {
        if (!PyUnicode_FSConverter(path, &path_bytes)) return -1;
        cfg.path = PyBytes_AS_STRING(path_bytes);
    }
    rs_kv *kv = NULL;
    RS_PY_NOGIL(rc = rs_kv_open(&cfg, &kv, &err));
    if (rc) {
        Py_XDECREF(path_bytes);
        return rs_py_raise_int(rc, "rs_kv_open", &err);
    }
    self->kv = kv;
    Py_XDECREF(self->path);
    self->path = path_bytes ? PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path_bytes)) : Py_None;
    if (!path_bytes) Py_INCREF(Py_None);
    Py_XDECREF(path_bytes);
    return self->path ? 0 : -1;
}

static void KVEngine_dealloc(KVEngineObject *self) {
    if (self->kv) {
        rs_kv *kv = self->kv;
        self->kv = NULL;
        RS_PY_NOGIL(rs_kv_close(kv));
    }
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *KVEngine_close(KVEngineObject *self, PyObject *noargs) {
    if (!self->kv) Py_RETURN_NONE;
    if (self->inflight) {
        rs_error e = {0};
        rs_error_set(&e, RS_EBUSY, "%ld calls are still running on other threads", self->inflight);
        return rs_py_raise(RS_EBUSY, "KVEngine.close", &e);
    }
    rs_kv *kv = self->kv;
    self->kv = NULL;
    RS_PY_NOGIL(rs_kv_close(kv));
    Py_RETURN_NONE;
}

#define KV_ENTER(self)                                                                             \
    do {                                                                                           \
        if (KVEngine_check_open(self)) return NULL;                                                \
    } while (0)

static PyObject *KVEngine_put(KVEngineObject *self, PyObject *args) {
    PyObject *keyobj;
    Py_buffer val;
    uint64_t key;
    KV_ENTER(self);
    if (!PyArg_ParseTuple(args, "Oy*:put", &keyobj, &val)) return NULL;
    if (KVEngine_key(keyobj, "key", &key)) goto fail;
    uint32_t vs = rs_kv_value_size(self->kv);
    if (vs && (size_t)val.len != vs) {
        PyErr_Format(PyExc_ValueError, "value must be %u bytes (value_size), got %zd", vs, val.len);
        goto fail;
    }
    rs_error err = {0};
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_put(self->kv, key, val.buf, (size_t)val.len, &err));
    self->inflight--;
    PyBuffer_Release(&val);
    if (rc) return rs_py_raise(rc, "rs_kv_put", &err);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&val);
    return NULL;
}

static PyObject *KVEngine_get(KVEngineObject *self, PyObject *keyobj) {
    uint64_t key;
    KV_ENTER(self);
    if (KVEngine_key(keyobj, "key", &key)) return NULL;
    size_t cap = rs_kv_value_size(self->kv), len = 0;
    if (!cap) cap = 256;
    for (;;) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
        if (!b) return NULL;
        int rc;
        char *buf = PyBytes_AS_STRING(b);
        self->inflight++;
        RS_PY_NOGIL(rc = rs_kv_get(self->kv, key, buf, cap, &len));
        self->inflight--;
        if (rc == 0) {
            if (len != cap && _PyBytes_Resize(&b, (Py_ssize_t)len) < 0) return NULL;
            return b;
        }
        Py_DECREF(b);
        if (rc == RS_ENOTFOUND) Py_RETURN_NONE;
        if (rc == RS_EINVAL && len > cap) { /* variable value larger than our guess */
            cap = len;
            continue;
        }
        return rs_py_raise(rc, "rs_kv_get", NULL);
    }
}

static int KVEngine_contains(KVEngineObject *self, PyObject *keyobj) {
    uint64_t key;
    if (KVEngine_check_open(self)) return -1;
    if (KVEngine_key(keyobj, "key", &key)) return -1;
    size_t len;
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_get(self->kv, key, NULL, 0, &len));
    self->inflight--;
    return rc != RS_ENOTFOUND;
}

static PyObject *KVEngine_delete(KVEngineObject *self, PyObject *keyobj) {
    uint64_t key;
    KV_ENTER(self);
    if (KVEngine_key(keyobj, "key", &key)) return NULL;
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_delete(self->kv, key));
    self->inflight--;
    if (rc == RS_ENOTFOUND) {
        rs_error e = {0};
        rs_error_set(&e, RS_ENOTFOUND, "key %llu is not stored", (unsigned long long)key);
        return rs_py_raise(rc, "rs_kv_delete", &e);
    }
    if (rc) return rs_py_raise(rc, "rs_kv_delete", NULL);
    Py_RETURN_NONE;
}

static int KVEngine_need_fixed(KVEngineObject *self, const char *method) {
    if (rs_kv_value_size(self->kv)) return 0;
    rs_error e = {0};
    rs_error_set(&e, RS_EINVAL, "%s needs fixed-size rows (open with value_size=...)", method);
    rs_py_raise_int(RS_EINVAL, "KVEngine", &e);
    return -1;
}

static PyObject *KVEngine_batch_put(KVEngineObject *self, PyObject *args) {
    PyObject *keysobj;
    Py_buffer keys, rows;
    size_t n, done = 0;
    KV_ENTER(self);
    if (KVEngine_need_fixed(self, "batch_put")) return NULL;
    if (!PyArg_ParseTuple(args, "Oy*:batch_put", &keysobj, &rows)) return NULL;
    if (KVEngine_keys(keysobj, "keys", &keys, &n)) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    uint32_t vs = rs_kv_value_size(self->kv);
    PyObject *ret = NULL;
    if ((size_t)rows.len != n * vs) {
        PyErr_Format(PyExc_ValueError,
                     "rows must be len(keys) * value_size = %zu * %u = %zu bytes, got %zd", n, vs,
                     n * vs, rows.len);
        goto out;
    }
    rs_error err = {0};
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_batch_put(self->kv, keys.buf, n, rows.buf, &done, &err));
    self->inflight--;
    if (rc) {
        rs_error_prefix(&err, "stored %zu of %zu rows: ", done, n);
        rs_py_raise(rc, "rs_kv_batch_put", &err);
        goto out;
    }
    ret = PyLong_FromSize_t(done);
out:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&rows);
    return ret;
}

static PyObject *KVEngine_batch_get_flat(KVEngineObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"keys", "out", NULL};
    PyObject *keysobj, *outobj = Py_None, *found = NULL, *ret = NULL;
    Py_buffer keys, out = {0}, fv = {0};
    size_t n;
    KV_ENTER(self);
    if (KVEngine_need_fixed(self, "batch_get_flat")) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:batch_get_flat", kwlist, &keysobj, &outobj))
        return NULL;
    if (KVEngine_keys(keysobj, "keys", &keys, &n)) return NULL;
    uint32_t vs = rs_kv_value_size(self->kv);
    PyObject *np = np_module();
    if (!np) goto out_keys;
    if (outobj == Py_None) {
        outobj = PyObject_CallMethod(np, "empty", "((nI)s)", (Py_ssize_t)n, vs, "uint8");
        if (!outobj) goto out_keys;
    } else {
        Py_INCREF(outobj);
    }
    if (PyObject_GetBuffer(outobj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "out must be a writable C-contiguous buffer, got %s",
                     Py_TYPE(outobj)->tp_name);
        goto out_obj;
    }
    if ((size_t)out.len != n * vs) {
        PyErr_Format(PyExc_ValueError,
                     "out must be len(keys) * value_size = %zu * %u = %zu bytes, got %zd", n, vs,
                     n * vs, out.len);
        goto out_view;
    }
    found = PyObject_CallMethod(np, "zeros", "ns", (Py_ssize_t)n, "bool");
    if (!found || PyObject_GetBuffer(found, &fv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto out_view;
    size_t nf = 0;
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_batch_get_flat(self->kv, keys.buf, n, out.buf, fv.buf, &nf));
    self->inflight--;
    PyBuffer_Release(&fv);
    if (rc) {
        rs_py_raise(rc, "rs_kv_batch_get_flat", NULL);
        goto out_view;
    }
    ret = PyTuple_Pack(2, outobj, found);
out_view:
    PyBuffer_Release(&out);
out_obj:
    Py_XDECREF(found);
    Py_DECREF(outobj);
out_keys:
    PyBuffer_Release(&keys);
    return ret;
}

static PyObject *KVEngine_update(KVEngineObject *self, PyObject *args) {
    PyObject *keysobj;
    Py_buffer keys, deltas;
    size_t n;
    KV_ENTER(self);
    if (KVEngine_need_fixed(self, "update")) return NULL;
    if (!PyArg_ParseTuple(args, "Oy*:update", &keysobj, &deltas)) return NULL;
    if (KVEngine_keys(keysobj, "keys", &keys, &n)) {
        PyBuffer_Release(&deltas);
        return NULL;
    }
    uint32_t vs = rs_kv_value_size(self->kv);
    PyObject *ret = NULL;
    if ((size_t)deltas.len != n * vs) {
        PyErr_Format(PyExc_ValueError,
                     "deltas must be len(keys) * value_size = %zu * %u = %zu bytes of float32, "
                     "got %zd",
                     n, vs, n * vs, deltas.len);
        goto out;
    }
    if (((uintptr_t)deltas.buf & 3) != 0) {
        PyErr_SetString(PyExc_ValueError, "deltas must be 4-byte aligned float32 data");
        goto out;
    }
    rs_error err = {0};
    int rc;
    self->inflight++;
    RS_PY_NOGIL(rc = rs_kv_update_add_f32(self->kv, keys.buf, n, deltas.buf, &err));
    self->inflight--;
    if (rc) {
        rs_py_raise(rc, "rs_kv_update_add_f32", &err);
        goto out;
    }
    ret = Py_None;
    Py_INCREF(ret);
out:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&deltas);
    return ret;
}

static PyObject *KVEngine_count(KVEngineObject *self, PyObject *noargs) {
    KV_ENTER(self);
    return PyLong_FromUnsignedLongLong(rs_kv_count(self->kv));
}

static PyObject *KVEngine_memory(KVEngineObject *self, PyObject *noargs) {
    KV_ENTER(self);
    rs_kv_memory m;
    rs_kv_get_memory(self->kv, &m);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:I,s:I,s:d,s:d,s:s,s:s}", "capacity", (unsigned long long)m.capacity,
        "index_bytes", (unsigned long long)m.index_bytes, "slab_bytes",
        (unsigned long long)m.slab_bytes, "slab_bytes_at_capacity",
        (unsigned long long)m.slab_bytes_at_capacity, "row_bytes", m.row_bytes, "row_stride",
        m.row_stride, "bytes_per_key", m.bytes_per_key, "overhead_per_key", m.overhead_per_key,
        "index_pages", m.index_pages, "slab_pages", m.slab_pages);
}

static Py_ssize_t KVEngine_len(KVEngineObject *self) {
    if (KVEngine_check_open(self)) return -1;
    return (Py_ssize_t)rs_kv_count(self->kv);
}

static PyObject *KVEngine_clear(KVEngineObject *self, PyObject *noargs) {
    KV_ENTER(self);
    if (self->inflight) {
        rs_error e = {0};
        rs_error_set(&e, RS_EBUSY, "%ld calls are still running on other threads", self->inflight);
        return rs_py_raise(RS_EBUSY, "KVEngine.clear", &e);
    }
    int rc = rs_kv_clear(self->kv);
    if (rc) return rs_py_raise(rc, "rs_kv_clear", NULL);
    Py_RETURN_NONE;
}

static PyObject *KVEngine_enter(KVEngineObject *self, PyObject *noargs) {
    KV_ENTER(self);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *KVEngine_exit(KVEngineObject *self, PyObject *args) {
    return KVEngine_close(self, NULL);
}

static PyObject *KVEngine_get_index_type(KVEngineObject *self, void *closure) {
    KV_ENTER(self);
    return PyUnicode_FromString(rs_kv_index_type_name(rs_kv_get_index_type(self->kv)));
}

static PyObject *KVEngine_get_value_size(KVEngineObject *self, void *closure) {
    KV_ENTER(self);
    uint32_t vs = rs_kv_value_size(self->kv);
    if (!vs) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(vs);
}

static PyObject *KVEngine_get_capacity(KVEngineObject *self, void *closure) {
    KV_ENTER(self);
    return PyLong_FromUnsignedLongLong(rs_kv_capacity(self->kv));
}

static PyObject *KVEngine_get_path(KVEngineObject *self, void *closure) {
    PyObject *p = self->path ? self->path : Py_None;
    Py_INCREF(p);
    return p;
}

static PyObject *KVEngine_get_closed(KVEngineObject *self, void *closure) {
    return PyBool_FromLong(self->kv == NULL);
}

static PyObject *KVEngine_repr(KVEngineObject *self) {
    if (!self->kv) return PyUnicode_FromString("<recbench.KVEngine (closed)>");
    return PyUnicode_FromFormat(
        "<recbench.KVEngine %s value_size=%u capacity=%llu count=%llu>",
        rs_kv_index_type_name(rs_kv_get_index_type(self->kv)), rs_kv_value_size(self->kv),
        (unsigned long long)rs_kv_capacity(self->kv), (unsigned long long)rs_kv_count(self->kv));
}

static PyMethodDef KVEngine_methods[] = {
    {"put", (PyCFunction)KVEngine_put, METH_VARARGS,
     "put(key, value): insert or overwrite; value is any bytes-like of value_size bytes."},
    {"get", (PyCFunction)KVEngine_get, METH_O, "get(key) -> bytes, or None if the key is absent."},
    {"delete", (PyCFunction)KVEngine_delete, METH_O,
     "delete(key): remove; recbench.errors.NotFound (a KeyError) if absent."},
    {"batch_put", (PyCFunction)KVEngine_batch_put, METH_VARARGS,
     "batch_put(keys, rows) -> n: keys uint64 buffer/sequence, rows len(keys)*value_size bytes."},
    {"batch_get_flat", (PyCFunction)(void (*)(void))KVEngine_batch_get_flat,
     METH_VARARGS | METH_KEYWORDS,
     "batch_get_flat(keys, out=None) -> (rows, found): rows is `out` (any writable buffer of "
     "len(keys)*value_size bytes) or a new uint8 array (len(keys), value_size); misses read as "
     "zero rows; found is a bool array."},
    {"update", (PyCFunction)KVEngine_update, METH_VARARGS,
     "update(keys, deltas): row[key] += deltas element-wise (float32); missing keys start at 0."},
    {"count", (PyCFunction)KVEngine_count, METH_NOARGS, "Number of keys stored."},
    {"memory", (PyCFunction)KVEngine_memory, METH_NOARGS,
     "Index and slab bytes, bytes and overhead per key at capacity, and the pages behind them."},
    {"clear", (PyCFunction)KVEngine_clear, METH_NOARGS, "Remove every key."},
    {"close", (PyCFunction)KVEngine_close, METH_NOARGS,
     "Close the engine (CCEH flushes its files); further calls raise ClosedError."},
    {"__enter__", (PyCFunction)KVEngine_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)KVEngine_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef KVEngine_getset[] = {
    {"index_type", (getter)KVEngine_get_index_type, NULL, "Canonical index type name.", NULL},
    {"value_size", (getter)KVEngine_get_value_size, NULL,
     "Bytes per row, or None for variable-length values.", NULL},
    {"capacity", (getter)KVEngine_get_capacity, NULL, "Maximum number of keys.", NULL},
    {"path", (getter)KVEngine_get_path, NULL, "Data directory (CCEH) or None.", NULL},
    {"closed", (getter)KVEngine_get_closed, NULL, "True after close().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods KVEngine_as_sequence = {
    .sq_length = (lenfunc)KVEngine_len,
    .sq_contains = (objobjproc)KVEngine_contains,
};

static PyTypeObject KVEngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recbench.KVEngine",
    .tp_basicsize = sizeof(KVEngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "KVEngine(index_type='DRAM_PET_HASH', value_size=None, capacity=..., path=None)\n\n"
              "The recbench KV engine: DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH (alias DRAM) or "
              "SSD_EXTENDIBLE_HASH (aliases SSD, CCEH; file-backed under path, reopened with its "
              "data). value_size: bytes per row (positive multiple of 4) or None for "
              "variable-length values.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)KVEngine_init,
    .tp_dealloc = (destructor)KVEngine_dealloc,
    .tp_repr = (reprfunc)KVEngine_repr,
    .tp_methods = KVEngine_methods,
    .tp_getset = KVEngine_getset,
    .tp_as_sequence = &KVEngine_as_sequence,
};

int kv_engine_module_init(PyObject *m) {
    if (PyType_Ready(&KVEngineType) < 0) return -1;
    Py_INCREF(&KVEngineType);
    if (PyModule_AddObject(m, "KVEngine", (PyObject *)&KVEngineType) < 0) {
        Py_DECREF(&KVEngineType);
        return -1;
    }
    return 0;
}
