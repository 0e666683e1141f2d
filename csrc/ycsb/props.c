/*
 * props.c — YCSB properties: `-P` files and `-p key=value` overrides in command-line order.
 *
 * Entries are kept in an array in insertion order; setting an existing key replaces its value and
 * source in place, so iteration shows each key once with its final value. Every entry remembers
 * its source ("workloada:12" or "-p") and typed getters put the key, the bad value and the source
 * into their error message. Lookups are linear: a run has a few dozen properties and reads them
 * once at start-up, never on the hot path.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recstore/ycsb.h"

typedef struct prop {
    char *key, *value, *source;
} prop;

struct rs_ycsb_props {
    prop *v;
    size_t n, cap;
};

int rs_ycsb_props_new(rs_ycsb_props **out) {
    *out = calloc(1, sizeof **out);
    return *out ? RS_OK : RS_ENOMEM;
}

void rs_ycsb_props_free(rs_ycsb_props *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].key);
        free(p->v[i].value);
        free(p->v[i].source);
    }
    free(p->v);
    free(p);
}

static prop *find(const rs_ycsb_props *p, const char *key) {
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i].key, key) == 0) return &p->v[i];
    return NULL;
}

int rs_ycsb_props_set(rs_ycsb_props *p, const char *key, const char *value, const char *source) {
    char *v = strdup(value), *s = strdup(source ? source : "-p");
    if (!v || !s) goto fail;
    prop *e = find(p, key);
    if (e) {
        free(e->value);
        free(e->source);
        e->value = v;
        e->source = s;
        return RS_OK;
    }
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 32;
        prop *nv = realloc(p->v, nc * sizeof *nv);
        if (!nv) goto fail;
        p->v = nv;
        p->cap = nc;
    }
    char *k = strdup(key);
    if (!k) goto fail;
    p->v[p->n++] = (prop){k, v, s};
    return RS_OK;
fail:
    free(v);
    free(s);
    return RS_ENOMEM;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

int rs_ycsb_props_set_arg(rs_ycsb_props *p, const char *arg, rs_error *err) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return rs_error_set(err, RS_EINVAL, "-p '%s': expected KEY=VALUE", arg);
    char *key = strndup(arg, (size_t)(eq - arg));
    if (!key) return RS_ENOMEM;
    int rc = rs_ycsb_props_set(p, trim(key), eq + 1, "-p");
    free(key);
    return rc;
}

int rs_ycsb_props_load_file(rs_ycsb_props *p, const char *path, rs_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return rs_error_errno(err, RS_EIO, errno, "cannot open property file '%s'", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char line[8192], src[600];
    int lineno = 0, rc = RS_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        char *sep = strpbrk(s, "=:");
        if (!sep || sep == s) {
            rc = rs_error_set(err, RS_EINVAL, "%s:%d: expected 'key=value', got '%.200s'", path,
                              lineno, s);
            break;
        }
        *sep = 0;
        snprintf(src, sizeof src, "%s:%d", base, lineno);
        if ((rc = rs_ycsb_props_set(p, trim(s), trim(sep + 1), src)) != RS_OK) break;
    }
    fclose(f);
    return rc;
}

const char *rs_ycsb_props_get(const rs_ycsb_props *p, const char *key, const char *def) {
    prop *e = find(p, key);
    return e ? e->value : def;
}

const char *rs_ycsb_props_source(const rs_ycsb_props *p, const char *key) {
    prop *e = find(p, key);
    return e ? e->source : "default";
}

int rs_ycsb_props_u64(const rs_ycsb_props *p, const char *key, uint64_t def, uint64_t *out,
                      rs_error *err) {
    prop *e = find(p, key);
    if (!e) {
        *out = def;
        return RS_OK;
    }
    char *end;
    errno = 0;
    const char *s = e->value;
    while (isspace((unsigned char)*s))
        s++;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '-' || end == s || *end || errno)
        return rs_error_set(err, RS_EINVAL,
                            "property %s=%s (from %s): expected a non-negative integer", key,
                            e->value, e->source);
    *out = v;
    return RS_OK;
}

int rs_ycsb_props_double(const rs_ycsb_props *p, const char *key, double def, double *out,
                         rs_error *err) {
    prop *e = find(p, key);
    if (!e) {
        *out = def;
        return RS_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(e->value, &end);
    if (end == e->value || *end || errno)
        return rs_error_set(err, RS_EINVAL, "property %s=%s (from %s): expected a number", key,
                            e->value, e->source);
    *out = v;
    return RS_OK;
}

int rs_ycsb_props_bool(const rs_ycsb_props *p, const char *key, int def, int *out, rs_error *err) {
    prop *e = find(p, key);
    if (!e) {
        *out = def;
        return RS_OK;
    }
    if (!strcasecmp(e->value, "true") || !strcmp(e->value, "1"))
        *out = 1;
    else if (!strcasecmp(e->value, "false") || !strcmp(e->value, "0"))
        *out = 0;
    else
        return rs_error_set(err, RS_EINVAL, "property %s=%s (from %s): expected true or false", key,
                            e->value, e->source);
    return RS_OK;
}

int rs_ycsb_props_choice(const rs_ycsb_props *p, const char *key, const char *def,
                         const char *const *choices, int *out, rs_error *err) {
    prop *e = find(p, key);
    const char *v = e ? e->value : def;
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        if (!strcasecmp(v, choices[i])) {
            *out = i;
            return RS_OK;
        }
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? "|" : "", choices[i]);
    }
    return rs_error_set(err, RS_EINVAL, "property %s=%s (from %s): expected one of %s", key, v,
                        e ? e->source : "default", list);
}
