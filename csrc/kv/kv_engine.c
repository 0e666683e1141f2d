/*
 * kv_engine.c — the rs_kv façade (recstore/kv.h): an index (PET hash, extendible hash or CCEH,
 * behind rs_kv_index_ops) plus a value store (kv_value_store.c).
 *
 * Write path: look the key up under the index's lock. Present: mark its word odd, write the bytes
 * in place, publish the next even word. Absent: reserve one unit of capacity (the `count` atomic;
 * RS_EFULL past capacity), allocate and fill a row, then insert the key with the finished row's
 * word — the row is never visible half-written. If another writer inserted the key meanwhile,
 * the new row is freed and the write goes in place. Delete marks the word odd (readers in flight
 * retry), unlinks the entry, frees the row and gives back the capacity unit.
 *
 * Read path: index find (no lock) + seqlock copy (rs_kv_copy_fixed), retried if disturbed.
 * Invariant: rows in use <= count <= capacity, so a fixed-row allocation after a successful
 * reservation never fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>

#include "kv_internal.h"

static const struct {
    const char *name;
    rs_kv_index_type type;
} index_names[] = {
    {"DRAM_PET_HASH", RS_KV_INDEX_PET_HASH},
    {"DRAM_EXTENDIBLE_HASH", RS_KV_INDEX_EXTENDIBLE_HASH},
    {"DRAM", RS_KV_INDEX_EXTENDIBLE_HASH},
    {"SSD_EXTENDIBLE_HASH", RS_KV_INDEX_CCEH},
    {"SSD", RS_KV_INDEX_CCEH},
    {"CCEH", RS_KV_INDEX_CCEH},
};

int rs_kv_index_type_parse(const char *name, rs_kv_index_type *out, rs_error *err) {
    if (name)
        for (size_t i = 0; i < sizeof index_names / sizeof index_names[0]; i++)
            if (strcasecmp(name, index_names[i].name) == 0) {
                *out = index_names[i].type;
                return 0;
            }
    return rs_error_set(err, RS_EINVAL,
                        "unknown index_type '%s': use DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH (DRAM) "
                        "or SSD_EXTENDIBLE_HASH (SSD, CCEH)",
                        name ? name : "(null)");
}

const char *rs_kv_index_type_name(rs_kv_index_type t) {
    switch (t) {
    case RS_KV_INDEX_PET_HASH: return "DRAM_PET_HASH";
    case RS_KV_INDEX_EXTENDIBLE_HASH: return "DRAM_EXTENDIBLE_HASH";
    case RS_KV_INDEX_CCEH: return "SSD_EXTENDIBLE_HASH";
    }
    return "UNKNOWN";
}

static int make_one_dir(const char *path, const char *shown, rs_error *err) {
    if (mkdir(path, 0755) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
        return rs_error_set(err, RS_EINVAL, "path '%s': '%s' exists and is not a directory", shown,
                            path);
    }
    return rs_error_errno(err, RS_EIO, errno, "path: cannot create directory '%s'", path);
}

/* mkdir -p: the directory and any missing parents. */
int rs_kv_make_dir(const char *path, rs_error *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n + sizeof "/cceh.values" > sizeof buf)
        return rs_error_set(err, RS_EINVAL, "path is too long (%zu bytes, max %zu)", n,
                            sizeof buf - sizeof "/cceh.values");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (buf[i] != '/' || buf[i - 1] == '/') continue;
        buf[i] = '\0';
        int rc = make_one_dir(buf, path, err);
        buf[i] = '/';
        if (rc) return rc;
    }
    return make_one_dir(path, path, err);
}

