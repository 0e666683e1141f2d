/*
 * db_kvdb.c — the `kvdb` binding: recbench's own KV engine (kv.h) under the YCSB driver.
 *
 * Keys: rs_ycsb_key_u64 (a decimal key string is its number, "user..." keys are FNV-1a-64 of
 * the string). Two value layouts, chosen by hybridkv.mode:
 *
 *   compat  variable-length values (engine value_size 0): the encoded record (record.c).
 *           Update = get + merge + put (not atomic against a concurrent update of the same key,
 *           like RecStore's binding). read_return defaults to parse.
 *   perf    fixed rows, the engine's hot path. Without synthetic bytes a row is the field values
 *           side by side, field i at offset i*fieldlength (needs fieldlengthdistribution=constant);
 *           an update of some fields rewrites their slots (get + patch + put). With
 *           hybridkv.synthetic_bytes=N rows are N bytes built from the written values (repeated
 *           or cut to N) and every write replaces the whole row after an existence check.
 *           read_return defaults to none.
 *
 * hybridkv.read_return: none = the engine copies the value into a thread buffer and the read
 * reports found / not found; blob = also return the value bytes as one field "_blob"; parse =
 * return the requested fields (not available with synthetic rows, which have no fields).
 * Batched reads use rs_kv_batch_get_flat (one call per batch) in perf mode, per-key gets in
 * compat mode (batch_get_flat needs fixed rows). Scan is not supported: the indexes are hashes.
 *
 * Other properties: hybridkv.path (required directory; file-backed index types keep their files
 * there, DRAM indexes write nothing), hybridkv.index_type (DRAM_PET_HASH default,
 * DRAM_EXTENDIBLE_HASH, SSD_EXTENDIBLE_HASH), hybridkv.capacity (keys; default recordcount +
 * (operationcount if insertproportion > 0) + 1024: room for every record a load and run can
 * leave).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/kv.h"
#include "recstore/ycsb.h"

enum { RR_NONE, RR_BLOB, RR_PARSE };

typedef struct kvdb {
    rs_kv *kv;
    int perf;
    int read_return;
    uint32_t synthetic;  /* > 0: synthetic rows of this size */
    uint32_t value_size; /* engine row size (0 in compat mode) */
    uint32_t fieldcount, fieldlength;
    char prefix[64];
    size_t prefix_len;
} kvdb;

typedef struct kvtx {
    kvdb *d;
    char *buf;
    size_t cap;
    uint64_t *bkeys;
    uint8_t *bfound;
    char *brows;
    size_t bcap;
} kvtx;

static void kvdb_close(void *p) {
    kvdb *d = p;
    if (!d) return;
    rs_kv_close(d->kv);
    free(d);
}

