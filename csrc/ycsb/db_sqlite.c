/*
 * db_sqlite.c — the `sqlite` binding through sqlite3.h.
 *
 * Table `<table>(YCSB_KEY TEXT PRIMARY KEY, <field0> BLOB, ...)` WITHOUT ROWID, one column per
 * field (fieldcount/fieldnameprefix), created at open. Every thread has its own connection
 * (SQLITE_OPEN_NOMUTEX: used by that thread only) and a small cache of prepared statements keyed
 * by their SQL text. Values are bound as BLOBs, so bytes round-trip exactly. Update is a SQL
 * UPDATE of the given columns (0 rows changed = not found); scan is a range query ordered by
 * key; a batched read is one read transaction (BEGIN ... COMMIT) around the per-key SELECTs.
 *
 * Properties: sqlite.dbpath (required; the database file, its directory is created),
 * sqlite.journal_mode (default WAL), sqlite.synchronous (OFF|NORMAL|FULL, default NORMAL: in WAL
 * mode commits are not fsynced, like the other engines' defaults), sqlite.busy_timeout_ms
 * (default 10000: how long a writer waits for the write lock).
 */
#if RS_HAVE_SQLITE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_dir.h"
#include "recstore/ycsb.h"

#define STMT_CACHE 48

typedef struct sdb {
    char *path;
    char table[128];
    char pragmas[256];
    uint64_t busy_ms;
} sdb;

typedef struct stx {
    sdb *s;
    sqlite3 *conn;
    struct {
        char *sql;
        sqlite3_stmt *st;
    } cache[STMT_CACHE];
    int ncache, next_evict;
    char sql[8192];
} stx;

static int ident_ok(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i && c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

static int sql_fail(rs_error *err, sqlite3 *conn, const char *what) {
    rs_error_set(err, RS_EIO, "sqlite %s: %s", what, conn ? sqlite3_errmsg(conn) : "open failed");
    return RS_EIO;
}

static int open_conn(sdb *s, sqlite3 **out, rs_error *err) {
    sqlite3 *c = NULL;
    int rc = sqlite3_open_v2(
        s->path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        rs_error_set(err, RS_EIO, "sqlite open(sqlite.dbpath=%s): %s", s->path,
                     c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
        sqlite3_close(c);
        return RS_EIO;
    }
    sqlite3_busy_timeout(c, (int)s->busy_ms);
    char *msg = NULL;
    if (sqlite3_exec(c, s->pragmas, NULL, NULL, &msg) != SQLITE_OK) {
        rs_error_set(err, RS_EIO, "sqlite %s: %s", s->pragmas, msg ? msg : "failed");
        sqlite3_free(msg);
        sqlite3_close(c);
        return RS_EIO;
    }
    *out = c;
    return RS_OK;
}

static void sdb_close(void *p) {
    sdb *s = p;
    if (!s) return;
    free(s->path);
    free(s);
}

static int sdb_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    const char *path;
    int rc, sync_i;
    uint64_t fieldcount;
    if ((rc = rs_ycsb_data_path(props, "sqlite.dbpath", 1, &path, err))) return rc;
    static const char *const sync_names[] = {"OFF", "NORMAL", "FULL", NULL};
    if ((rc =
             rs_ycsb_props_choice(props, "sqlite.synchronous", "NORMAL", sync_names, &sync_i, err)))
        return rc;
    const char *journal = rs_ycsb_props_get(props, "sqlite.journal_mode", "WAL");
    static const char *const jm_names[] = {"WAL",    "DELETE", "TRUNCATE", "PERSIST",
                                           "MEMORY", "OFF",    NULL};
    int jm;
    if ((rc = rs_ycsb_props_choice(props, "sqlite.journal_mode", "WAL", jm_names, &jm, err)))
        return rc;
    if ((rc = rs_ycsb_props_u64(props, "fieldcount", 10, &fieldcount, err))) return rc;
    const char *table = rs_ycsb_props_get(props, "table", "usertable");
    const char *prefix = rs_ycsb_props_get(props, "fieldnameprefix", "field");
    if (!ident_ok(table, strlen(table)) || strlen(table) >= 100)
        return rs_error_set(err, RS_EINVAL, "sqlite: table name '%s' is not a plain identifier",
                            table);
    if (!ident_ok(prefix, strlen(prefix)))
        return rs_error_set(err, RS_EINVAL,
                            "sqlite: fieldnameprefix '%s' is not a plain identifier", prefix);
    sdb *s = calloc(1, sizeof *s);
    if (!s) return rs_error_set(err, RS_ENOMEM, "out of memory");
    s->path = strdup(path);
    snprintf(s->table, sizeof s->table, "%s", table);
    snprintf(s->pragmas, sizeof s->pragmas, "PRAGMA journal_mode=%s; PRAGMA synchronous=%s;",
             jm_names[jm], sync_names[sync_i]);
    (void)journal;
    if ((rc = rs_ycsb_props_u64(props, "sqlite.busy_timeout_ms", 10000, &s->busy_ms, err)))
        goto fail;
    sqlite3 *c;
    if ((rc = open_conn(s, &c, err))) goto fail;
    size_t cap = 256 + fieldcount * (strlen(prefix) + 32);
    char *sql = malloc(cap);
    if (!sql) {
        sqlite3_close(c);
        rc = rs_error_set(err, RS_ENOMEM, "out of memory");
        goto fail;
    }
    size_t off = (size_t)snprintf(
        sql, cap, "CREATE TABLE IF NOT EXISTS %s (YCSB_KEY TEXT PRIMARY KEY", s->table);
    for (uint64_t i = 0; i < fieldcount; i++)
        off +=
            (size_t)snprintf(sql + off, cap - off, ", %s%llu BLOB", prefix, (unsigned long long)i);
    snprintf(sql + off, cap - off, ") WITHOUT ROWID;");
    char *msg = NULL;
    if (sqlite3_exec(c, sql, NULL, NULL, &msg) != SQLITE_OK) {
        rs_error_set(err, RS_EIO, "sqlite create table %s: %s", s->table, msg ? msg : "failed");
        sqlite3_free(msg);
        rc = RS_EIO;
    }
    free(sql);
    sqlite3_close(c);
    if (rc) goto fail;
    *out = s;
    return RS_OK;
fail:
    sdb_close(s);
    return rc;
}

static int sdb_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    stx *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "out of memory");
    t->s = shared;
    int rc = open_conn(t->s, &t->conn, err);
    if (rc) {
        free(t);
        return rc;
    }
    *tctx = t;
    return RS_OK;
}

