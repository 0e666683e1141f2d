/*
 * ps_module.h — what the files of recbench._ps share: each Python type's registration function
 * and the bench functions' method table. ps_module.c calls them from PyInit__ps.
 */
#ifndef RS_PY_PS_MODULE_H
#define RS_PY_PS_MODULE_H

#include "py_common.h"

/* ps_endpoints.c: `endpoints` [(host, port) per shard] as C arrays */
typedef struct rs_py_ps_endpoints {
    char **hosts;
    uint16_t *ports;
    uint32_t n;
} rs_py_ps_endpoints;
/* 0, or -1 with a Python exception naming the bad entry (nothing to free then). */
int rs_py_ps_endpoints_parse(PyObject *endpoints, rs_py_ps_endpoints *out);
void rs_py_ps_endpoints_free(rs_py_ps_endpoints *e);

/* ps_server_type.c: recbench._ps.Server */
int rs_py_ps_server_type_init(PyObject *module);
/* ps_client_type.c: recbench._ps.Client */
int rs_py_ps_client_type_init(PyObject *module);
/* ps_bench_funcs.c: bench_load, bench_run, bench_stop, bench_row */
extern PyMethodDef rs_py_ps_bench_methods[];
/* rc_debug_inject (ps_rc_debug.c): RC transport test hook */
extern PyMethodDef rs_py_ps_rc_methods[];

#endif