static int kvdb_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc, mode, rr, fldist;
    uint64_t maxrec, cap, synth, fc, fl;
    if ((rc = rs_ycsb_data_path(props, "hybridkv.path", 0, &path, err))) return rc;
    static const char *const modes[] = {"compat", "perf", NULL};
    if ((rc = rs_ycsb_props_choice(props, "hybridkv.mode", "perf", modes, &mode, err))) return rc;
    static const char *const rrs[] = {"none", "blob", "parse", NULL};
    if ((rc = rs_ycsb_props_choice(props, "hybridkv.read_return", mode ? "none" : "parse", rrs, &rr,
                                   err)))
        return rc;
    if ((rc = rs_ycsb_props_u64(props, "hybridkv.synthetic_bytes", 0, &synth, err))) return rc;
    if ((rc = rs_ycsb_max_records(props, &maxrec, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "hybridkv.capacity", maxrec + 1024, &cap, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "fieldcount", 10, &fc, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "fieldlength", 100, &fl, err))) return rc;
    static const char *const fld[] = {"constant", "uniform", "zipfian", NULL};
    if ((rc =
             rs_ycsb_props_choice(props, "fieldlengthdistribution", "constant", fld, &fldist, err)))
        return rc;
    rs_kv_index_type it;
    if ((rc = rs_kv_index_type_parse(
             rs_ycsb_props_get(props, "hybridkv.index_type", "DRAM_PET_HASH"), &it, err)))
        return rs_error_prefix(err, "property hybridkv.index_type (from %s)",
                               rs_ycsb_props_source(props, "hybridkv.index_type"));
    if (cap == 0) return rs_error_set(err, RS_EINVAL, "property hybridkv.capacity must be > 0");
    if (synth && !mode)
        return rs_error_set(err, RS_EINVAL,
                            "hybridkv.synthetic_bytes=%llu needs hybridkv.mode=perf",
                            (unsigned long long)synth);
    if (synth > RS_KV_MAX_VALUE)
        return rs_error_set(err, RS_EINVAL, "hybridkv.synthetic_bytes=%llu exceeds %u",
                            (unsigned long long)synth, RS_KV_MAX_VALUE);
    if (synth && rr == RR_PARSE)
        return rs_error_set(err, RS_EINVAL,
                            "hybridkv.read_return=parse needs fields, but "
                            "hybridkv.synthetic_bytes rows have none: use none or blob");
    if (mode && !synth && fldist != 0)
        return rs_error_set(err, RS_EINVAL,
                            "hybridkv.mode=perf stores fixed field slots and needs "
                            "fieldlengthdistribution=constant (or set "
                            "hybridkv.synthetic_bytes, or hybridkv.mode=compat)");
    if (mode && !synth && fc * fl > RS_KV_MAX_VALUE)
        return rs_error_set(err, RS_EINVAL,
                            "fieldcount*fieldlength=%llu exceeds the %u-byte row limit",
                            (unsigned long long)(fc * fl), RS_KV_MAX_VALUE);
    kvdb *d = calloc(1, sizeof *d);
    if (!d) return rs_error_set(err, RS_ENOMEM, "out of memory");
    d->perf = mode;
    d->read_return = rr;
    d->synthetic = (uint32_t)synth;
    d->fieldcount = (uint32_t)fc;
    d->fieldlength = (uint32_t)fl;
    d->value_size = mode ? (synth ? (uint32_t)synth : (uint32_t)(fc * fl)) : 0;
    const char *prefix = rs_ycsb_props_get(props, "fieldnameprefix", "field");
    snprintf(d->prefix, sizeof d->prefix, "%s", prefix);
    d->prefix_len = strlen(d->prefix);
    rs_kv_config cfg = {
        .index_type = it, .value_size = d->value_size, .capacity = cap, .path = path};
    if ((rc = rs_kv_open(&cfg, &d->kv, err))) {
        free(d);
        return rs_error_prefix(err, "kvdb rs_kv_open(%s, hybridkv.path=%s)",
                               rs_kv_index_type_name(it), path);
    }
    *out = d;
    return RS_OK;
}

static int kvdb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    kvtx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->d = shared;
    t->cap = t->d->value_size ? t->d->value_size : 16384;
    t->buf = malloc(t->cap);
    if (!t->buf) {
        free(t);
        return rs_error_set(err, RS_ENOMEM, "out of memory");
    }
    *tctx = t;
    return RS_OK;
}

static void kvdb_thread_cleanup(void *p) {
    kvtx *t = p;
    free(t->buf);
    free(t->bkeys);
    free(t->bfound);
    free(t->brows);
    free(t);
}

/* Get a value into t->buf (grown as needed for variable values); *len = its length. */
static int get_value(kvtx *t, uint64_t k, size_t *len) {
    for (;;) {
        int rc = rs_kv_get(t->d->kv, k, t->buf, t->cap, len);
        if (rc != RS_EINVAL || *len <= t->cap) return rc;
        char *nb = malloc(*len);
        if (!nb) return RS_ENOMEM;
        free(t->buf);
        t->buf = nb;
        t->cap = *len;
    }
}

