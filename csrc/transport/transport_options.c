/*
 * transport_options.c — splitting "k=v;k=v" transport option strings (see transport_options.h).
 */
#include "transport/transport_options.h"

#include <stdlib.h>
#include <string.h>

int rs_transport_options_each(const char *extra, const char *who, rs_transport_option_fn fn,
                              void *ctx, rs_error *err) {
    return rs_transport_options_each_sep(extra, ";", who, fn, ctx, err);
}

int rs_transport_options_each_sep(const char *extra, const char *seps, const char *who,
                                  rs_transport_option_fn fn, void *ctx, rs_error *err) {
    if (!extra) return RS_OK;
    const char *p = extra;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, seps);
        if (len > 0) {
            char kv[128];
            if (len >= sizeof kv)
                return rs_error_set(err, RS_EINVAL, "%s option '%.64s...' is too long", who, p);
            memcpy(kv, p, len);
            kv[len] = 0;
            char *eq = strchr(kv, '=');
            if (!eq)
                return rs_error_set(err, RS_EINVAL, "%s option '%s' is not key=value", who, kv);
            *eq = 0;
            int rc = fn(ctx, kv, eq + 1, err);
            if (rc) return rc;
        }
        p += len;
        if (*p) p++; /* the separator */
    }
    return RS_OK;
}

int rs_transport_option_u64(const char *who, const char *key, const char *val, uint64_t lo,
                            uint64_t hi, uint64_t *out, rs_error *err) {
    char *e;
    unsigned long long v = strtoull(val, &e, 10);
    if (*val == 0 || *val == '-' || *e != 0 || v < lo || v > hi)
        return rs_error_set(err, RS_EINVAL, "%s option %s=%s: want an integer in %llu..%llu", who,
                            key, val, (unsigned long long)lo, (unsigned long long)hi);
    *out = v;
    return RS_OK;
}
