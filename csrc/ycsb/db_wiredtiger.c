/*
 * db_wiredtiger.c — the `wiredtiger` binding through wiredtiger.h.
 *
 * One WT_CONNECTION; table "table:<table>" with raw-byte keys and values (key_format=u,
 * value_format=u), so keys sort bytewise like the other ordered engines. Each thread owns one
 * WT_SESSION and one cursor on the table (sessions are single-threaded). Value = encoded record
 * (record.c). Update is search + merge + update inside a transaction, retried on WT_ROLLBACK
 * (a write conflict with another thread). Scan = search_near + next. A batched read is one
 * snapshot transaction around the per-key searches.
 *
 * Properties: wiredtiger.home (required directory), wiredtiger.cache_size (WiredTiger size
 * string, default 256MB), wiredtiger.log (default false: no write-ahead log, like the other
 * engines' unsynced defaults; true enables WiredTiger logging).
 */
#if RS_HAVE_WIREDTIGER
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wiredtiger.h>

#include "data_dir.h"
#include "recstore/ycsb.h"

typedef struct wdb {
    WT_CONNECTION *conn;
    char uri[160];
} wdb;

typedef struct wtx {
    wdb *w;
    WT_SESSION *s;
    WT_CURSOR *c;
} wtx;

static int fail(rs_error *err, const char *what, int rc) {
    rs_error_set(err, RS_EIO, "wiredtiger %s: %s", what, wiredtiger_strerror(rc));
    return RS_EIO;
}

static void wdb_close(void *p) {
    wdb *w = p;
    if (!w) return;
    if (w->conn) w->conn->close(w->conn, NULL);
    free(w);
}

static int wdb_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *home;
    int rc, log;
    if ((rc = rs_ycsb_data_path(props, "wiredtiger.home", 0, &home, err))) return rc;
    if ((rc = rs_ycsb_props_bool(props, "wiredtiger.log", 0, &log, err))) return rc;
    const char *cache = rs_ycsb_props_get(props, "wiredtiger.cache_size", "256MB");
    for (const char *q = cache; *q; q++)
        if (!((*q >= '0' && *q <= '9') || *q == 'K' || *q == 'M' || *q == 'G' || *q == 'B' ||
              *q == 'k' || *q == 'm' || *q == 'g' || *q == 'b'))
            return rs_error_set(
                err, RS_EINVAL,
                "property wiredtiger.cache_size=%s (from %s): expected a size like 256MB", cache,
                rs_ycsb_props_source(props, "wiredtiger.cache_size"));
    const char *table = rs_ycsb_props_get(props, "table", "usertable");
    wdb *w = calloc(1, sizeof *w);
    if (!w) return rs_error_set(err, RS_ENOMEM, "out of memory");
    snprintf(w->uri, sizeof w->uri, "table:%s", table);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "create,cache_size=%s%s", cache, log ? ",log=(enabled=true)" : "");
    if ((rc = wiredtiger_open(home, NULL, cfg, &w->conn))) {
        rs_error_set(err, RS_EIO, "wiredtiger_open(wiredtiger.home=%s): %s", home,
                     wiredtiger_strerror(rc));
        w->conn = NULL;
        wdb_close(w);
        return RS_EIO;
    }
    WT_SESSION *s;
    if ((rc = w->conn->open_session(w->conn, NULL, NULL, &s))) {
        wdb_close(w);
        return fail(err, "open_session", rc);
    }
    rc = s->create(s, w->uri, "key_format=u,value_format=u");
    s->close(s, NULL);
    if (rc) {
        wdb_close(w);
        return fail(err, "create table", rc);
    }
    *out = w;
    return RS_OK;
}

static int wdb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    wtx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->w = shared;
    int rc = t->w->conn->open_session(t->w->conn, NULL, NULL, &t->s);
    if (!rc) rc = t->s->open_cursor(t->s, t->w->uri, NULL, NULL, &t->c);
    if (rc) {
        if (t->s) t->s->close(t->s, NULL);
        free(t);
        return fail(err, "open session/cursor", rc);
    }
    *tctx = t;
    return RS_OK;
}

static void wdb_thread_cleanup(void *p) {
    wtx *t = p;
    t->s->close(t->s, NULL); /* closes its cursors */
    free(t);
}

static int search_decode(wtx *t, const char *key, size_t klen, const rs_ycsb_fieldset *fs,
                         rs_ycsb_result *out, rs_error *err) {
    WT_ITEM k = {.data = key, .size = klen}, v;
    t->c->set_key(t->c, &k);
    int rc = t->c->search(t->c);
    if (rc == WT_NOTFOUND) return RS_ENOTFOUND;
    if (rc) return fail(err, "search", rc);
    if ((rc = t->c->get_value(t->c, &v))) return fail(err, "get_value", rc);
    rs_ycsb_result_begin(out);
    rc = rs_ycsb_record_decode(v.data, v.size, fs, out);
    t->c->reset(t->c);
    return rc;
}