/* Slot index of a field name "<prefix><i>", or -1. */
static int slot_of(const kvdb *d, const char *name, size_t len) {
    if (len <= d->prefix_len || memcmp(name, d->prefix, d->prefix_len)) return -1;
    uint32_t v = 0;
    for (size_t i = d->prefix_len; i < len; i++) {
        if (name[i] < '0' || name[i] > '9' || v > d->fieldcount) return -1;
        v = v * 10 + (uint32_t)(name[i] - '0');
    }
    return v < d->fieldcount ? (int)v : -1;
}

/* Hand a stored value back according to read_return. */
static int deliver(const kvdb *d, const char *v, size_t len, const rs_ycsb_fieldset *fs,
                   rs_ycsb_result *out) {
    if (d->read_return == RR_NONE) return RS_OK;
    rs_ycsb_result_begin(out);
    if (d->read_return == RR_BLOB) return rs_ycsb_result_add(out, "_blob", 5, v, len);
    if (!d->perf) return rs_ycsb_record_decode(v, len, fs, out);
    char name[96];
    for (uint32_t i = 0; i < d->fieldcount; i++) {
        int nl = snprintf(name, sizeof name, "%s%u", d->prefix, i);
        if (!rs_ycsb_fieldset_wants(fs, name, (size_t)nl)) continue;
        int rc = rs_ycsb_result_add(out, name, (size_t)nl, v + (size_t)i * d->fieldlength,
                                    d->fieldlength);
        if (rc) return rc;
    }
    return RS_OK;
}

static int kvdb_read(void *p, const char *table, const char *key, size_t klen,
                     const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    kvtx *t = p;
    size_t len;
    int rc = get_value(t, rs_ycsb_key_u64(key, klen), &len);
    if (rc) return rc;
    return deliver(t->d, t->buf, len, fs, out);
}

static int kvdb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                     const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    return rs_error_set(err, RS_ENOTSUP, "kvdb: scan is not supported (%s is a hash index)",
                        rs_kv_index_type_name(rs_kv_get_index_type(((kvtx *)p)->d->kv)));
}

/* Perf-mode row with the given fields written into their slots (others left as in t->buf). */
static int patch_slots(kvtx *t, const rs_ycsb_field *v, size_t n, rs_error *err) {
    const kvdb *d = t->d;
    for (size_t i = 0; i < n; i++) {
        int s = slot_of(d, v[i].name, v[i].name_len);
        if (s < 0)
            return rs_error_set(err, RS_EINVAL, "kvdb perf mode: field '%.*s' is not %s0..%s%u",
                                (int)v[i].name_len, v[i].name, d->prefix, d->prefix,
                                d->fieldcount - 1);
        if (v[i].value_len != d->fieldlength)
            return rs_error_set(err, RS_EINVAL,
                                "kvdb perf mode: field '%.*s' has %u bytes, slots hold %u",
                                (int)v[i].name_len, v[i].name, v[i].value_len, d->fieldlength);
        memcpy(t->buf + (size_t)s * d->fieldlength, v[i].value, d->fieldlength);
    }
    return RS_OK;
}

/* Synthetic row: the written values one after another, repeated or cut to synthetic bytes. */
static void synth_row(kvtx *t, const rs_ycsb_field *v, size_t n) {
    size_t pos = 0, total = t->d->synthetic;
    size_t src = 0;
    for (size_t i = 0; i < n; i++)
        src += v[i].value_len;
    if (!src) {
        memset(t->buf, 0, total);
        return;
    }
    while (pos < total)
        for (size_t i = 0; i < n && pos < total; i++) {
            size_t c = v[i].value_len < total - pos ? v[i].value_len : total - pos;
            memcpy(t->buf + pos, v[i].value, c);
            pos += c;
        }
}

