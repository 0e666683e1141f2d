/*
 * test_ycsb_bindings.c — one conformance test that every YCSB DB binding compiled in passes:
 * insert, read (all fields and a subset), update (changed field replaced, others kept), read and
 * update of a missing key, scan (records in key order, or the not-supported status), batched
 * read (hits and a miss), delete. Values contain every byte value (0x00 and 0xff included) and
 * must come back byte for byte. Each engine gets a fresh directory `<tmp>/data` and afterwards
 * `<tmp>` must hold nothing but `data`, and the working directory must be unchanged.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recstore/ycsb.h"
#include "rs_test.h"

#define NFIELDS 3
#define VLEN    40

static const char *path_prop(const char *db) {
    if (!strcmp(db, "rocksdb")) return "rocksdb.dbname";
    if (!strcmp(db, "leveldb")) return "leveldb.dbname";
    if (!strcmp(db, "lmdb")) return "lmdb.dbpath";
    if (!strcmp(db, "sqlite")) return "sqlite.dbpath";
    if (!strcmp(db, "wiredtiger")) return "wiredtiger.home";
    if (!strcmp(db, "kvdb")) return "hybridkv.path";
    if (!strcmp(db, "cceh")) return "cceh.path";
    return NULL;
}

static void rm_rf(const char *path) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

/* Names in a directory, sorted and comma-joined. */
static void listing(const char *dir, char *out, size_t cap) {
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..")) {
            size_t l = strlen(out);
            snprintf(out + l, cap - l, "%s%s", l ? "," : "", ents[i]->d_name);
        }
        free(ents[i]);
    }
    if (n >= 0) free(ents);
}

static char fname[NFIELDS][8];
static char vals[6][NFIELDS][VLEN]; /* record r, field f */

static void make_values(void) {
    for (int f = 0; f < NFIELDS; f++)
        snprintf(fname[f], sizeof fname[f], "field%d", f);
    for (int r = 0; r < 6; r++)
        for (int f = 0; f < NFIELDS; f++)
            for (int i = 0; i < VLEN; i++)
                vals[r][f][i] = (char)((r * 97 + f * 31 + i * 7) & 0xff); /* all byte values */
    vals[0][0][0] = 0;
    vals[0][0][1] = (char)0xff;
}

static void fields_of(int r, rs_ycsb_field *out) {
    for (int f = 0; f < NFIELDS; f++)
        out[f] = (rs_ycsb_field){fname[f], (uint32_t)strlen(fname[f]), vals[r][f], VLEN};
}

/* The result holds exactly the fields of record r (field `only` if >= 0) for record index rec. */
static int result_matches(const rs_ycsb_result *res, uint32_t rec, int r, int only,
                          const char *changed_value) {
    int seen = 0;
    for (size_t i = 0; i < res->n; i++) {
        if (res->rec[i] != rec) continue;
        const rs_ycsb_field *fl = &res->fields[i];
        int f = -1;
        for (int k = 0; k < NFIELDS; k++)
            if (fl->name_len == strlen(fname[k]) && !memcmp(fl->name, fname[k], fl->name_len))
                f = k;
        if (f < 0 || (only >= 0 && f != only)) return 0;
        const char *want = (changed_value && f == 1) ? changed_value : vals[r][f];
        if (fl->value_len != VLEN || memcmp(fl->value, want, VLEN)) return 0;
        seen++;
    }
    return seen == (only >= 0 ? 1 : NFIELDS);
}

static void key_of(int r, char *k, size_t *len) {
    *len = (size_t)sprintf(k, "user%d", r + 1); /* user1..user6: sorted like r */
}

