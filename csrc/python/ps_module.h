/*
 * ps_module.h — what the files of recbench._ps share: each Python type's registration function
 * and the bench functions' method table. ps_module.c calls them from PyInit__ps.
 */
#ifndef RS_PY_PS_MODULE_H
#define RS_PY_PS_MODULE_H

#include "py_common.h"

/* ps_server_type.c: recbench._ps.Server */
int rs_py_ps_server_type_init(PyObject *module);
/* ps_client_type.c: recbench._ps.Client */
int rs_py_ps_client_type_init(PyObject *module);
/* ps_bench_funcs.c: bench_load, bench_run, bench_stop, bench_row */
extern PyMethodDef rs_py_ps_bench_methods[];
/* rc_debug_inject (ps_rc_debug.c): RC transport test hook */
extern PyMethodDef rs_py_ps_rc_methods[];

#endif