static int kvdb_write(kvtx *t, const char *key, size_t klen, const rs_ycsb_field *v, size_t n,
                      int is_update, rs_error *err) {
    const kvdb *d = t->d;
    uint64_t k = rs_ycsb_key_u64(key, klen);
    size_t len;
    int rc;
    if (!d->perf) {
        if (!is_update) {
            size_t need = rs_ycsb_record_size(v, n);
            if (need > t->cap) {
                char *nb = malloc(need);
                if (!nb) return RS_ENOMEM;
                free(t->buf);
                t->buf = nb;
                t->cap = need;
            }
            rs_ycsb_record_encode(v, n, t->buf);
            return rs_kv_put(d->kv, k, t->buf, need, err);
        }
        if ((rc = get_value(t, k, &len))) return rc;
        char *merged;
        size_t mlen;
        if ((rc = rs_ycsb_record_merge(t->buf, len, v, n, &merged, &mlen)))
            return rs_error_set(err, rc, "kvdb update: stored record of %.*s is malformed",
                                (int)klen, key);
        rc = rs_kv_put(d->kv, k, merged, mlen, err);
        free(merged);
        return rc;
    }
    if (d->synthetic) {
        if (is_update && rs_kv_get(d->kv, k, t->buf, 0, &len) == RS_ENOTFOUND) return RS_ENOTFOUND;
        synth_row(t, v, n);
        return rs_kv_put(d->kv, k, t->buf, d->synthetic, err);
    }
    if (is_update || n < d->fieldcount) { /* keep the slots not written */
        rc = get_value(t, k, &len);
        if (rc == RS_ENOTFOUND && !is_update)
            memset(t->buf, 0, d->value_size);
        else if (rc)
            return rc;
    }
    if ((rc = patch_slots(t, v, n, err))) return rc;
    return rs_kv_put(d->kv, k, t->buf, d->value_size, err);
}

static int kvdb_insert(void *p, const char *table, const char *key, size_t klen,
                       const rs_ycsb_field *v, size_t n, rs_error *err) {
    return kvdb_write(p, key, klen, v, n, 0, err);
}

static int kvdb_update(void *p, const char *table, const char *key, size_t klen,
                       const rs_ycsb_field *v, size_t n, rs_error *err) {
    return kvdb_write(p, key, klen, v, n, 1, err);
}

static int kvdb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    return rs_kv_delete(((kvtx *)p)->d->kv, rs_ycsb_key_u64(key, klen));
}

static int kvdb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                           size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out,
                           uint8_t *found, rs_error *err) {
    kvtx *t = p;
    const kvdb *d = t->d;
    if (!d->perf) {
        extern const rs_ycsb_db_ops rs_ycsb_db_kvdb;
        return rs_ycsb_db_batch_read_loop(&rs_ycsb_db_kvdb, t, table, keys, klens, n, fs, out,
                                          found, err);
    }
    if (n > t->bcap) {
        free(t->bkeys);
        free(t->brows);
        t->bkeys = malloc(n * sizeof *t->bkeys);
        t->brows = malloc(n * d->value_size);
        t->bcap = t->bkeys && t->brows ? n : 0;
        if (!t->bcap) return rs_error_set(err, RS_ENOMEM, "out of memory for a batch of %zu", n);
    }
    for (size_t i = 0; i < n; i++)
        t->bkeys[i] = rs_ycsb_key_u64(keys[i], klens[i]);
    int rc = rs_kv_batch_get_flat(d->kv, t->bkeys, n, t->brows, found, NULL);
    if (rc) return rs_error_set(err, rc, "kvdb batch_get_flat of %zu keys: %s", n, rs_strerror(rc));
    if (d->read_return == RR_NONE) return RS_OK;
    for (size_t i = 0; i < n; i++)
        if (found[i] && (rc = deliver(d, t->brows + i * d->value_size, d->value_size, fs, out)))
            return rc;
    return RS_OK;
}

const rs_ycsb_db_ops rs_ycsb_db_kvdb = {
    .name = "kvdb",
    .open = kvdb_open,
    .thread_init = kvdb_thread_init,
    .read = kvdb_read,
    .scan = kvdb_scan,
    .update = kvdb_update,
    .insert = kvdb_insert,
    .del = kvdb_delete,
    .batch_read = kvdb_batch_read,
    .thread_cleanup = kvdb_thread_cleanup,
    .close = kvdb_close,
};
