/*
 * db_cceh.c — the `cceh` binding: the engine's CCEH index (kv.h, RS_KV_INDEX_CCEH), which lives
 * in a file under cceh.path and keeps its data across close and reopen.
 *
 * CCEH stores fixed rows of cceh.value_size bytes. A YCSB record goes into a row as
 *
 *     u32le record_len | encoded record (record.c) | zero padding to value_size
 *
 * so every read returns the fields byte for byte. Update is a read-modify-write of that row (as
 * RecStore's CCEH binding does; not atomic against a concurrent update of the same key). Batched
 * reads are one rs_kv_batch_get_flat per batch. Scan is not supported (hash index). Keys map to
 * u64 with rs_ycsb_key_u64.
 *
 * Properties: cceh.path (required directory), cceh.capacity (keys; default recordcount +
 * (operationcount if insertproportion > 0) + 1024), cceh.value_size (row bytes; default 0 = sized
 * for a full record of fieldcount fields of fieldlength bytes; an explicit value too small for
 * that is refused at open).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/kv.h"
#include "recstore/ycsb.h"

typedef struct cceh {
    rs_kv *kv;
    uint32_t value_size;
} cceh;

typedef struct ctx {
    cceh *c;
    char *row;
    uint64_t *bkeys;
    char *brows;
    size_t bcap;
} ctx;

static void cceh_close(void *p) {
    cceh *c = p;
    if (!c) return;
    rs_kv_close(c->kv);
    free(c);
}

static int cceh_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc;
    uint64_t maxrec, cap, vs, fc, fl;
    if ((rc = rs_ycsb_data_path(props, "cceh.path", 0, &path, err))) return rc;
    if ((rc = rs_ycsb_max_records(props, &maxrec, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "cceh.capacity", maxrec + 1024, &cap, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "cceh.value_size", 0, &vs, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "fieldcount", 10, &fc, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "fieldlength", 100, &fl, err))) return rc;
    const char *prefix = rs_ycsb_props_get(props, "fieldnameprefix", "field");
    /* a full record: per field 8 bytes of lengths, the name (prefix + up to 10 digits), the value
     */
    uint64_t need = 4 + fc * (8 + strlen(prefix) + 10 + fl);
    need = (need + 7) & ~7ull;
    if (vs == 0)
        vs = need;
    else if (vs < need)
        return rs_error_set(
            err, RS_EINVAL,
            "property cceh.value_size=%llu (from %s) is smaller than a full record "
            "(%llu bytes for fieldcount=%llu fieldlength=%llu); raise it or leave it 0",
            (unsigned long long)vs, rs_ycsb_props_source(props, "cceh.value_size"),
            (unsigned long long)need, (unsigned long long)fc, (unsigned long long)fl);
    if (vs > RS_KV_MAX_VALUE)
        return rs_error_set(err, RS_EINVAL, "cceh.value_size=%llu exceeds %u",
                            (unsigned long long)vs, RS_KV_MAX_VALUE);
    if (cap == 0) return rs_error_set(err, RS_EINVAL, "property cceh.capacity must be > 0");
    cceh *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "out of memory");
    c->value_size = (uint32_t)vs;
    rs_kv_config cfg = {
        .index_type = RS_KV_INDEX_CCEH, .value_size = c->value_size, .capacity = cap, .path = path};
    if ((rc = rs_kv_open(&cfg, &c->kv, err))) {
        free(c);
        return rs_error_prefix(err, "cceh rs_kv_open(cceh.path=%s)", path);
    }
    *out = c;
    return RS_OK;
}

static int cceh_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    ctx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->c = shared;
    t->row = malloc(t->c->value_size);
    if (!t->row) {
        free(t);
        return rs_error_set(err, RS_ENOMEM, "out of memory");
    }
    *tctx = t;
    return RS_OK;
}

static void cceh_thread_cleanup(void *p) {
    ctx *t = p;
    free(t->row);
    free(t->bkeys);
    free(t->brows);
    free(t);
}

static uint32_t row_len(const char *row) {
    const unsigned char *u = (const unsigned char *)row;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static int decode_row(const cceh *c, const char *row, const rs_ycsb_fieldset *fs,
                      rs_ycsb_result *out) {
    uint32_t len = row_len(row);
    if (len > c->value_size - 4) return RS_EPROTO;
    rs_ycsb_result_begin(out);
    return rs_ycsb_record_decode(row + 4, len, fs, out);
}

static int cceh_read(void *p, const char *table, const char *key, size_t klen,
                     const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    ctx *t = p;
    size_t len;
    int rc = rs_kv_get(t->c->kv, rs_ycsb_key_u64(key, klen), t->row, t->c->value_size, &len);
    if (rc) return rc;
    rc = decode_row(t->c, t->row, fs, out);
    if (rc) return rs_error_set(err, rc, "cceh: stored row of %.*s is malformed", (int)klen, key);
    return RS_OK;
}

static int cceh_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                     const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    return rs_error_set(err, RS_ENOTSUP, "cceh: scan is not supported (CCEH is a hash index)");
}