static void sdb_thread_cleanup(void *p) {
    stx *t = p;
    for (int i = 0; i < t->ncache; i++) {
        sqlite3_finalize(t->cache[i].st);
        free(t->cache[i].sql);
    }
    sqlite3_close(t->conn);
    free(t);
}

/* Prepared statement for t->sql (from the cache, or prepared and cached). */
static sqlite3_stmt *stmt(stx *t, rs_error *err) {
    for (int i = 0; i < t->ncache; i++)
        if (!strcmp(t->cache[i].sql, t->sql)) {
            sqlite3_reset(t->cache[i].st);
            sqlite3_clear_bindings(t->cache[i].st);
            return t->cache[i].st;
        }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(t->conn, t->sql, -1, &st, NULL) != SQLITE_OK) {
        sql_fail(err, t->conn, t->sql);
        return NULL;
    }
    int slot = t->ncache < STMT_CACHE ? t->ncache++ : t->next_evict++ % STMT_CACHE;
    if (t->cache[slot].st) {
        sqlite3_finalize(t->cache[slot].st);
        free(t->cache[slot].sql);
    }
    t->cache[slot].sql = strdup(t->sql);
    t->cache[slot].st = st;
    if (!t->cache[slot].sql) { /* keep the statement usable, forget it afterwards */
        t->ncache = slot;
    }
    return st;
}

static int field_list(stx *t, size_t off, const rs_ycsb_fieldset *fs, rs_error *err) {
    if (!fs || !fs->names)
        return (int)(off + (size_t)snprintf(t->sql + off, sizeof t->sql - off, "*"));
    for (size_t i = 0; i < fs->n; i++) {
        if (!ident_ok(fs->names[i].name, fs->names[i].name_len) ||
            off + fs->names[i].name_len + 4 > sizeof t->sql)
            return rs_error_set(err, RS_EINVAL,
                                "sqlite: field name '%.*s' is not a plain identifier",
                                (int)fs->names[i].name_len, fs->names[i].name);
        off += (size_t)snprintf(t->sql + off, sizeof t->sql - off, "%s%.*s", i ? "," : "",
                                (int)fs->names[i].name_len, fs->names[i].name);
    }
    return (int)off;
}