int rs_kv_open(const rs_kv_config *cfg, rs_kv **out, rs_error *err) {
    int rc;
    char file[4096];
    if (!cfg || !out) return rs_error_set(err, RS_EINVAL, "cfg and out must not be NULL");
    if (cfg->capacity == 0) return rs_error_set(err, RS_EINVAL, "capacity must be > 0 (got 0)");
    if (cfg->capacity >= RS_KV_HANDLE_MAX / 2)
        return rs_error_set(err, RS_EINVAL, "capacity %llu is too large (max %llu)",
                            (unsigned long long)cfg->capacity,
                            (unsigned long long)(RS_KV_HANDLE_MAX / 2 - 1));
    if ((unsigned)cfg->huge_pages > RS_KV_HUGE_OFF)
        return rs_error_set(err, RS_EINVAL, "huge_pages %d is unknown", (int)cfg->huge_pages);
    if (cfg->value_size > RS_KV_MAX_VALUE)
        return rs_error_set(err, RS_EINVAL, "value_size %u is larger than %u", cfg->value_size,
                            RS_KV_MAX_VALUE);
    rs_kv *kv = aligned_alloc(64, (sizeof *kv + 63) & ~(size_t)63); /* the epoch lines */
    if (!kv) return rs_error_set(err, RS_ENOMEM, "rs_kv handle");
    memset(kv, 0, sizeof *kv);
    kv->type = cfg->index_type;
    kv->value_size = cfg->value_size;
    kv->capacity = cfg->capacity;
    const char *vpath = NULL;
    switch (cfg->index_type) {
    case RS_KV_INDEX_PET_HASH: kv->ops = &rs_kv_pet_ops; break;
    case RS_KV_INDEX_EXTENDIBLE_HASH: kv->ops = &rs_kv_eh_ops; break;
    case RS_KV_INDEX_CCEH:
        kv->ops = &rs_kv_cceh_ops;
        if (!cfg->path || !cfg->path[0]) {
            rc = rs_error_set(err, RS_EINVAL,
                              "path is required for SSD_EXTENDIBLE_HASH (CCEH keeps its data in "
                              "files under that directory)");
            goto fail_free;
        }
        if ((rc = rs_kv_make_dir(cfg->path, err))) goto fail_free;
        snprintf(file, sizeof file, "%s/cceh.values", cfg->path);
        vpath = file;
        break;
    default:
        rc = rs_error_set(err, RS_EINVAL, "index_type %d is not a known rs_kv_index_type",
                          (int)cfg->index_type);
        goto fail_free;
    }
    if (cfg->sync != RS_KV_SYNC_NONE && cfg->index_type != RS_KV_INDEX_CCEH) {
        rc = rs_error_set(err, RS_EINVAL,
                          "sync: %s keeps no files; only SSD_EXTENDIBLE_HASH takes a sync mode "
                          "other than none (checkpoints save a DRAM index)",
                          rs_kv_index_type_name(cfg->index_type));
        goto fail_free;
    }
    kv->sync = cfg->sync;
    /* values first: a value_size mismatch on reopen is reported before touching the index */
    rc = rs_kv_vs_open(&kv->vs, cfg->value_size,
                       cfg->capacity + (vpath && cfg->value_size ? RS_KV_COW_SPARE_ROWS : 0), vpath,
                       cfg->huge_pages, err);
    if (rc) goto fail_free;
    switch (cfg->index_type) {
    case RS_KV_INDEX_PET_HASH:
        rc = rs_kv_pet_open(cfg->capacity, cfg->huge_pages, &kv->ix, err);
        break;
    case RS_KV_INDEX_EXTENDIBLE_HASH:
        rc = rs_kv_eh_open(cfg->capacity, cfg->huge_pages, &kv->ix, err);
        break;
    default: rc = rs_kv_cceh_open(cfg->path, cfg->capacity, &kv->ix, err); break;
    }
    if (rc) goto fail_vs;
    kv->count = kv->ops->count(kv->ix);
    if (kv->type == RS_KV_INDEX_CCEH && rs_kv_cceh_unclean(kv->ix) &&
        (rc = rs_kv_repair_rows(kv, err)))
        goto fail_ix;
    if (kv->sync == RS_KV_SYNC_INTERVAL &&
        (rc = rs_kv_syncer_start(kv, cfg->sync_interval_ms ? cfg->sync_interval_ms : 1000, err)))
        goto fail_ix;
    *out = kv;
    return 0;
fail_ix:
    kv->ops->close(kv->ix);
fail_vs:
    rs_kv_vs_close(&kv->vs);
fail_free:
    free(kv);
    return rc;
}

void rs_kv_close(rs_kv *kv) {
    if (!kv) return;
    rs_kv_syncer_stop(kv);
    rs_kv_sync_now(kv, NULL);
    kv->ops->close(kv->ix);
    rs_kv_vs_close(&kv->vs);
    free(kv);
}

