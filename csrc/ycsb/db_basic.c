/*
 * db_basic.c — the `basic` binding: YCSB's smoke-test DB, an in-memory store that keeps every
 * record (so a conformance test can read back what it wrote) and, unless basic.silent=true,
 * prints each operation like YCSB's BasicDB ("READ usertable user12 [ <all fields>]").
 *
 * Layout: 64 shards, each a mutex plus a chained hash table of {key string, encoded record}
 * (record.c codec) that doubles when it holds more entries than buckets. The shard is chosen by
 * the key's fnv1a64, so threads touching different keys rarely share a lock. Scan is not
 * supported (there is no key order), as YCSB's BasicDB returns no data for scans either.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ycsb.h"

#define BASIC_SHARDS 64

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    size_t klen, vlen;
    char *val;
    char key[];
} entry;

typedef struct shard {
    pthread_mutex_t mu;
    entry **buckets;
    size_t nbuckets, count;
} shard;

typedef struct basic_db {
    int silent;
    shard shards[BASIC_SHARDS];
} basic_db;

static int basic_open(const rs_ycsb_props *props, void **out, rs_error *err) {
    basic_db *db = calloc(1, sizeof *db);
    if (!db) return rs_error_set(err, RS_ENOMEM, "out of memory");
    int rc = rs_ycsb_props_bool(props, "basic.silent", 0, &db->silent, err);
    if (rc) {
        free(db);
        return rc;
    }
    for (int i = 0; i < BASIC_SHARDS; i++)
        pthread_mutex_init(&db->shards[i].mu, NULL);
    *out = db;
    return RS_OK;
}

static void basic_close(void *p) {
    basic_db *db = p;
    if (!db) return;
    for (int i = 0; i < BASIC_SHARDS; i++) {
        shard *s = &db->shards[i];
        for (size_t b = 0; b < s->nbuckets; b++)
            for (entry *e = s->buckets[b], *nx; e; e = nx) {
                nx = e->next;
                free(e->val);
                free(e);
            }
        free(s->buckets);
        pthread_mutex_destroy(&s->mu);
    }
    free(db);
}

static int basic_thread_init(void *shared, int tid, void **tctx, rs_error *err) {
    *tctx = shared;
    return RS_OK;
}

static void basic_thread_cleanup(void *tctx) {}

static void print_op(basic_db *db, const char *op, const char *table, const char *key, size_t klen,
                     const rs_ycsb_field *f, size_t n, int with_values, const char *extra) {
    if (db->silent) return;
    flockfile(stdout);
    printf("%s %s %.*s%s [", op, table, (int)klen, key, extra ? extra : "");
    if (!f) printf(" <all fields>");
    for (size_t i = 0; f && i < n; i++) {
        if (with_values)
            printf(" %.*s=%.*s", (int)f[i].name_len, f[i].name, (int)f[i].value_len, f[i].value);
        else
            printf(" %.*s", (int)f[i].name_len, f[i].name);
    }
    printf(" ]\n");
    funlockfile(stdout);
}

static shard *shard_of(basic_db *db, uint64_t h) {
    return &db->shards[h % BASIC_SHARDS];
}

static entry **find(shard *s, uint64_t h, const char *key, size_t klen) {
    if (!s->nbuckets) return NULL;
    entry **pp = &s->buckets[(h / BASIC_SHARDS) & (s->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->klen == klen && !memcmp((*pp)->key, key, klen)) return pp;
    return NULL;
}

static int grow(shard *s) {
    size_t nb = s->nbuckets ? s->nbuckets * 2 : 64;
    entry **b = calloc(nb, sizeof *b);
    if (!b) return RS_ENOMEM;
    for (size_t i = 0; i < s->nbuckets; i++)
        for (entry *e = s->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            entry **slot = &b[(e->hash / BASIC_SHARDS) & (nb - 1)];
            e->next = *slot;
            *slot = e;
        }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = nb;
    return RS_OK;
}

static int basic_read(void *tctx, const char *table, const char *key, size_t klen,
                      const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    basic_db *db = tctx;
    print_op(db, "READ", table, key, klen, fs && fs->names ? fs->names : NULL, fs ? fs->n : 0, 0,
             NULL);
    uint64_t h = rs_fnv1a64(key, klen);
    shard *s = shard_of(db, h);
    pthread_mutex_lock(&s->mu);
    entry **pp = find(s, h, key, klen);
    int rc = RS_ENOTFOUND;
    if (pp) {
        rs_ycsb_result_begin(out);
        rc = rs_ycsb_record_decode((*pp)->val, (*pp)->vlen, fs, out);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int basic_scan(void *tctx, const char *table, const char *key, size_t klen, uint32_t count,
                      const rs_ycsb_fieldset *fs, rs_ycsb_result *out, rs_error *err) {
    basic_db *db = tctx;
    char extra[32];
    snprintf(extra, sizeof extra, " %u", count);
    print_op(db, "SCAN", table, key, klen, fs && fs->names ? fs->names : NULL, fs ? fs->n : 0, 0,
             extra);
    return rs_error_set(err, RS_ENOTSUP, "basic: scan is not supported (in-memory hash store)");
}

static int put(basic_db *db, const char *key, size_t klen, const rs_ycsb_field *v, size_t n,
               int must_exist) {
    uint64_t h = rs_fnv1a64(key, klen);
    shard *s = shard_of(db, h);
    int rc = RS_OK;
    pthread_mutex_lock(&s->mu);
    entry **pp = find(s, h, key, klen);
    if (pp) {
        char *merged;
        size_t mlen;
        if (must_exist) {
            rc = rs_ycsb_record_merge((*pp)->val, (*pp)->vlen, v, n, &merged, &mlen);
        } else {
            mlen = rs_ycsb_record_size(v, n);
            merged = malloc(mlen ? mlen : 1);
            if (!merged)
                rc = RS_ENOMEM;
            else
                rs_ycsb_record_encode(v, n, merged);
        }
        if (rc == RS_OK) {
            free((*pp)->val);
            (*pp)->val = merged;
            (*pp)->vlen = mlen;
        }
    } else if (must_exist) {
        rc = RS_ENOTFOUND;
    } else {
        if (s->count >= s->nbuckets && (rc = grow(s))) goto out;
        entry *e = malloc(sizeof *e + klen);
        size_t vlen = rs_ycsb_record_size(v, n);
        char *val = malloc(vlen ? vlen : 1);
        if (!e || !val) {
            free(e);
            free(val);
            rc = RS_ENOMEM;
            goto out;
        }
        rs_ycsb_record_encode(v, n, val);
        e->hash = h;
        e->klen = klen;
        memcpy(e->key, key, klen);
        e->val = val;
        e->vlen = vlen;
        entry **slot = &s->buckets[(h / BASIC_SHARDS) & (s->nbuckets - 1)];
        e->next = *slot;
        *slot = e;
        s->count++;
    }
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int basic_update(void *tctx, const char *table, const char *key, size_t klen,
                        const rs_ycsb_field *v, size_t n, rs_error *err) {
    print_op(tctx, "UPDATE", table, key, klen, v, n, 1, NULL);
    return put(tctx, key, klen, v, n, 1);
}

static int basic_insert(void *tctx, const char *table, const char *key, size_t klen,
                        const rs_ycsb_field *v, size_t n, rs_error *err) {
    print_op(tctx, "INSERT", table, key, klen, v, n, 1, NULL);
    return put(tctx, key, klen, v, n, 0);
}

static int basic_delete(void *tctx, const char *table, const char *key, size_t klen,
                        rs_error *err) {
    basic_db *db = tctx;
    print_op(db, "DELETE", table, key, klen, NULL, 0, 0, NULL);
    uint64_t h = rs_fnv1a64(key, klen);
    shard *s = shard_of(db, h);
    pthread_mutex_lock(&s->mu);
    entry **pp = find(s, h, key, klen);
    int rc = RS_ENOTFOUND;
    if (pp) {
        entry *e = *pp;
        *pp = e->next;
        free(e->val);
        free(e);
        s->count--;
        rc = RS_OK;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int basic_batch_read(void *tctx, const char *table, const char *const *keys,
                            const size_t *klens, size_t n, const rs_ycsb_fieldset *fs,
                            rs_ycsb_result *out, uint8_t *found, rs_error *err) {
    extern const rs_ycsb_db_ops rs_ycsb_db_basic;
    return rs_ycsb_db_batch_read_loop(&rs_ycsb_db_basic, tctx, table, keys, klens, n, fs, out,
                                      found, err);
}

const rs_ycsb_db_ops rs_ycsb_db_basic = {
    .name = "basic",
    .open = basic_open,
    .thread_init = basic_thread_init,
    .read = basic_read,
    .scan = basic_scan,
    .update = basic_update,
    .insert = basic_insert,
    .del = basic_delete,
    .batch_read = basic_batch_read,
    .thread_cleanup = basic_thread_cleanup,
    .close = basic_close,
};