static void conformance(const char *db, const char *const *extra) {
    const rs_ycsb_db_ops *ops;
    rs_error err = {0};
    RS_CHECK(rs_ycsb_db_find(db, &ops, &err) == RS_OK);
    char tmpl[] = "/tmp/rs_ycsb_conf_XXXXXX";
    char *root = mkdtemp(tmpl);
    RS_CHECK(root != NULL);
    if (!root) return;
    char data[512], path[600], cwd_before[8192], cwd_after[8192], cwd[4096];
    snprintf(data, sizeof data, "%s/data", root);
    if (!strcmp(db, "sqlite"))
        snprintf(path, sizeof path, "%s/ycsb.sqlite3", data);
    else
        snprintf(path, sizeof path, "%s", data);
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    listing(".", cwd_before, sizeof cwd_before);

    rs_ycsb_props *props;
    rs_ycsb_props_new(&props);
    rs_ycsb_props_set(props, "fieldcount", "3", "test");
    rs_ycsb_props_set(props, "fieldlength", "40", "test");
    rs_ycsb_props_set(props, "recordcount", "6", "test");
    rs_ycsb_props_set(props, "basic.silent", "true", "test");
    rs_ycsb_props_set(props, "hybridkv.mode", "compat", "test");
    rs_ycsb_props_set(props, "hybridkv.read_return", "parse", "test");
    if (path_prop(db)) rs_ycsb_props_set(props, path_prop(db), path, "test");
    for (int i = 0; extra && extra[i]; i++)
        rs_ycsb_props_set_arg(props, extra[i], &err);

    void *shared = NULL, *t = NULL;
    int rc = ops->open(props, &shared, &err);
    if (rc) fprintf(stderr, "%s open: %s\n", db, err.msg);
    RS_CHECK_EQ(rc, RS_OK);
    if (rc) goto out;
    rc = ops->thread_init(shared, 0, &t, &err);
    RS_CHECK_EQ(rc, RS_OK);
    if (rc) {
        ops->close(shared);
        goto out;
    }
    rs_ycsb_result res;
    rs_ycsb_result_init(&res);
    rs_ycsb_field fv[NFIELDS];
    char key[32];
    size_t klen;
    for (int r = 0; r < 5; r++) { /* user1..user5; user6 stays missing */
        fields_of(r, fv);
        key_of(r, key, &klen);
        rc = ops->insert(t, "usertable", key, klen, fv, NFIELDS, &err);
        if (rc) fprintf(stderr, "%s insert: %s\n", db, err.msg);
        RS_CHECK_EQ(rc, RS_OK);
    }
    /* read all fields */
    key_of(2, key, &klen);
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, NULL, &res, &err), RS_OK);
    RS_CHECK(result_matches(&res, 0, 2, -1, NULL));
    /* read one field */
    rs_ycsb_field want = {fname[2], 6, NULL, 0};
    rs_ycsb_fieldset one = {&want, 1};
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, &one, &res, &err), RS_OK);
    RS_CHECK(result_matches(&res, 0, 2, 2, NULL));
    /* missing key */
    key_of(5, key, &klen);
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, NULL, &res, &err), RS_ENOTFOUND);
    fields_of(5, fv);
    RS_CHECK_EQ(ops->update(t, "usertable", key, klen, &fv[1], 1, &err), RS_ENOTFOUND);
    /* update field1 of user3: field0/field2 keep their bytes */
    char newval[VLEN];
    for (int i = 0; i < VLEN; i++)
        newval[i] = (char)(255 - i);
    rs_ycsb_field upd = {fname[1], 6, newval, VLEN};
    key_of(2, key, &klen);
    rc = ops->update(t, "usertable", key, klen, &upd, 1, &err);
    if (rc) fprintf(stderr, "%s update: %s\n", db, err.msg);
    RS_CHECK_EQ(rc, RS_OK);
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, NULL, &res, &err), RS_OK);
    RS_CHECK(result_matches(&res, 0, 2, -1, newval));
    /* scan 3 records from user2: user2, user3 (updated), user4 — or not supported */
    key_of(1, key, &klen);
    rs_ycsb_result_reset(&res);
    rc = ops->scan(t, "usertable", key, klen, 3, NULL, &res, &err);
    if (rc == RS_ENOTSUP) {
        RS_CHECK(strlen(err.msg) > 0); /* says why */
    } else {
        RS_CHECK_EQ(rc, RS_OK);
        RS_CHECK_EQ(res.nrec, 3);
        RS_CHECK(result_matches(&res, 0, 1, -1, NULL));
        RS_CHECK(result_matches(&res, 1, 2, -1, newval));
        RS_CHECK(result_matches(&res, 2, 3, -1, NULL));
    }
    /* batched read: user1, user6 (missing), user5 */
    char k0[16], k1[16], k2[16];
    size_t kl[3];
    key_of(0, k0, &kl[0]);
    key_of(5, k1, &kl[1]);
    key_of(4, k2, &kl[2]);
    const char *keys[3] = {k0, k1, k2};
    uint8_t found[3] = {9, 9, 9};
    rs_ycsb_result_reset(&res);
    rc = ops->batch_read(t, "usertable", keys, kl, 3, NULL, &res, found, &err);
    if (rc) fprintf(stderr, "%s batch_read: %s\n", db, err.msg);
    RS_CHECK_EQ(rc, RS_OK);
    RS_CHECK(found[0] == 1 && found[1] == 0 && found[2] == 1);
    RS_CHECK_EQ(res.nrec, 2);
    RS_CHECK(result_matches(&res, 0, 0, -1, NULL));
    RS_CHECK(result_matches(&res, 1, 4, -1, NULL));
    /* delete */
    key_of(2, key, &klen);
    RS_CHECK_EQ(ops->del(t, "usertable", key, klen, &err), RS_OK);
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, NULL, &res, &err), RS_ENOTFOUND);
    key_of(3, key, &klen); /* neighbours survive */
    rs_ycsb_result_reset(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", key, klen, NULL, &res, &err), RS_OK);
    RS_CHECK(result_matches(&res, 0, 3, -1, NULL));

    rs_ycsb_result_free(&res);
    ops->thread_cleanup(t);
    ops->close(shared);
out:;
    char root_list[1024];
    listing(root, root_list, sizeof root_list);
    if (path_prop(db) && strcmp(root_list, "data") != 0) {
        fprintf(stderr, "%s: %s holds '%s', expected only 'data'\n", db, root, root_list);
        RS_CHECK(0);
    }
    if (!path_prop(db)) RS_CHECK_EQ(strlen(root_list), 0); /* in-memory engines write nothing */
    listing(".", cwd_after, sizeof cwd_after);
    if (strcmp(cwd_before, cwd_after)) {
        fprintf(stderr, "%s wrote into the working directory %s\n", db, cwd);
        RS_CHECK(0);
    }
    rs_ycsb_props_free(props);
    rm_rf(root);
}

