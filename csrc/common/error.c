/*
 * error.c — code-to-text table and the rs_error fill helpers. Messages are truncated, never
 * overflowed; a NULL err is accepted everywhere so callers that do not want detail pay nothing.
 */
#include "recstore/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *rs_strerror(int rc) {
    switch (rc) {
    case RS_OK: return "ok";
    case RS_EINVAL: return "invalid argument";
    case RS_ENOMEM: return "out of memory";
    case RS_ENOTFOUND: return "not found";
    case RS_EFULL: return "capacity exhausted";
    case RS_EIO: return "I/O error";
    case RS_ENOTSUP: return "not supported";
    case RS_ETIMEDOUT: return "timed out";
    case RS_ECONN: return "connection failed";
    case RS_EPROTO: return "protocol error";
    case RS_ESERVER: return "server error";
    case RS_ECLOSED: return "closed";
    case RS_EBUSY: return "busy";
    case RS_EEXIST: return "already exists";
    case RS_ENODEV: return "device not available";
    case RS_EVERIFY: return "verification failed";
    case RS_EINTR: return "interrupted";
    default: break;
    }
    if (rc > 0) return strerror(rc);
    return "unknown error";
}

int rs_error_set(rs_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int rs_error_errno(rs_error *err, int code, int errnum, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
    }
    return code;
}

int rs_error_prefix(rs_error *err, const char *fmt, ...) {
    if (!err) return 0;
    char head[RS_ERROR_MSG_MAX], old[RS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
    return err->code;
}