/* Append the non-key, non-NULL columns of the current row as one record. */
static int row_fields(sqlite3_stmt *st, int first_col, rs_ycsb_result *out) {
    rs_ycsb_result_begin(out);
    int nc = sqlite3_column_count(st);
    for (int c = first_col; c < nc; c++) {
        if (sqlite3_column_type(st, c) == SQLITE_NULL) continue;
        const char *name = sqlite3_column_name(st, c);
        const void *v = sqlite3_column_blob(st, c);
        int vl = sqlite3_column_bytes(st, c);
        int rc = rs_ycsb_result_add(out, name, strlen(name), v ? v : "", (size_t)vl);
        if (rc) return rc;
    }
    return RS_OK;
}

static int select_one(stx *t, const char *key, size_t klen, const rs_ycsb_fieldset *fs,
                      rs_ycsb_result *out, rs_error *err) {
    int off = (int)snprintf(t->sql, sizeof t->sql, "SELECT ");
    if ((off = field_list(t, (size_t)off, fs, err)) < 0) return off;
    snprintf(t->sql + off, sizeof t->sql - (size_t)off, " FROM %s WHERE YCSB_KEY=?1", t->s->table);
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    sqlite3_bind_text(st, 1, key, (int)klen, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int all = !fs || !fs->names;
    int out_rc = rc == SQLITE_ROW    ? row_fields(st, all ? 1 : 0, out)
                 : rc == SQLITE_DONE ? RS_ENOTFOUND
                                     : sql_fail(err, t->conn, "select");
    sqlite3_reset(st);
    return out_rc;
}

static int sdb_read(void *p, const char *table, const char *key, size_t klen,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    return select_one(p, key, klen, fs, out, err);
}

static int sdb_scan(void *p, const char *table, const char *key, size_t klen, uint32_t count,
                    const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    stx *t = p;
    int off = (int)snprintf(t->sql, sizeof t->sql, "SELECT ");
    if ((off = field_list(t, (size_t)off, fs, err)) < 0) return off;
    snprintf(t->sql + off, sizeof t->sql - (size_t)off,
             " FROM %s WHERE YCSB_KEY>=?1 ORDER BY YCSB_KEY LIMIT ?2", t->s->table);
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    sqlite3_bind_text(st, 1, key, (int)klen, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, count);
    int rc, all = !fs || !fs->names, out_rc = RS_OK;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && out_rc == RS_OK)
        out_rc = row_fields(st, all ? 1 : 0, out);
    if (out_rc == RS_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        out_rc = sql_fail(err, t->conn, "scan");
    sqlite3_reset(st);
    return out_rc;
}

static int check_fields(const rs_ycsb_field *v, size_t n, rs_error *err) {
    for (size_t i = 0; i < n; i++)
        if (!ident_ok(v[i].name, v[i].name_len))
            return rs_error_set(err, RS_EINVAL,
                                "sqlite: field name '%.*s' is not a plain identifier",
                                (int)v[i].name_len, v[i].name);
    return RS_OK;
}

static int sdb_insert(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *v, size_t n, rs_error *err) {
    stx *t = p;
    int rc = check_fields(v, n, err);
    if (rc) return rc;
    size_t off =
        (size_t)snprintf(t->sql, sizeof t->sql, "INSERT OR REPLACE INTO %s (YCSB_KEY", t->s->table);
    for (size_t i = 0; i < n && off < sizeof t->sql; i++)
        off += (size_t)snprintf(t->sql + off, sizeof t->sql - off, ",%.*s", (int)v[i].name_len,
                                v[i].name);
    if (off < sizeof t->sql)
        off += (size_t)snprintf(t->sql + off, sizeof t->sql - off, ") VALUES (?1");
    for (size_t i = 0; i < n && off < sizeof t->sql; i++)
        off += (size_t)snprintf(t->sql + off, sizeof t->sql - off, ",?%zu", i + 2);
    if (off + 2 >= sizeof t->sql)
        return rs_error_set(err, RS_EINVAL, "sqlite: too many fields (%zu)", n);
    snprintf(t->sql + off, sizeof t->sql - off, ")");
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    sqlite3_bind_text(st, 1, key, (int)klen, SQLITE_STATIC);
    for (size_t i = 0; i < n; i++)
        sqlite3_bind_blob(st, (int)i + 2, v[i].value, (int)v[i].value_len, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? RS_OK : sql_fail(err, t->conn, "insert");
    sqlite3_reset(st);
    return rc;
}

static int sdb_update(void *p, const char *table, const char *key, size_t klen,
                      const rs_ycsb_field *v, size_t n, rs_error *err) {
    stx *t = p;
    int rc = check_fields(v, n, err);
    if (rc) return rc;
    size_t off = (size_t)snprintf(t->sql, sizeof t->sql, "UPDATE %s SET ", t->s->table);
    for (size_t i = 0; i < n && off < sizeof t->sql; i++)
        off += (size_t)snprintf(t->sql + off, sizeof t->sql - off, "%s%.*s=?%zu", i ? "," : "",
                                (int)v[i].name_len, v[i].name, i + 2);
    if (off + 24 >= sizeof t->sql)
        return rs_error_set(err, RS_EINVAL, "sqlite: too many fields (%zu)", n);
    snprintf(t->sql + off, sizeof t->sql - off, " WHERE YCSB_KEY=?1");
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    sqlite3_bind_text(st, 1, key, (int)klen, SQLITE_STATIC);
    for (size_t i = 0; i < n; i++)
        sqlite3_bind_blob(st, (int)i + 2, v[i].value, (int)v[i].value_len, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? (sqlite3_changes(t->conn) ? RS_OK : RS_ENOTFOUND)
                                         : sql_fail(err, t->conn, "update");
    sqlite3_reset(st);
    return rc;
}

static int sdb_delete(void *p, const char *table, const char *key, size_t klen, rs_error *err) {
    stx *t = p;
    snprintf(t->sql, sizeof t->sql, "DELETE FROM %s WHERE YCSB_KEY=?1", t->s->table);
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    sqlite3_bind_text(st, 1, key, (int)klen, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? (sqlite3_changes(t->conn) ? RS_OK : RS_ENOTFOUND)
                                             : sql_fail(err, t->conn, "delete");
    sqlite3_reset(st);
    return rc;
}

static int exec_simple(stx *t, const char *sql, rs_error *err) {
    snprintf(t->sql, sizeof t->sql, "%s", sql);
    sqlite3_stmt *st = stmt(t, err);
    if (!st) return RS_EIO;
    int rc = sqlite3_step(st) == SQLITE_DONE ? RS_OK : sql_fail(err, t->conn, sql);
    sqlite3_reset(st);
    return rc;
}

static int sdb_batch_read(void *p, const char *table, const char *const *keys, const size_t *klens,
                          size_t n, const rs_ycsb_fieldset *fs, rs_ycsb_result *out, uint8_t *found,
                          rs_error *err) {
    stx *t = p;
    int rc = exec_simple(t, "BEGIN", err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        rc = select_one(t, keys[i], klens[i], fs, out, err);
        found[i] = rc == RS_OK;
        if (rc != RS_OK && rc != RS_ENOTFOUND) break;
        rc = RS_OK;
    }
    rs_error cerr = {0};
    int crc = exec_simple(t, "COMMIT", &cerr);
    if (rc == RS_OK && crc) {
        *err = cerr;
        rc = crc;
    }
    return rc;
}

const rs_ycsb_db_ops rs_ycsb_db_sqlite = {
    .name = "sqlite",
    .open = sdb_open,
    .thread_init = sdb_thread_init,
    .read = sdb_read,
    .scan = sdb_scan,
    .update = sdb_update,
    .insert = sdb_insert,
    .del = sdb_delete,
    .batch_read = sdb_batch_read,
    .thread_cleanup = sdb_thread_cleanup,
    .close = sdb_close,
};
#endif
