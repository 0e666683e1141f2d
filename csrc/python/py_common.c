/*
 * py_common.c — error mapping, build info and buffer helpers shared by recbench._kv, ._ps and
 * ._ycsb (each module links its own copy; there is no cross-module C state).
 *
 * Error mapping table: rs code -> class name in recbench.errors. Unknown codes map to
 * RecbenchError. The class is looked up at raise time, so the table has no import-order issues.
 */
#include "py_common.h"

#include <string.h>

#include "recstore/kv.h"

static const struct {
    int code;
    const char *cls;
} error_table[] = {
    {RS_EINVAL, "InvalidArgument"},
    {RS_ENOMEM, "OutOfMemory"},
    {RS_ENOTFOUND, "NotFound"},
    {RS_EFULL, "CapacityError"},
    {RS_EIO, "IOFailure"},
    {RS_ENOTSUP, "NotSupported"},
    {RS_ETIMEDOUT, "Timeout"},
    {RS_ECONN, "ConnectionFailed"},
    {RS_EPROTO, "ProtocolError"},
    {RS_ESERVER, "ServerError"},
    {RS_ECLOSED, "ClosedError"},
    {RS_EBUSY, "Busy"},
    {RS_EEXIST, "AlreadyExists"},
    {RS_ENODEV, "DeviceUnavailable"},
    {RS_EVERIFY, "VerificationError"},
    {RS_EINTR, "Interrupted"},
};

PyObject *rs_py_raise(int rc, const char *func, const rs_error *err) {
    const char *cls = "RecbenchError";
    for (size_t i = 0; i < sizeof error_table / sizeof error_table[0]; i++)
        if (error_table[i].code == rc) cls = error_table[i].cls;
    const char *detail = (err && err->msg[0]) ? err->msg : rs_strerror(rc);
    PyObject *mod = PyImport_ImportModule("recbench.errors");
    if (!mod) return NULL;
    PyObject *exc = PyObject_GetAttrString(mod, cls);
    Py_DECREF(mod);
    if (!exc) return NULL;
    PyObject *msg = PyUnicode_FromFormat("%s: %s", func, detail);
    if (msg) {
        PyObject *args = Py_BuildValue("(O)", msg);
        if (args) {
            PyObject *inst = PyObject_Call(exc, args, NULL);
            if (inst) {
                PyObject *code = PyLong_FromLong(rc);
                if (code) {
                    PyObject_SetAttrString(inst, "code", code);
                    Py_DECREF(code);
                }
                PyErr_SetObject(exc, inst);
                Py_DECREF(inst);
            }
            Py_DECREF(args);
        }
        Py_DECREF(msg);
    }
    Py_DECREF(exc);
    return NULL;
}

int rs_py_raise_int(int rc, const char *func, const rs_error *err) {
    rs_py_raise(rc, func, err);
    return -1;
}

#ifndef RS_BUILD_TYPE
#define RS_BUILD_TYPE     "unknown"
#define RS_BUILD_CC       "unknown"
#define RS_BUILD_CFLAGS   ""
#define RS_BUILD_FEATURES ""
#define RS_BUILD_COMMIT   "unknown"
#define RS_BUILD_DIRTY    0
#define RS_VERSION        "0"
#endif

PyObject *rs_py_build_info(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    PyObject *features = PyList_New(0);
    if (!features) return NULL;
    const char *f = RS_BUILD_FEATURES;
    while (*f) {
        const char *comma = strchr(f, ',');
        size_t len = comma ? (size_t)(comma - f) : strlen(f);
        PyObject *s = PyUnicode_FromStringAndSize(f, (Py_ssize_t)len);
        if (!s || PyList_Append(features, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(features);
            return NULL;
        }
        Py_DECREF(s);
        f += len + (comma ? 1 : 0);
    }
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:s,s:s,s:N,s:s}", "version", RS_VERSION, "commit",
                         RS_BUILD_COMMIT, "dirty", RS_BUILD_DIRTY ? Py_True : Py_False,
                         "build_type", RS_BUILD_TYPE, "compiler", RS_BUILD_CC, "cflags",
                         RS_BUILD_CFLAGS, "features", features, "row_kernel", rs_kv_row_kernel());
}

int rs_py_get_keys(PyObject *obj, const char *argname, Py_buffer *view, size_t *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous buffer of uint64 keys (got %s)",
                     argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int bytes_like = view->itemsize == 1;
    if (!(view->itemsize == 8 || bytes_like) || view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "%s must hold 8-byte integer keys: itemsize %zd, %zd bytes",
                     argname, view->itemsize, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->format && !bytes_like &&
        strchr("qQlL", view->format[strlen(view->format) - 1]) == NULL) {
        PyErr_Format(PyExc_ValueError, "%s must be 64-bit integers, got buffer format '%s'",
                     argname, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    *n = (size_t)view->len / 8;
    return 0;
}
