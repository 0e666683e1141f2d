/*
 * db_rocksdb.c — the `rocksdb` binding through RocksDB's C API (rocksdb/c.h).
 *
 * One rocksdb_t per process, shared by all threads (RocksDB is thread-safe). Key = the YCSB key
 * bytes; value = the encoded record (record.c). Update is a read-modify-write of the record, as
 * YCSB-cpp's RocksDB binding does it. Scan = iterator seek + next. Batched read = one
 * rocksdb_multi_get per batch.
 *
 * Properties: rocksdb.dbname (required; directory, created if missing), rocksdb.destroy
 * (default false: destroy an existing database there first), rocksdb.cache_size (block cache
 * bytes, default 0 = RocksDB's default), rocksdb.write_buffer_size (bytes, default 0 = RocksDB's
 * default), rocksdb.sync (default false: fsync the WAL on every write).
 */
#if RS_HAVE_ROCKSDB
#include <rocksdb/c.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/ycsb.h"

typedef struct rdb {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_block_based_table_options_t *topts;
    rocksdb_cache_t *cache;
    rocksdb_readoptions_t *ropts;
    rocksdb_writeoptions_t *wopts;
} rdb;

typedef struct rtx {
    rdb *r;
    size_t cap;
    char **vals;
    size_t *vlens;
    char **errs;
} rtx;

static void rdb_close(void *p) {
    rdb *r = p;
    if (!r) return;
    if (r->db) rocksdb_close(r->db);
    if (r->ropts) rocksdb_readoptions_destroy(r->ropts);
    if (r->wopts) rocksdb_writeoptions_destroy(r->wopts);
    if (r->opts) rocksdb_options_destroy(r->opts);
    if (r->topts) rocksdb_block_based_options_destroy(r->topts);
    if (r->cache) rocksdb_cache_destroy(r->cache);
    free(r);
}

static int rdb_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc, destroy, sync;
    uint64_t cache, wbuf;
    if ((rc = rs_ycsb_data_path(props, "rocksdb.dbname", 0, &path, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "rocksdb.destroy", 0, &destroy, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "rocksdb.sync", 0, &sync, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "rocksdb.cache_size", 0, &cache, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "rocksdb.write_buffer_size", 0, &wbuf, err))) return rc;
    rdb *r = calloc(1, sizeof *r);
    if (!r) return rs_error_set(err, RS_ENOMEM, "out of memory");
    r->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(r->opts, 1);
    if (wbuf) rocksdb_options_set_write_buffer_size(r->opts, wbuf);
    if (cache) {
        r->topts = rocksdb_block_based_options_create();
        r->cache = rocksdb_cache_create_lru(cache);
        rocksdb_block_based_options_set_block_cache(r->topts, r->cache);
        rocksdb_options_set_block_based_table_factory(r->opts, r->topts);
    }
    char *e = NULL;
    if (destroy) {
        rocksdb_destroy_db(r->opts, path, &e);
        if (e) {
            rs_error_set(err, RS_EIO, "rocksdb_destroy_db(%s): %s", path, e);
            free(e);
            rdb_close(r);
            return RS_EIO;
        }
    }
    r->db = rocksdb_open(r->opts, path, &e);
    if (e) {
        rs_error_set(err, RS_EIO, "rocksdb_open(rocksdb.dbname=%s): %s", path, e);
        free(e);
        rdb_close(r);
        return RS_EIO;
    }
    r->ropts = rocksdb_readoptions_create();
    r->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(r->wopts, sync);
    *out = r;
    return RS_OK;
}

static int rdb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    rtx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->r = shared;
    *tctx = t;
    return RS_OK;
}

static void rdb_thread_cleanup(void *p) {
    rtx *t = p;
    free(t->vals);
    free(t->vlens);
    free(t->errs);
    free(t);
}

static int fail(rs_error *err, const char *what, char *e) {
    rs_error_set(err, RS_EIO, "rocksdb %s: %s", what, e);
    free(e);
    return RS_EIO;
}

static int rdb_read(void *p, const char *table, const char *key, size_t klen,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    rtx *t = p;
    char *e = NULL;
    size_t vlen;
    char *v = rocksdb_get(t->r->db, t->r->ropts, key, klen, &vlen, &e);
    if (e) return fail(err, "get", e);
    if (!v) return RS_ENOTFOUND;
    rs_ycsb_result_begin(out);
    int rc = rs_ycsb_record_decode(v, vlen, fs, out);
    rocksdb_free(v);
    return rc;
}

