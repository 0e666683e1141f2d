/*
 * db_registry.c — the table of YCSB DB bindings: name -> ops, and for the external engines the
 * Debian package whose absence at build time left the binding out (RS_HAVE_<X> from
 * tools/build/rsbuild.py). Also the key-by-key batch read used by engines without a batch API.
 */
#include <stdio.h>
#include <string.h>

#include "recstore/ycsb.h"

extern const rs_ycsb_db_ops rs_ycsb_db_basic;
extern const rs_ycsb_db_ops rs_ycsb_db_kvdb;
extern const rs_ycsb_db_ops rs_ycsb_db_cceh;
#if RS_HAVE_ROCKSDB
extern const rs_ycsb_db_ops rs_ycsb_db_rocksdb;
#endif
#if RS_HAVE_LEVELDB
extern const rs_ycsb_db_ops rs_ycsb_db_leveldb;
#endif
#if RS_HAVE_LMDB
extern const rs_ycsb_db_ops rs_ycsb_db_lmdb;
#endif
#if RS_HAVE_SQLITE
extern const rs_ycsb_db_ops rs_ycsb_db_sqlite;
#endif
#if RS_HAVE_WIREDTIGER
extern const rs_ycsb_db_ops rs_ycsb_db_wiredtiger;
#endif

typedef struct {
    const char *name;
    const rs_ycsb_db_ops *ops; /* NULL: not compiled in */
    const char *deb;
} db_entry;

static const db_entry table[] = {
    {"kvdb", &rs_ycsb_db_kvdb, NULL},
    {"cceh", &rs_ycsb_db_cceh, NULL},
    {"basic", &rs_ycsb_db_basic, NULL},
#if RS_HAVE_ROCKSDB
    {"rocksdb", &rs_ycsb_db_rocksdb, "librocksdb-dev"},
#else
    {"rocksdb", NULL, "librocksdb-dev"},
#endif
#if RS_HAVE_LEVELDB
    {"leveldb", &rs_ycsb_db_leveldb, "libleveldb-dev"},
#else
    {"leveldb", NULL, "libleveldb-dev"},
#endif
#if RS_HAVE_LMDB
    {"lmdb", &rs_ycsb_db_lmdb, "liblmdb-dev"},
#else
    {"lmdb", NULL, "liblmdb-dev"},
#endif
#if RS_HAVE_SQLITE
    {"sqlite", &rs_ycsb_db_sqlite, "libsqlite3-dev"},
#else
    {"sqlite", NULL, "libsqlite3-dev"},
#endif
#if RS_HAVE_WIREDTIGER
    {"wiredtiger", &rs_ycsb_db_wiredtiger, "libwiredtiger-dev"},
#else
    {"wiredtiger", NULL, "libwiredtiger-dev"},
#endif
};

#define NTABLE (sizeof table / sizeof table[0])

const char *rs_ycsb_db_names(void) {
    static char names[256];
    if (!names[0])
        for (size_t i = 0; i < NTABLE; i++)
            if (table[i].ops) {
                size_t l = strlen(names);
                snprintf(names + l, sizeof names - l, "%s%s", l ? "," : "", table[i].name);
            }
    return names;
}

int rs_ycsb_db_find(const char *name, const rs_ycsb_db_ops **out, rs_error *err) {
    char all[256] = "";
    for (size_t i = 0; i < NTABLE; i++) {
        if (!strcmp(name, table[i].name)) {
            if (!table[i].ops)
                return rs_error_set(
                    err, RS_ENOTSUP,
                    "db '%s' is not in this build: its library was missing at build "
                    "time; install the Debian package %s (make deps) and rebuild",
                    name, table[i].deb);
            *out = table[i].ops;
            return RS_OK;
        }
        size_t l = strlen(all);
        snprintf(all + l, sizeof all - l, "%s%s", l ? ", " : "", table[i].name);
    }
    return rs_error_set(err, RS_EINVAL, "unknown db '%s' (known: %s)", name, all);
}

int rs_ycsb_db_batch_read_loop(const rs_ycsb_db_ops *ops, void *tctx, const char *table_name,
                               const char *const *keys, const size_t *klens, size_t n,
                               const rs_ycsb_fieldset *fields, rs_ycsb_result *out, uint8_t *found,
                               rs_error *err) {
    for (size_t i = 0; i < n; i++) {
        int rc = ops->read(tctx, table_name, keys[i], klens[i], fields, out, err);
        if (rc != RS_OK && rc != RS_ENOTFOUND) return rc;
        found[i] = rc == RS_OK;
    }
    return RS_OK;
}