/* Encode (n fields) into t->row with its length prefix and zero padding. */
static int fill_row(ctx *t, const char *rec, size_t len, rs_error *err) {
    if (len > t->c->value_size - 4)
        return rs_error_set(err, RS_EINVAL, "cceh: record of %zu bytes exceeds cceh.value_size=%u",
                            len + 4, t->c->value_size);
    t->row[0] = (char)len;
    t->row[1] = (char)(len >> 8);
    t->row[2] = (char)(len >> 16);
    t->row[3] = (char)(len >> 24);
    if (rec != t->row + 4) memmove(t->row + 4, rec, len);
    memset(t->row + 4 + len, 0, t->c->value_size - 4 - len);
    return RS_OK;
}

static int cceh_insert(void *p, const char *table, const char *key, size_t klen,
                       const rs_ycsb_field *v, size_t n, rs_error *err) {
    ctx *t = p;
    size_t len = rs_ycsb_record_size(v, n);
    if (len > t->c->value_size - 4) return fill_row(t, NULL, len, err);
    rs_ycsb_record_encode(v, n, t->row + 4);
    fill_row(t, t->row + 4, len, err);
    return rs_kv_put(t->c->kv, rs_ycsb_key_u64(key, klen), t->row, t->c->value_size, err);
}

static int cceh_update(void *p, const char *table, const char *key, size_t klen,
                       const rs_ycsb_field *v, size_t n, rs_error *err) {
    ctx *t = p;
    uint64_t k = rs_ycsb_key_u64(key, klen);
    size_t len;
    int rc = rs_kv_get(t->c->kv, k, t->row, t->c->value_size, &len);
    if (rc) return rc;
    uint32_t rl = row_len(t->row);
    if (rl > t->c->value_size - 4)
        return rs_error_set(err, RS_EPROTO, "cceh: stored row of %.*s is malformed", (int)klen,
                            key);
    char *merged;
    size_t mlen;
    if ((rc = rs_ycsb_record_merge(t->row + 4, rl, v, n, &merged, &mlen)))
        return rs_error_set(err, rc, "cceh: stored record of %.*s is malformed", (int)klen, key);
    rc = fill_row(t, merged, mlen, err);
    free(merged);
    if (rc) return rc;
    return rs_kv_put(t->c->kv, k, t->row, t->c->value_size, err);
}

static int cceh_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    return rs_kv_delete(((ctx *)p)->c->kv, rs_ycsb_key_u64(key, klen));
}

static int cceh_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                           size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out,
                           uint8_t *found, rs_error *err) {
    ctx *t = p;
    if (n > t->bcap) {
        free(t->bkeys);
        free(t->brows);
        t->bkeys = malloc(n * sizeof *t->bkeys);
        t->brows = malloc(n * t->c->value_size);
        t->bcap = t->bkeys && t->brows ? n : 0;
        if (!t->bcap) return rs_error_set(err, RS_ENOMEM, "out of memory for a batch of %zu", n);
    }
    for (size_t i = 0; i < n; i++)
        t->bkeys[i] = rs_ycsb_key_u64(keys[i], klens[i]);
    int rc = rs_kv_batch_get_flat(t->c->kv, t->bkeys, n, t->brows, found, NULL);
    if (rc) return rs_error_set(err, rc, "cceh batch_get_flat of %zu keys: %s", n, rs_strerror(rc));
    for (size_t i = 0; i < n; i++)
        if (found[i] && (rc = decode_row(t->c, t->brows + i * t->c->value_size, fs, out)))
            return rs_error_set(err, rc, "cceh: stored row of %s is malformed", keys[i]);
    return RS_OK;
}

const rs_ycsb_db_ops rs_ycsb_db_cceh = {
    .name = "cceh",
    .open = cceh_open,
    .thread_init = cceh_thread_init,
    .read = cceh_read,
    .scan = cceh_scan,
    .update = cceh_update,
    .insert = cceh_insert,
    .del = cceh_delete,
    .batch_read = cceh_batch_read,
    .thread_cleanup = cceh_thread_cleanup,
    .close = cceh_close,
};
