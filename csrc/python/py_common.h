/*
 * py_common.h — what every recbench extension module shares: the GIL-release macro, the one
 * place that turns rs_* error codes into recbench.errors exceptions, and build_info().
 * Only files under csrc/python include Python.h.
 */
#ifndef RS_PY_COMMON_H
#define RS_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "recstore/error.h"

/*
 * RS_PY_NOGIL(stmt): run stmt with the GIL released. The region may touch only C-owned memory
 * and the memory of Py_buffer views that the caller holds (PyObject_GetBuffer) until after the
 * region ends; it must not create, read or decref Python objects.
 */
#define RS_PY_NOGIL(...)                                                                           \
    do {                                                                                           \
        Py_BEGIN_ALLOW_THREADS __VA_ARGS__;                                                        \
        Py_END_ALLOW_THREADS                                                                       \
    } while (0)

/* Raise the recbench.errors class mapped to rc, with "<func>: <detail or strerror>". Returns NULL
 * so callers can `return rs_py_raise(rc, "rs_kv_open", &err);`. err may be NULL. */
PyObject *rs_py_raise(int rc, const char *func, const rs_error *err);

/* Like rs_py_raise but returns -1 (for init functions / setters). */
int rs_py_raise_int(int rc, const char *func, const rs_error *err);

/* A dict describing this build: version, commit, dirty, build_type, compiler, cflags, features. */
PyObject *rs_py_build_info(PyObject *self, PyObject *noargs);

/* Parse an unsigned 64-bit keys buffer: accepts any contiguous buffer whose itemsize is 8
 * (numpy uint64/int64) or a bytes-like of length % 8 == 0. Fills view (release with
 * PyBuffer_Release) and *n. Raises ValueError naming `argname` on bad input. */
int rs_py_get_keys(PyObject *obj, const char *argname, Py_buffer *view, size_t *n);

#endif
