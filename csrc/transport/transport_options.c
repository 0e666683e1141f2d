/*
 * transport_options.c — splitting "k=v;k=v" transport option strings and parsing their integer and
 * boolean values, the same syntax for every transport (see transport_options.h).
 */
#include "transport/transport_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Digits only: no sign, space, "0x" or suffix, so "0x10", "1e3", " 5" and "5k" are refused. */
static int all_digits(const char *v) {
    if (!*v) return 0;
    for (; *v; v++)
        if (*v < '0' || *v > '9') return 0;
    return 1;
}

int rs_transport_option_u64(const char *who, const char *key, const char *val, uint64_t lo,
                            uint64_t hi, uint64_t *out, rs_error *err) {
    errno = 0;
    unsigned long long v = all_digits(val) ? strtoull(val, NULL, 10) : 0;
    if (!all_digits(val) || errno == ERANGE || v < lo || v > hi)
        return rs_error_set(err, RS_EINVAL, "%s option %s=%s: want an integer in %llu..%llu", who,
                            key, val, (unsigned long long)lo, (unsigned long long)hi);
    *out = v;
    return RS_OK;
}

int rs_transport_option_i64(const char *who, const char *key, const char *val, int64_t lo,
                            int64_t hi, int64_t *out, rs_error *err) {
    const char *digits = val[0] == '-' ? val + 1 : val;
    errno = 0;
    long long v = all_digits(digits) ? strtoll(val, NULL, 10) : 0;
    if (!all_digits(digits) || errno == ERANGE || v < lo || v > hi)
        return rs_error_set(err, RS_EINVAL, "%s option %s=%s: want an integer in %lld..%lld", who,
                            key, val, (long long)lo, (long long)hi);
    *out = v;
    return RS_OK;
}

static const char *const true_words[] = {"1", "true", "yes", "on", "t", "y"};
static const char *const false_words[] = {"0", "false", "no", "off", "f", "n"};

int rs_transport_option_bool(const char *who, const char *key, const char *val, int *out,
                             rs_error *err) {
    for (size_t i = 0; i < sizeof true_words / sizeof *true_words; i++) {
        if (!strcasecmp(val, true_words[i])) {
            *out = 1;
            return RS_OK;
        }
        if (!strcasecmp(val, false_words[i])) {
            *out = 0;
            return RS_OK;
        }
    }
    return rs_error_set(err, RS_EINVAL,
                        "%s option %s=%s: want true or false (or 1/0, yes/no, on/off)", who, key,
                        val);
}

int rs_transport_option_choice(const char *who, const char *key, const char *val,
                               const char *const *names, int n, int *out, rs_error *err) {
    for (int i = 0; i < n; i++)
        if (!strcmp(val, names[i])) {
            *out = i;
            return RS_OK;
        }
    char words[256] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof words; i++)
        len += (size_t)snprintf(words + len, sizeof words - len, "%s%s",
                                i == 0       ? ""
                                : i == n - 1 ? " or "
                                             : ", ",
                                names[i]);
    return rs_error_set(err, RS_EINVAL, "%s option %s=%s: expected %s", who, key, val, words);
}
