/*
 * ps_conn_checks.h — checks shared by the transport tests (csrc/tests/support/, compiled into
 * every test binary by tools/build/ctest.py). They return 0, or -1 with the failed check (file,
 * line, expression) in `why`, so the caller records one RS_CHECK and prints the reason; they
 * free what they allocate on every path.
 */
#ifndef RS_TEST_PS_CONN_CHECKS_H
#define RS_TEST_PS_CONN_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/transport.h"

/* The row of `key` (value_size / 4 floats) a test writes and expects back. */
typedef void (*rs_test_row_fn)(uint64_t key, float *row);

/* On one connection of RecStore's wire opened with max_in_flight 2 (recstore+grpc,
 * recstore+brpc): PUT n rows of keys first_key.. and GET g >= n keys (the last g - n never
 * written) in flight together, a third request refused with RS_EBUSY meanwhile; the PUT and the
 * GET succeed, the GET finds n rows equal to what was put and reads the misses as zero rows; an
 * UPDATE of the same block is refused with RS_PS_INVALID_PAYLOAD (no table "default" was
 * registered). Requests above 500 keys exercise the wire's chunking. */
int rs_test_recstore_put_get(const rs_ps_conn_ops *ops, void *conn, uint64_t first_key, size_t n,
                             size_t g, size_t value_size, rs_test_row_fn fill, char *why,
                             size_t why_cap);

#endif
