/*
 * error.h — return codes and the detailed-error buffer shared by every recbench subsystem.
 *
 * Every public function returns an int: 0 (RS_OK) on success or a negative RS_E* code. The codes
 * live in a reserved range (-30999..-30000) so they never collide with -errno values that some
 * helpers pass through. Where a failure needs detail (an address, a peer, a field name) the
 * function also takes an `rs_error *err` and fills its message; `err` may always be NULL. The
 * Python layer maps each code to one exception class (recbench/errors.py, csrc/python/py_common.c).
 */
#ifndef RECSTORE_ERROR_H
#define RECSTORE_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    RS_OK = 0,
    RS_EINVAL = -30001,    /* bad argument or input; the message names it */
    RS_ENOMEM = -30002,    /* allocation failed */
    RS_ENOTFOUND = -30003, /* key or object does not exist */
    RS_EFULL = -30004,     /* index or store reached its capacity */
    RS_EIO = -30005,       /* file or socket I/O failed (errno text in the message) */
    RS_ENOTSUP = -30006,   /* operation not supported by this engine/transport/build */
    RS_ETIMEDOUT = -30007, /* a deadline passed */
    RS_ECONN = -30008,     /* connection refused, reset or closed by the peer */
    RS_EPROTO = -30009,    /* malformed bytes from the network or a file */
    RS_ESERVER = -30010,   /* the server answered with an error status */
    RS_ECLOSED = -30011,   /* handle already closed or shutting down */
    RS_EBUSY = -30012,     /* resource in use (port bound, slot taken) */
    RS_EEXIST = -30013,    /* already exists */
    RS_ENODEV =
        -30014, /* required device absent (e.g. no RDMA verbs device): a skip, not a failure */
    RS_EVERIFY = -30015, /* data verification failed */
    RS_EINTR = -30016,   /* interrupted by a stop request */
};

#define RS_ERROR_MSG_MAX 512

/* A code plus a human-readable message. Zero-initialise it (`rs_error e = {0};`). */
typedef struct rs_error {
    int code;
    char msg[RS_ERROR_MSG_MAX];
} rs_error;

/* Static text for a code ("invalid argument", ...); never NULL. Also handles positive errno. */
const char *rs_strerror(int rc);

/* Fill err (if non-NULL) with code and a printf-style message; returns code, so callers can
 * `return rs_error_set(err, RS_EINVAL, "value_size %u is not a multiple of 4", vs);` */
int rs_error_set(rs_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like rs_error_set, appending ": <strerror(errnum)>". */
int rs_error_errno(rs_error *err, int code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefix an existing message with context ("shard 2: ..."). Keeps the code. Returns err->code. */
int rs_error_prefix(rs_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
