/*
 * db_lmdb.c — the `lmdb` binding through lmdb.h.
 *
 * One MDB_env (opened with MDB_NOTLS so read transactions belong to our threads, not to TLS
 * slots) and one unnamed database. Each thread keeps one read transaction and one cursor that it
 * resets after use and renews before the next read, scan or batch: a batched read or a scan runs
 * inside one read transaction (one consistent snapshot). Writes are one write transaction each;
 * update is get + merge + put inside that transaction, so it is atomic.
 *
 * Properties: lmdb.dbpath (required directory), lmdb.mapsize (bytes, default 4 GiB of address
 * space; the file grows as data arrives), lmdb.nosync (default true: no fsync per commit, like
 * RocksDB's and LevelDB's default unsynced writes; false makes every commit durable),
 * lmdb.nometasync, lmdb.noreadahead, lmdb.writemap (default false; set the LMDB flags of the same
 * names).
 */
#if RS_HAVE_LMDB
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/ycsb.h"

typedef struct mdb {
    MDB_env *env;
    MDB_dbi dbi;
    uint64_t mapsize;
} mdb;

typedef struct mtx {
    mdb *m;
    MDB_txn *rtxn;
    MDB_cursor *cur;
} mtx;

static int fail(rs_error *err, const char *what, int rc) {
    rs_error_set(err, RS_EIO, "lmdb %s: %s%s", what, mdb_strerror(rc),
                 rc == MDB_MAP_FULL ? " (raise lmdb.mapsize)" : "");
    return RS_EIO;
}

static void mdb_close_all(void *p) {
    mdb *m = p;
    if (!m) return;
    if (m->env) mdb_env_close(m->env);
    free(m);
}

static int mdb_open_all(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc, nosync, nometasync, noreadahead, writemap;
    uint64_t mapsize, threads;
    if ((rc = rs_ycsb_data_path(props, "lmdb.dbpath", 0, &path, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "lmdb.mapsize", 4ull << 30, &mapsize, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "lmdb.nosync", 1, &nosync, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "lmdb.nometasync", 0, &nometasync, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "lmdb.noreadahead", 0, &noreadahead, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "lmdb.writemap", 0, &writemap, err))) return rc;
    if ((rc = rs_ycsb_props_u64(props, "threadcount", 1, &threads, err))) return rc;
    mdb *m = calloc(1, sizeof *m);
    if (!m) return rs_error_set(err, RS_ENOMEM, "out of memory");
    m->mapsize = mapsize;
    unsigned flags = MDB_NOTLS | (nosync ? MDB_NOSYNC : 0) | (nometasync ? MDB_NOMETASYNC : 0) |
                     (noreadahead ? MDB_NORDAHEAD : 0) | (writemap ? MDB_WRITEMAP : 0);
    MDB_txn *txn = NULL;
    if ((rc = mdb_env_create(&m->env))) goto fail;
    if ((rc = mdb_env_set_mapsize(m->env, (size_t)mapsize))) goto fail;
    if ((rc = mdb_env_set_maxreaders(m->env, (unsigned)(threads * 2 + 126)))) goto fail;
    if ((rc = mdb_env_open(m->env, path, flags, 0644))) {
        rs_error_set(err, RS_EIO, "lmdb mdb_env_open(lmdb.dbpath=%s): %s", path, mdb_strerror(rc));
        mdb_close_all(m);
        return RS_EIO;
    }
    if ((rc = mdb_txn_begin(m->env, NULL, 0, &txn))) goto fail;
    if ((rc = mdb_dbi_open(txn, NULL, 0, &m->dbi))) goto fail_txn;
    if ((rc = mdb_txn_commit(txn))) goto fail;
    *out = m;
    return RS_OK;
fail_txn:
    mdb_txn_abort(txn);
fail:
    fail(err, "open", rc);
    mdb_close_all(m);
    return RS_EIO;
}

static void mdb_thread_cleanup(void *p) {
    mtx *t = p;
    if (t->cur) mdb_cursor_close(t->cur);
    if (t->rtxn) mdb_txn_abort(t->rtxn);
    free(t);
}

static int mdb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    mtx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->m = shared;
    int rc = mdb_txn_begin(t->m->env, NULL, MDB_RDONLY, &t->rtxn);
    if (!rc) rc = mdb_cursor_open(t->rtxn, t->m->dbi, &t->cur);
    if (rc) {
        mdb_thread_cleanup(t);
        return fail(err, "read transaction", rc);
    }
    mdb_txn_reset(t->rtxn);
    *tctx = t;
    return RS_OK;
}

/* Renew the thread's read transaction and cursor; pair with mdb_txn_reset. */
static int begin_read(mtx *t, rs_error *err) {
    int rc = mdb_txn_renew(t->rtxn);
    if (!rc) rc = mdb_cursor_renew(t->rtxn, t->cur);
    if (rc) {
        mdb_txn_reset(t->rtxn);
        return fail(err, "renew read transaction", rc);
    }
    return RS_OK;
}