static void test_every_binding(void) {
    make_values();
    char names[256];
    snprintf(names, sizeof names, "%s", rs_ycsb_db_names());
    int count = 0;
    for (char *save, *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        int before = rs_test_failed_checks;
        conformance(n, NULL);
        if (rs_test_failed_checks != before) fprintf(stderr, "binding %s FAILED conformance\n", n);
        count++;
    }
    RS_CHECK(count >= 3); /* kvdb, cceh, basic are always built */
#if RS_HAVE_ROCKSDB && RS_HAVE_LEVELDB && RS_HAVE_LMDB && RS_HAVE_SQLITE && RS_HAVE_WIREDTIGER
    RS_CHECK_EQ(count, 8); /* kvdb, cceh, basic + the five external engines */
#endif
}

/* kvdb's perf layout (fixed field slots) must round-trip as well; synthetic rows return the
 * written bytes repeated to synthetic_bytes. */
static void test_kvdb_perf_modes(void) {
    make_values();
    static const char *const perf_parse[] = {"hybridkv.mode=perf", "hybridkv.read_return=parse",
                                             NULL};
    conformance("kvdb", perf_parse);
    static const char *const ext_hash[] = {"hybridkv.index_type=DRAM_EXTENDIBLE_HASH", NULL};
    conformance("kvdb", ext_hash);
    static const char *const on_file[] = {"hybridkv.index_type=SSD_EXTENDIBLE_HASH", NULL};
    conformance("kvdb", on_file);

    const rs_ycsb_db_ops *ops;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_db_find("kvdb", &ops, &err), RS_OK);
    char tmpl[] = "/tmp/rs_ycsb_kvdb_XXXXXX";
    char *root = mkdtemp(tmpl);
    rs_ycsb_props *props;
    rs_ycsb_props_new(&props);
    rs_ycsb_props_set(props, "hybridkv.path", root, "t");
    rs_ycsb_props_set(props, "hybridkv.synthetic_bytes", "100", "t");
    rs_ycsb_props_set(props, "hybridkv.read_return", "parse", "t");
    void *shared = NULL, *t = NULL;
    RS_CHECK_EQ(ops->open(props, &shared, &err), RS_EINVAL); /* synthetic rows have no fields */
    RS_CHECK(strstr(err.msg, "read_return=parse") != NULL);
    rs_ycsb_props_set(props, "hybridkv.read_return", "blob", "t");
    RS_CHECK_EQ(ops->open(props, &shared, &err), RS_OK);
    if (!shared) goto out;
    RS_CHECK_EQ(ops->thread_init(shared, 0, &t, &err), RS_OK);
    rs_ycsb_field fv[NFIELDS];
    fields_of(1, fv);
    RS_CHECK_EQ(ops->insert(t, "usertable", "user9", 5, fv, NFIELDS, &err), RS_OK);
    rs_ycsb_result res;
    rs_ycsb_result_init(&res);
    RS_CHECK_EQ(ops->read(t, "usertable", "user9", 5, NULL, &res, &err), RS_OK);
    RS_CHECK_EQ(res.n, 1);
    if (res.n == 1) {
        RS_CHECK_EQ(res.fields[0].value_len, 100);
        char want[100];
        for (int i = 0; i < 100; i++)
            want[i] = vals[1][(i / VLEN) % NFIELDS][i % VLEN];
        RS_CHECK(!memcmp(res.fields[0].value, want, 100));
    }
    RS_CHECK_EQ(ops->update(t, "usertable", "user10", 6, fv, 1, &err), RS_ENOTFOUND);
    rs_ycsb_result_free(&res);
    ops->thread_cleanup(t);
    ops->close(shared);
out:
    rs_ycsb_props_free(props);
    rm_rf(root);
}

static void test_unknown_and_missing(void) {
    const rs_ycsb_db_ops *ops;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ycsb_db_find("nosuchdb", &ops, &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "nosuchdb") && strstr(err.msg, "rocksdb"));
    /* a path property that cannot be created names the property */
    rs_ycsb_props *props;
    rs_ycsb_props_new(&props);
    rs_ycsb_props_set(props, "rocksdb.dbname", "/proc/no/such/dir", "-p");
    if (rs_ycsb_db_find("rocksdb", &ops, &err) == RS_OK) {
        void *shared = NULL;
        err = (rs_error){0};
        RS_CHECK_EQ(ops->open(props, &shared, &err), RS_EIO);
        RS_CHECK(strstr(err.msg, "rocksdb.dbname") != NULL);
    }
    rs_ycsb_props_free(props);
}

RS_TEST_MAIN(RS_TEST(test_every_binding), RS_TEST(test_kvdb_perf_modes),
             RS_TEST(test_unknown_and_missing))
