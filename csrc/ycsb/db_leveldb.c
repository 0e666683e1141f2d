/*
 * db_leveldb.c — the `leveldb` binding through LevelDB's C API (leveldb/c.h).
 *
 * One leveldb_t per process shared by all threads. Key = YCSB key bytes, value = encoded record
 * (record.c); update is a read-modify-write; scan = iterator seek + next. LevelDB has no
 * multi-get, so a batched read is one snapshot taken for the batch and one get per key under it
 * (every key of the batch sees the same database state).
 *
 * Properties: leveldb.dbname (required directory), leveldb.destroy (default false),
 * leveldb.cache_size (LRU block cache bytes, default 0 = LevelDB's 8 MB), leveldb.write_buffer_size
 * (bytes, default 0 = LevelDB's default), leveldb.sync (default false).
 */
#if RS_HAVE_LEVELDB
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/ycsb.h"

typedef struct ldb {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_cache_t *cache;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wopts;
} ldb;

typedef struct ltx {
    ldb *l;
    leveldb_readoptions_t *snap_ropts;
} ltx;

static void ldb_close(void *p) {
    ldb *l = p;
    if (!l) return;
    if (l->db) leveldb_close(l->db);
    if (l->ropts) leveldb_readoptions_destroy(l->ropts);
    if (l->wopts) leveldb_writeoptions_destroy(l->wopts);
    if (l->opts) leveldb_options_destroy(l->opts);
    if (l->cache) leveldb_cache_destroy(l->cache);
    free(l);
}

static int fail(rs_error *err, const char *what, char *e) {
    rs_error_set(err, RS_EIO, "leveldb %s: %s", what, e);
    leveldb_free(e);
    return RS_EIO;
}

static int ldb_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc, destroy, sync;
    uint64_t cache, wbuf;
    if ((rc = rs_ycsb_data_path(props, "leveldb.dbname", 0, &path, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "leveldb.destroy", 0, &destroy, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "leveldb.sync", 0, &sync, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "leveldb.cache_size", 0, &cache, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "leveldb.write_buffer_size", 0, &wbuf, err))) return rc;
    ldb *l = calloc(1, sizeof *l);
    if (!l) return rs_error_set(err, RS_ENOMEM, "out of memory");
    l->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(l->opts, 1);
    if (wbuf) leveldb_options_set_write_buffer_size(l->opts, wbuf);
    if (cache) {
        l->cache = leveldb_cache_create_lru(cache);
        leveldb_options_set_cache(l->opts, l->cache);
    }
    char *e = NULL;
    if (destroy) {
        leveldb_destroy_db(l->opts, path, &e);
        if (e) {
            fail(err, "destroy_db", e);
            ldb_close(l);
            return RS_EIO;
        }
    }
    l->db = leveldb_open(l->opts, path, &e);
    if (e) {
        rs_error_set(err, RS_EIO, "leveldb_open(leveldb.dbname=%s): %s", path, e);
        leveldb_free(e);
        ldb_close(l);
        return RS_EIO;
    }
    l->ropts = leveldb_readoptions_create();
    l->wopts = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(l->wopts, (unsigned char)sync);
    *out = l;
    return RS_OK;
}

static int ldb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    ltx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->l = shared;
    t->snap_ropts = leveldb_readoptions_create();
    *tctx = t;
    return RS_OK;
}

static void ldb_thread_cleanup(void *p) {
    ltx *t = p;
    leveldb_readoptions_destroy(t->snap_ropts);
    free(t);
}

static int get_decode(ltx *t, const leveldb_readoptions_t *ro, const char *key, size_t klen,
                      const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    char *e = NULL;
    size_t vlen;
    char *v = leveldb_get(t->l->db, ro, key, klen, &vlen, &e);
    if (e) return fail(err, "get", e);
    if (!v) return RS_ENOTFOUND;
    rs_ycsb_result_begin(out);
    int rc = rs_ycsb_record_decode(v, vlen, fs, out);
    leveldb_free(v);
    return rc;
}

static int ldb_read(void *p, const char *table, const char *key, size_t klen,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    ltx *t = p;
    return get_decode(t, t->l->ropts, key, klen, fs, out, err);
}

static int ldb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    ltx *t = p;
    leveldb_iterator_t *it = leveldb_create_iterator(t->l->db, t->l->ropts);
    int rc = RS_OK;
    leveldb_iter_seek(it, key, klen);
    for (uint32_t i = 0; i < count && leveldb_iter_valid(it) && rc == RS_OK; i++) {
        size_t vlen;
        const char *v = leveldb_iter_value(it, &vlen);
        rs_ycsb_result_begin(out);
        rc = rs_ycsb_record_decode(v, vlen, fs, out);
        leveldb_iter_next(it);
    }
    char *e = NULL;
    leveldb_iter_get_error(it, &e);
    leveldb_iter_destroy(it);
    if (e) return fail(err, "scan", e);
    return rc;
}

static int put_record(ltx *t, const char *key, size_t klen, const char *v, size_t vlen,
                      rs_error *err) {
    char *e = NULL;
    leveldb_put(t->l->db, t->l->wopts, key, klen, v, vlen, &e);
    return e ? fail(err, "put", e) : RS_OK;
}

static int ldb_insert(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    size_t len = rs_ycsb_record_size(vals, n);
    char stackbuf[4096], *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return RS_ENOMEM;
    rs_ycsb_record_encode(vals, n, buf);
    int rc = put_record(p, key, klen, buf, len, err);
    if (buf != stackbuf) free(buf);
    return rc;
}

static int ldb_update(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    ltx *t = p;
    char *e = NULL;
    size_t vlen;
    char *v = leveldb_get(t->l->db, t->l->ropts, key, klen, &vlen, &e);
    if (e) return fail(err, "get", e);
    if (!v) return RS_ENOTFOUND;
    char *merged;
    size_t mlen;
    int rc = rs_ycsb_record_merge(v, vlen, vals, n, &merged, &mlen);
    leveldb_free(v);
    if (rc) return rs_error_set(err, rc, "leveldb update: stored record of %s is malformed", key);
    rc = put_record(t, key, klen, merged, mlen, err);
    free(merged);
    return rc;
}

static int ldb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    ltx *t = p;
    char *e = NULL;
    leveldb_delete(t->l->db, t->l->wopts, key, klen, &e);
    return e ? fail(err, "delete", e) : RS_OK;
}

static int ldb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                          size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out, uint8_t *found,
                          rs_error *err) {
    ltx *t = p;
    const leveldb_snapshot_t *snap = leveldb_create_snapshot(t->l->db);
    leveldb_readoptions_set_snapshot(t->snap_ropts, snap);
    int rc = RS_OK;
    for (size_t i = 0; i < n && (rc == RS_OK || rc == RS_ENOTFOUND); i++) {
        rc = get_decode(t, t->snap_ropts, keys[i], klens[i], fs, out, err);
        found[i] = rc == RS_OK;
    }
    leveldb_readoptions_set_snapshot(t->snap_ropts, NULL);
    leveldb_release_snapshot(t->l->db, snap);
    return rc == RS_ENOTFOUND ? RS_OK : rc;
}

const rs_ycsb_db_ops rs_ycsb_db_leveldb = {
    .name = "leveldb",
    .open = ldb_open,
    .thread_init = ldb_thread_init,
    .read = ldb_read,
    .scan = ldb_scan,
    .update = ldb_update,
    .insert = ldb_insert,
    .del = ldb_delete,
    .batch_read = ldb_batch_read,
    .thread_cleanup = ldb_thread_cleanup,
    .close = ldb_close,
};
#endif