static int get_decode(mtx *t, const char *key, size_t klen, const rs_ycsb_fieldset *fs,
                      rs_ycsb_result *out, rs_error *err) {
    MDB_val k = {klen, (void *)key}, v;
    int rc = mdb_get(t->rtxn, t->m->dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return RS_ENOTFOUND;
    if (rc) return fail(err, "get", rc);
    rs_ycsb_result_begin(out);
    return rs_ycsb_record_decode(v.mv_data, v.mv_size, fs, out);
}

static int mdb_read(void *p, const char *table, const char *key, size_t klen,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    mtx *t = p;
    int rc = begin_read(t, err);
    if (rc) return rc;
    rc = get_decode(t, key, klen, fs, out, err);
    mdb_txn_reset(t->rtxn);
    return rc;
}

static int mdb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    mtx *t = p;
    int rc = begin_read(t, err);
    if (rc) return rc;
    MDB_val k = {klen, (void *)key}, v;
    int mrc = mdb_cursor_get(t->cur, &k, &v, MDB_SET_RANGE);
    for (uint32_t i = 0; i < count && mrc == 0 && rc == RS_OK; i++) {
        rs_ycsb_result_begin(out);
        rc = rs_ycsb_record_decode(v.mv_data, v.mv_size, fs, out);
        mrc = mdb_cursor_get(t->cur, &k, &v, MDB_NEXT);
    }
    mdb_txn_reset(t->rtxn);
    if (rc == RS_OK && mrc && mrc != MDB_NOTFOUND) return fail(err, "scan", mrc);
    return rc;
}

static int write_txn(mtx *t, const char *key, size_t klen, const rs_ycsb_field *vals, size_t n,
                     int merge, rs_error *err) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(t->m->env, NULL, 0, &txn);
    if (rc) return fail(err, "begin write", rc);
    MDB_val k = {klen, (void *)key}, v, old;
    char *merged = NULL;
    size_t mlen;
    if (merge) {
        rc = mdb_get(txn, t->m->dbi, &k, &old);
        if (rc == MDB_NOTFOUND) {
            mdb_txn_abort(txn);
            return RS_ENOTFOUND;
        }
        if (rc) goto lmdb_fail;
        int r2 = rs_ycsb_record_merge(old.mv_data, old.mv_size, vals, n, &merged, &mlen);
        if (r2) {
            mdb_txn_abort(txn);
            return rs_error_set(err, r2, "lmdb update: stored record of %.*s is malformed",
                                (int)klen, key);
        }
        v = (MDB_val){mlen, merged};
        rc = mdb_put(txn, t->m->dbi, &k, &v, 0);
    } else {
        v.mv_size = rs_ycsb_record_size(vals, n);
        /* MDB_RESERVE: LMDB hands out the space in the page and we encode straight into it */
        rc = mdb_put(txn, t->m->dbi, &k, &v, MDB_RESERVE);
        if (!rc) rs_ycsb_record_encode(vals, n, v.mv_data);
    }
    free(merged);
    if (rc) goto lmdb_fail;
    if ((rc = mdb_txn_commit(txn))) return fail(err, "commit", rc);
    return RS_OK;
lmdb_fail:
    mdb_txn_abort(txn);
    return fail(err, merge ? "update" : "put", rc);
}

static int mdb_insert(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    return write_txn(p, key, klen, vals, n, 0, err);
}

static int mdb_update(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    return write_txn(p, key, klen, vals, n, 1, err);
}

static int mdb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    mtx *t = p;
    MDB_txn *txn;
    int rc = mdb_txn_begin(t->m->env, NULL, 0, &txn);
    if (rc) return fail(err, "begin write", rc);
    MDB_val k = {klen, (void *)key};
    rc = mdb_del(txn, t->m->dbi, &k, NULL);
    if (rc == MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        return RS_ENOTFOUND;
    }
    if (rc) {
        mdb_txn_abort(txn);
        return fail(err, "delete", rc);
    }
    if ((rc = mdb_txn_commit(txn))) return fail(err, "commit", rc);
    return RS_OK;
}

static int mdb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                          size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out, uint8_t *found,
                          rs_error *err) {
    mtx *t = p;
    int rc = begin_read(t, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        rc = get_decode(t, keys[i], klens[i], fs, out, err);
        found[i] = rc == RS_OK;
        if (rc != RS_OK && rc != RS_ENOTFOUND) break;
        rc = RS_OK;
    }
    mdb_txn_reset(t->rtxn);
    return rc;
}

const rs_ycsb_db_ops rs_ycsb_db_lmdb = {
    .name = "lmdb",
    .open = mdb_open_all,
    .thread_init = mdb_thread_init,
    .read = mdb_read,
    .scan = mdb_scan,
    .update = mdb_update,
    .insert = mdb_insert,
    .del = mdb_delete,
    .batch_read = mdb_batch_read,
    .thread_cleanup = mdb_thread_cleanup,
    .close = mdb_close_all,
};
#endif