static int wdb_read(void *p, const char *table, const char *key, size_t klen,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    return search_decode(p, key, klen, fs, out, err);
}

static int wdb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    wtx *t = p;
    WT_ITEM k = {.data = key, .size = klen}, v;
    int exact, rc, out_rc = RS_OK;
    t->c->set_key(t->c, &k);
    rc = t->c->search_near(t->c, &exact);
    if (rc == 0 && exact < 0) rc = t->c->next(t->c);
    for (uint32_t i = 0; i < count && rc == 0 && out_rc == RS_OK; i++) {
        if ((rc = t->c->get_value(t->c, &v))) break;
        rs_ycsb_result_begin(out);
        out_rc = rs_ycsb_record_decode(v.data, v.size, fs, out);
        rc = t->c->next(t->c);
    }
    t->c->reset(t->c);
    if (out_rc == RS_OK && rc && rc != WT_NOTFOUND) return fail(err, "scan", rc);
    return out_rc;
}

static int wdb_insert(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    wtx *t = p;
    size_t len = rs_ycsb_record_size(vals, n);
    char stackbuf[4096], *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return RS_ENOMEM;
    rs_ycsb_record_encode(vals, n, buf);
    WT_ITEM k = {.data = key, .size = klen}, v = {.data = buf, .size = len};
    t->c->set_key(t->c, &k);
    t->c->set_value(t->c, &v);
    int rc = t->c->insert(t->c);
    t->c->reset(t->c);
    if (buf != stackbuf) free(buf);
    return rc ? fail(err, "insert", rc) : RS_OK;
}

static int wdb_update(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *vals, size_t n, rs_error *err) {
    wtx *t = p;
    for (int attempt = 0;; attempt++) {
        int rc = t->s->begin_transaction(t->s, NULL);
        if (rc) return fail(err, "begin_transaction", rc);
        WT_ITEM k = {.data = key, .size = klen}, v;
        t->c->set_key(t->c, &k);
        rc = t->c->search(t->c);
        if (rc == WT_NOTFOUND) {
            t->s->rollback_transaction(t->s, NULL);
            return RS_ENOTFOUND;
        }
        char *merged = NULL;
        size_t mlen = 0;
        if (!rc) rc = t->c->get_value(t->c, &v);
        if (!rc) {
            int r2 = rs_ycsb_record_merge(v.data, v.size, vals, n, &merged, &mlen);
            if (r2) {
                t->s->rollback_transaction(t->s, NULL);
                return rs_error_set(err, r2,
                                    "wiredtiger update: stored record of %.*s is malformed",
                                    (int)klen, key);
            }
            WT_ITEM nv = {.data = merged, .size = mlen};
            t->c->set_key(t->c, &k);
            t->c->set_value(t->c, &nv);
            rc = t->c->update(t->c);
        }
        free(merged);
        if (!rc)
            rc = t->s->commit_transaction(t->s, NULL);
        else
            t->s->rollback_transaction(t->s, NULL);
        if (rc == WT_ROLLBACK && attempt < 1000) continue; /* write conflict: retry */
        return rc ? fail(err, "update", rc) : RS_OK;
    }
}

static int wdb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    wtx *t = p;
    WT_ITEM k = {.data = key, .size = klen};
    t->c->set_key(t->c, &k);
    int rc = t->c->search(t->c); /* overwrite cursors remove missing keys silently: look first */
    if (rc == WT_NOTFOUND) return RS_ENOTFOUND;
    if (!rc) rc = t->c->remove(t->c);
    t->c->reset(t->c);
    if (rc == WT_NOTFOUND) return RS_ENOTFOUND;
    return rc ? fail(err, "remove", rc) : RS_OK;
}

static int wdb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                          size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out, uint8_t *found,
                          rs_error *err) {
    wtx *t = p;
    int rc = t->s->begin_transaction(t->s, "isolation=snapshot");
    if (rc) return fail(err, "begin_transaction", rc);
    for (size_t i = 0; i < n; i++) {
        rc = search_decode(t, keys[i], klens[i], fs, out, err);
        found[i] = rc == RS_OK;
        if (rc != RS_OK && rc != RS_ENOTFOUND) break;
        rc = RS_OK;
    }
    int crc = t->s->commit_transaction(t->s, NULL);
    if (rc == RS_OK && crc) rc = fail(err, "commit", crc);
    return rc;
}

const rs_ycsb_db_ops rs_ycsb_db_wiredtiger = {
    .name = "wiredtiger",
    .open = wdb_open,
    .thread_init = wdb_thread_init,
    .read = wdb_read,
    .scan = wdb_scan,
    .update = wdb_update,
    .insert = wdb_insert,
    .del = wdb_delete,
    .batch_read = wdb_batch_read,
    .thread_cleanup = wdb_thread_cleanup,
    .close = wdb_close,
};
#endif