/* A thread's epoch stripe: handed out in turn at its first write, kept for its life. */
static unsigned next_stripe;
static __thread unsigned my_stripe; /* stripe + 1; 0 = none yet */

uint64_t *rs_kv_write_begin(rs_kv *kv) {
    if (!my_stripe)
        my_stripe = __atomic_fetch_add(&next_stripe, 1, __ATOMIC_RELAXED) % RS_KV_EPOCH_STRIPES + 1;
    uint64_t *stripe = &kv->epoch[my_stripe - 1].v;
    __atomic_fetch_add(stripe, RS_KV_EPOCH_WRITE, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* before any store of the write (kv_internal.h) */
    return stripe;
}

static int full_error(rs_kv *kv, rs_error *err) {
    return rs_error_set(err, RS_EFULL,
                        "%s is full: capacity %llu keys reached (open with a larger capacity)",
                        rs_kv_index_type_name(kv->type), (unsigned long long)kv->capacity);
}

static int reserve_one(rs_kv *kv, rs_error *err) {
    uint64_t c = __atomic_fetch_add(&kv->count, 1, __ATOMIC_RELAXED);
    if (c >= kv->capacity) {
        __atomic_fetch_sub(&kv->count, 1, __ATOMIC_RELAXED);
        return full_error(kv, err);
    }
    return 0;
}

static void unreserve_one(rs_kv *kv) {
    __atomic_fetch_sub(&kv->count, 1, __ATOMIC_RELAXED);
}

/* Fill a freshly allocated row/block (not yet visible to readers). */
static void fill_new(rs_kv *kv, uint64_t word, const void *val, size_t len, const float *add) {
    if (kv->value_size) {
        uint8_t *row = rs_kv_vs_row(&kv->vs, word);
        if (val)
            memcpy(row, val, kv->value_size);
        else
            memset(row, 0, kv->value_size);
        if (add) {
            float *f = (float *)row;
            for (size_t i = 0; i < kv->value_size / 4; i++)
                f[i] += add[i];
        }
    } else {
        rs_kv_vblock *b = rs_kv_vs_block(&kv->vs, word);
        b->len = (uint32_t)len;
        if (len && val) memcpy((uint8_t *)b + RS_KV_VBLOCK_HDR, val, len);
    }
}

/* Copy-on-write of an existing fixed row (CCEH, index lock held): the new row is complete before
 * the word switches to it, so a process killed at any point leaves the old row or the new one. */
static int write_cow(rs_kv *kv, rs_kv_slot *s, const void *val, const float *add, rs_error *err) {
    uint64_t w = __atomic_load_n(s->word, __ATOMIC_RELAXED), nw;
    int rc = rs_kv_vs_alloc(&kv->vs, kv->value_size, &nw, err);
    if (rc) return rc;
    uint8_t *row = rs_kv_vs_row(&kv->vs, nw);
    memcpy(row, add ? rs_kv_vs_row(&kv->vs, w) : val, kv->value_size);
    if (add) {
        float *f = (float *)row;
        for (size_t i = 0; i < kv->value_size / 4; i++)
            f[i] += add[i];
    }
    __atomic_store_n(s->word, nw, __ATOMIC_RELEASE);
    rs_kv_vs_free(&kv->vs, w);
    return 0;
}

/* In-place write of an existing entry (index lock held); CCEH writes copy-on-write instead. */
static int write_existing(rs_kv *kv, rs_kv_slot *s, const void *val, size_t len, const float *add,
                          rs_error *err) {
    uint64_t w = __atomic_load_n(s->word, __ATOMIC_RELAXED);
    int cow = kv->type == RS_KV_INDEX_CCEH;
    if (kv->value_size && cow) return write_cow(kv, s, val, add, err);
    if (kv->value_size) {
        uint64_t odd = rs_kv_word_next(w);
        __atomic_store_n(s->word, odd, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        uint8_t *row = rs_kv_vs_row(&kv->vs, w);
        if (add) {
            float *f = (float *)row;
            for (size_t i = 0; i < kv->value_size / 4; i++)
                f[i] += add[i];
        } else {
            memcpy(row, val, len);
        }
        __atomic_store_n(s->word, rs_kv_word_next(odd), __ATOMIC_RELEASE);
        return 0;
    }
    if (!cow && len <= rs_kv_vs_block_room(&kv->vs, w)) {
        uint64_t odd = rs_kv_word_next(w);
        __atomic_store_n(s->word, odd, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        fill_new(kv, w, val, len, NULL);
        __atomic_store_n(s->word, rs_kv_word_next(odd), __ATOMIC_RELEASE);
        return 0;
    }
    /* a different size class: write a new block, switch the word, free the old block */
    uint64_t nw;
    int rc = rs_kv_vs_alloc(&kv->vs, len, &nw, err);
    if (rc) return rc;
    fill_new(kv, nw, val, len, NULL);
    __atomic_store_n(s->word, nw, __ATOMIC_RELEASE);
    rs_kv_vs_free(&kv->vs, rs_kv_word_next(w));
    return 0;
}

/* put (val) or update-add (add) of one key; the caller holds the write epoch (rs_kv_write_begin):
 * one bracket per call, so a batch of writes pays two atomic adds, not two per key. */
static int write_key(rs_kv *kv, uint64_t key, const void *val, size_t len, const float *add,
                     rs_error *err) {
    rs_kv_slot s;
    int created = 0, rc;
    rc = kv->ops->acquire(kv->ix, key, 0, 0, &s, &created, err);
    if (rc == 0) {
        rc = write_existing(kv, &s, val, len, add, err);
        kv->ops->release(kv->ix, &s);
        return rc;
    }
    if (rc != RS_ENOTFOUND) return rc;
    if ((rc = reserve_one(kv, err))) return rc;
    uint64_t w;
    if ((rc = rs_kv_vs_alloc(&kv->vs, len, &w, err))) goto fail_reserve;
    fill_new(kv, w, val, len, add);
    rc = kv->ops->acquire(kv->ix, key, 1, w, &s, &created, err);
    if (rc) goto fail_row;
    if (!created) { /* inserted by someone else since our first look */
        rc = write_existing(kv, &s, val, len, add, err);
        kv->ops->release(kv->ix, &s);
        rs_kv_vs_free(&kv->vs, w);
        unreserve_one(kv);
        return rc;
    }
    kv->ops->release(kv->ix, &s);
    return 0;
fail_row:
    rs_kv_vs_free(&kv->vs, w);
fail_reserve:
    unreserve_one(kv);
    if (rc == RS_EFULL) return full_error(kv, err);
    return rc;
}

/* RS_KV_SYNC_ALWAYS: a successful write returns only once it is on disk. */
static int durable(rs_kv *kv, int rc, rs_error *err) {
    if (rc == 0 && kv->sync == RS_KV_SYNC_ALWAYS) rc = rs_kv_sync_now(kv, err);
    return rc;
}

int rs_kv_put(rs_kv *kv, uint64_t key, const void *val, size_t len, rs_error *err) {
    if (!kv) return rs_error_set(err, RS_EINVAL, "kv is NULL");
    if (kv->value_size && len != kv->value_size)
        return rs_error_set(err, RS_EINVAL, "value length %zu != value_size %u", len,
                            kv->value_size);
    if (len > RS_KV_MAX_VALUE)
        return rs_error_set(err, RS_EINVAL, "value length %zu is larger than %u", len,
                            RS_KV_MAX_VALUE);
    if (!val && len) return rs_error_set(err, RS_EINVAL, "val is NULL");
    uint64_t *stripe = rs_kv_write_begin(kv);
    int rc = write_key(kv, key, val, len, NULL, err);
    rs_kv_write_end(stripe);
    return durable(kv, rc, err);
}

int rs_kv_read_fixed_slow(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs, uint64_t key,
                          void *out) {
    for (;;) {
        rs_kv_slot s;
        int hit = ops->find(ix, key, &s);
        if (!hit) {
            if (ops->validate(ix, &s)) {
                memset(out, 0, vs->value_size);
                return 0;
            }
            continue;
        }
        uint64_t w1 = __atomic_load_n(s.word, __ATOMIC_ACQUIRE);
        if (rs_kv_copy_fixed(vs, key, &s, w1, out) && ops->validate(ix, &s)) return 1;
        rs_kv_cpu_relax();
    }
}

static int read_var(rs_kv *kv, uint64_t key, void *buf, size_t cap, size_t *len) {
    for (;;) {
        rs_kv_slot s;
        if (!kv->ops->find(kv->ix, key, &s)) {
            if (kv->ops->validate(kv->ix, &s)) return RS_ENOTFOUND;
            continue;
        }
        uint64_t w1 = __atomic_load_n(s.word, __ATOMIC_ACQUIRE);
        if (!rs_kv_word_readable(&kv->vs, w1) || __atomic_load_n(s.keyp, __ATOMIC_ACQUIRE) != key) {
            rs_kv_cpu_relax();
            continue;
        }
        const rs_kv_vblock *b = rs_kv_vs_block(&kv->vs, w1);
        size_t l = __atomic_load_n(&b->len, __ATOMIC_RELAXED);
        size_t ncopy = l <= cap ? l : 0;
        if (l <= RS_KV_MAX_VALUE && ncopy)
            memcpy(buf, (const uint8_t *)b + RS_KV_VBLOCK_HDR, ncopy);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(s.word, __ATOMIC_RELAXED) != w1 ||
            __atomic_load_n(s.keyp, __ATOMIC_RELAXED) != key || !kv->ops->validate(kv->ix, &s))
            continue;
        if (len) *len = l;
        return l <= cap ? 0 : RS_EINVAL;
    }
}

int rs_kv_get(rs_kv *kv, uint64_t key, void *buf, size_t cap, size_t *len) {
    if (!kv || (!buf && cap)) return RS_EINVAL;
    if (!kv->value_size) return read_var(kv, key, buf, cap, len);
    if (len) *len = kv->value_size;
    if (cap < kv->value_size) {
        /* tell the needed size, and whether the key exists */
        rs_kv_slot s;
        int hit;
        do {
            hit = kv->ops->find(kv->ix, key, &s);
        } while (!kv->ops->validate(kv->ix, &s));
        return hit ? RS_EINVAL : RS_ENOTFOUND;
    }
    return rs_kv_read_fixed_slow(kv->ops, kv->ix, &kv->vs, key, buf) ? 0 : RS_ENOTFOUND;
}

int rs_kv_delete(rs_kv *kv, uint64_t key) {
    if (!kv) return RS_EINVAL;
    rs_kv_slot s;
    int created = 0;
    uint64_t *stripe = rs_kv_write_begin(kv);
    int rc = kv->ops->acquire(kv->ix, key, 0, 0, &s, &created, NULL);
    if (!rc) {
        uint64_t odd = rs_kv_word_next(__atomic_load_n(s.word, __ATOMIC_RELAXED));
        __atomic_store_n(s.word, odd, __ATOMIC_RELEASE);
        kv->ops->remove(kv->ix, &s);
        kv->ops->release(kv->ix, &s);
        rs_kv_vs_free(&kv->vs, odd);
    }
    rs_kv_write_end(stripe);
    if (rc) return rc;
    unreserve_one(kv);
    return durable(kv, 0, NULL);
}

/* Keys batch_put looks ahead to start their index misses (ops->prefetch). */
#define RS_KV_PUT_PREFETCH 16

int rs_kv_batch_put(rs_kv *kv, const uint64_t *keys, size_t n, const void *rows, size_t *n_done,
                    rs_error *err) {
    if (n_done) *n_done = 0;
    if (!kv) return rs_error_set(err, RS_EINVAL, "kv is NULL");
    if (!kv->value_size)
        return rs_error_set(err, RS_EINVAL, "batch_put needs fixed-size rows (value_size > 0)");
    if (n && (!keys || !rows))
        return rs_error_set(err, RS_EINVAL, "keys and rows must not be NULL");
    const uint8_t *r = rows;
    int rc = 0;
    uint64_t *stripe = rs_kv_write_begin(kv);
    for (size_t i = 0; i < n && !rc; i++) {
        if (kv->ops->prefetch && i + RS_KV_PUT_PREFETCH < n)
            kv->ops->prefetch(kv->ix, keys[i + RS_KV_PUT_PREFETCH]);
        rc = write_key(kv, keys[i], r + i * kv->value_size, kv->value_size, NULL, err);
        if (!rc && n_done) *n_done = i + 1;
    }
    rs_kv_write_end(stripe);
    if (rc) {
        durable(kv, 0, NULL); /* the rows stored before the failure are synced too */
        return rc;
    }
    return durable(kv, 0, err);
}

int rs_kv_batch_get_flat(rs_kv *kv, const uint64_t *keys, size_t n, void *out_rows,
                         uint8_t *out_found, size_t *n_found) {
    return rs_kv_batch_get_strided(kv, keys, n, out_rows, kv ? kv->value_size : 0, out_found,
                                   n_found);
}

int rs_kv_batch_get_strided(rs_kv *kv, const uint64_t *keys, size_t n, void *out_rows,
                            size_t out_stride, uint8_t *out_found, size_t *n_found) {
    if (n_found) *n_found = 0;
    if (!kv || !kv->value_size || out_stride < kv->value_size) return RS_EINVAL;
    if (n && (!keys || !out_rows)) return RS_EINVAL;
    size_t hits = 0;
    uint8_t *out = out_rows;
    if (kv->ops->batch_lookup) {
        rs_kv_hit q[RS_KV_LOOKUP_MAX];
        uint64_t snap[RS_KV_EPOCH_STRIPES];
        const size_t seg = kv->ops->lookup_max;
        for (size_t base = 0; base < n; base += seg) {
            size_t cnt = n - base < seg ? n - base : seg;
            uint8_t *o = out + base * out_stride, *f = out_found ? out_found + base : NULL;
            int quiet = rs_kv_epoch_snap(kv, snap);
            kv->ops->batch_lookup(kv->ix, keys + base, cnt, q);
            size_t h = rs_kv_rows(kv->ops, kv->ix, &kv->vs, keys + base, cnt, q, o, out_stride, f);
            if (!quiet || !rs_kv_epoch_held(kv, snap)) /* a write ran: check key by key */
                h = rs_kv_rows_recheck(kv->ops, kv->ix, &kv->vs, keys + base, cnt, q, o, out_stride,
                                       f, h);
            hits += h;
        }
        if (n_found) *n_found = hits;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int hit = rs_kv_read_fixed_slow(kv->ops, kv->ix, &kv->vs, keys[i], out + i * out_stride);
        if (out_found) out_found[i] = (uint8_t)hit;
        hits += (size_t)hit;
    }
    if (n_found) *n_found = hits;
    return 0;
}

int rs_kv_update_add_f32(rs_kv *kv, const uint64_t *keys, size_t n, const float *deltas,
                         rs_error *err) {
    if (!kv) return rs_error_set(err, RS_EINVAL, "kv is NULL");
    if (!kv->value_size || kv->value_size % 4)
        return rs_error_set(err, RS_EINVAL,
                            "update_add_f32 needs float32 rows (value_size %u is not a positive "
                            "multiple of 4)",
                            kv->value_size);
    if (n && (!keys || !deltas))
        return rs_error_set(err, RS_EINVAL, "keys and deltas must not be NULL");
    size_t dim = kv->value_size / 4;
    int rc = 0;
    uint64_t *stripe = rs_kv_write_begin(kv);
    for (size_t i = 0; i < n && !rc; i++)
        rc = write_key(kv, keys[i], NULL, kv->value_size, deltas + i * dim, err);
    rs_kv_write_end(stripe);
    return rc ? rc : durable(kv, 0, err);
}

uint64_t rs_kv_count(rs_kv *kv) {
    return kv ? __atomic_load_n(&kv->count, __ATOMIC_RELAXED) : 0;
}

int rs_kv_clear(rs_kv *kv) {
    if (!kv) return RS_EINVAL;
    uint64_t *stripe = rs_kv_write_begin(kv);
    int rc = kv->ops->clear(kv->ix, NULL);
    if (!rc) rs_kv_vs_reset(&kv->vs);
    rs_kv_write_end(stripe);
    if (rc) return rc;
    __atomic_store_n(&kv->count, 0, __ATOMIC_RELAXED);
    return 0;
}

uint32_t rs_kv_value_size(const rs_kv *kv) {
    return kv->value_size;
}

uint64_t rs_kv_capacity(const rs_kv *kv) {
    return kv->capacity;
}

rs_kv_index_type rs_kv_get_index_type(const rs_kv *kv) {
    return kv->type;
}