static int rdb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    rtx *t = p;
    rocksdb_iterator_t *it = rocksdb_create_iterator(t->r->db, t->r->ropts);
    int rc = RS_OK;
    rocksdb_iter_seek(it, key, klen);
    for (uint32_t i = 0; i < count && rocksdb_iter_valid(it) && rc == RS_OK; i++) {
        size_t vlen;
        const char *v = rocksdb_iter_value(it, &vlen);
        rs_ycsb_result_begin(out);
        rc = rs_ycsb_record_decode(v, vlen, fs, out);
        rocksdb_iter_next(it);
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    rocksdb_iter_destroy(it);
    if (e) return fail(err, "scan", e);
    return rc;
}

static int put_record(rtx *t, const char *key, size_t klen, const char *v, size_t vlen,
                      rs_error *err) {
    char *e = NULL;
    rocksdb_put(t->r->db, t->r->wopts, key, klen, v, vlen, &e);
    return e ? fail(err, "put", e) : RS_OK;
}

static int rdb_insert(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    size_t len = rs_ycsb_record_size(vals, n);
    char stackbuf[4096], *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return RS_ENOMEM;
    rs_ycsb_record_encode(vals, n, buf);
    int rc = put_record(p, key, klen, buf, len, err);
    if (buf != stackbuf) free(buf);
    return rc;
}

static int rdb_update(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    rtx *t = p;
    char *e = NULL;
    size_t vlen;
    char *v = rocksdb_get(t->r->db, t->r->ropts, key, klen, &vlen, &e);
    if (e) return fail(err, "get", e);
    if (!v) return RS_ENOTFOUND;
    char *merged;
    size_t mlen;
    int rc = rs_ycsb_record_merge(v, vlen, vals, n, &merged, &mlen);
    rocksdb_free(v);
    if (rc) return rs_error_set(err, rc, "rocksdb update: stored record of %s is malformed", key);
    rc = put_record(t, key, klen, merged, mlen, err);
    free(merged);
    return rc;
}

static int rdb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    rtx *t = p;
    char *e = NULL;
    rocksdb_delete(t->r->db, t->r->wopts, key, klen, &e);
    return e ? fail(err, "delete", e) : RS_OK;
}

static int rdb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                          size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out, uint8_t *found,
                          rs_error *err) {
    rtx *t = p;
    if (n > t->cap) {
        free(t->vals);
        free(t->vlens);
        free(t->errs);
        t->vals = malloc(n * sizeof *t->vals);
        t->vlens = malloc(n * sizeof *t->vlens);
        t->errs = malloc(n * sizeof *t->errs);
        t->cap = t->vals && t->vlens && t->errs ? n : 0;
        if (!t->cap) return RS_ENOMEM;
    }
    rocksdb_multi_get(t->r->db, t->r->ropts, n, keys, klens, t->vals, t->vlens, t->errs);
    int rc = RS_OK;
    for (size_t i = 0; i < n; i++) {
        found[i] = t->vals[i] != NULL;
        if (t->errs[i]) {
            if (rc == RS_OK) rs_error_set(err, RS_EIO, "rocksdb multi_get: %s", t->errs[i]);
            rc = RS_EIO;
            free(t->errs[i]);
        }
        if (t->vals[i]) {
            rs_ycsb_result_begin(out);
            int r2 = rs_ycsb_record_decode(t->vals[i], t->vlens[i], fs, out);
            if (r2 && rc == RS_OK) rc = r2;
            rocksdb_free(t->vals[i]);
        }
    }
    return rc;
}

const rs_ycsb_db_ops rs_ycsb_db_rocksdb = {
    .name = "rocksdb",
    .open = rdb_open,
    .thread_init = rdb_thread_init,
    .read = rdb_read,
    .scan = rdb_scan,
    .update = rdb_update,
    .insert = rdb_insert,
    .del = rdb_delete,
    .batch_read = rdb_batch_read,
    .thread_cleanup = rdb_thread_cleanup,
    .close = rdb_close,
};
#endif
