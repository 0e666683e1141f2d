/*
 * kv_ext_hash.c — DRAM_EXTENDIBLE_HASH: a directory of 2^global_depth bucket pointers addressed by
 * the low bits of the key hash; buckets split when full and the directory doubles when a bucket at
 * global depth must split.
 *
 * Bucket (256 bytes = 4 cache lines, 64-byte aligned):
 *
 *   byte 0    4      5       6      8         16                 128                 240   256
 *   +---------+------+-------+------+---------+------------------+-------------------+-----+
 *   | ver u32 | lock | depth | used | pattern | keys[0..13] u64  | words[0..13] u64  | pad |
 *   +---------+------+-------+------+---------+------------------+-------------------+-----+
 *   used: bitmap of occupied slots; pattern: the low `depth` hash bits every key here shares.
 *   Keys sit apart from words so a lookup scans two lines (header + keys) and then reads one
 *   word line.
 *
 * Concurrency. Writers lock the bucket (`lock`), re-checking after locking that the key's hash
 * still matches the bucket's pattern (a split may have happened since the directory was read).
 * Splits and directory doubling are serialised by `dir_lock` (taken before a bucket lock). While
 * entries move, or when an entry is removed, the bucket's `ver` is odd; readers take no lock and
 * validate `ver` (plus the pattern) around their lookup and copy. Buckets and retired directories
 * are freed only at close, so a reader holding a stale pointer never touches freed memory.
 */
#include <stdlib.h>

#include "kv_internal.h"

#define EH_SLOTS        14
#define EH_FULL         ((1u << EH_SLOTS) - 1)
#define EH_INIT_DEPTH   4
#define EH_MAX_DEPTH    40
#define EH_SLAB_BUCKETS 8192 /* 2 MiB: one huge page, on the pages rs_kv_config.huge_pages asks */

typedef struct eh_bucket {
    uint32_t ver;
    uint8_t lock;
    uint8_t depth;
    uint16_t used;
    uint64_t pattern;
    uint64_t keys[EH_SLOTS];
    uint64_t words[EH_SLOTS];
    uint8_t pad[16];
} __attribute__((aligned(64))) eh_bucket;

_Static_assert(sizeof(eh_bucket) == 256, "EH bucket must be 4 cache lines");

typedef struct eh_dir {
    struct eh_dir *retired; /* older directory, freed at close */
    uint32_t depth;
    uint64_t mask;
    eh_bucket *b[];
} eh_dir;

typedef struct eh_slab {
    struct eh_slab *next;
    size_t used;
    rs_kv_region region; /* anonymous, EH_SLAB_BUCKETS buckets */
    eh_bucket *buckets;  /* = region.base */
} eh_slab;

typedef struct eh {
    eh_dir *dir; /* atomic pointer */
    pthread_mutex_t dir_lock;
    eh_slab *slabs;
    uint64_t capacity;
    rs_kv_huge_pages huge; /* what every bucket slab is mapped with */
    const char *pages;     /* what the first slab got: "hugetlb", "thp" or "4k" */
} eh;

static eh_bucket *eh_new_bucket(eh *t, rs_error *err) {
    eh_slab *s = t->slabs;
    if (!s || s->used == EH_SLAB_BUCKETS) {
        s = calloc(1, sizeof *s);
        if (!s) {
            rs_error_set(err, RS_ENOMEM, "DRAM_EXTENDIBLE_HASH bucket slab");
            return NULL;
        }
        const size_t bytes = EH_SLAB_BUCKETS * sizeof(eh_bucket);
        if (rs_kv_region_open_anon(&s->region, bytes, bytes, t->huge, err)) {
            free(s);
            return NULL;
        }
        s->buckets = (eh_bucket *)s->region.base;
        if (!t->pages) t->pages = s->region.pages;
        s->next = t->slabs;
        t->slabs = s;
    }
    eh_bucket *b = &s->buckets[s->used++];
    memset(b, 0, sizeof *b);
    return b;
}

static eh_dir *eh_new_dir(uint32_t depth) {
    eh_dir *d = calloc(1, sizeof *d + (sizeof(eh_bucket *) << depth));
    if (!d) return NULL;
    d->depth = depth;
    d->mask = (1ull << depth) - 1;
    return d;
}

static void eh_free_all(eh *t) {
    eh_dir *d = t->dir;
    while (d) {
        eh_dir *r = d->retired;
        free(d);
        d = r;
    }
    eh_slab *s = t->slabs;
    while (s) {
        eh_slab *n = s->next;
        rs_kv_region_close(&s->region);
        free(s);
        s = n;
    }
    t->dir = NULL;
    t->slabs = NULL;
}

static int eh_init(eh *t, rs_error *err) {
    eh_dir *d = eh_new_dir(EH_INIT_DEPTH);
    if (!d) return rs_error_set(err, RS_ENOMEM, "DRAM_EXTENDIBLE_HASH directory");
    t->dir = d;
    for (uint64_t i = 0; i <= d->mask; i++) {
        eh_bucket *b = eh_new_bucket(t, err);
        if (!b) {
            eh_free_all(t);
            return err ? err->code : RS_ENOMEM;
        }
        b->depth = EH_INIT_DEPTH;
        b->pattern = i;
        d->b[i] = b;
    }
    return 0;
}

int rs_kv_eh_open(uint64_t capacity, rs_kv_huge_pages huge, void **out, rs_error *err) {
    eh *t = calloc(1, sizeof *t);
    if (!t) return rs_error_set(err, RS_ENOMEM, "DRAM_EXTENDIBLE_HASH handle");
    t->capacity = capacity;
    t->huge = huge;
    pthread_mutex_init(&t->dir_lock, NULL);
    int rc = eh_init(t, err);
    if (rc) {
        pthread_mutex_destroy(&t->dir_lock);
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* Bucket slabs (2 MiB each, on the pages asked for) plus the current directory. */
static void eh_memory(void *ix, uint64_t *bytes, const char **pages) {
    eh *t = ix;
    uint64_t n = 0;
    pthread_mutex_lock(&t->dir_lock);
    for (const eh_slab *s = t->slabs; s; s = s->next)
        n += EH_SLAB_BUCKETS * sizeof(eh_bucket);
    const eh_dir *d = __atomic_load_n(&t->dir, __ATOMIC_ACQUIRE);
    n += sizeof *d + (sizeof(eh_bucket *) << d->depth);
    pthread_mutex_unlock(&t->dir_lock);
    *bytes = n;
    *pages = t->pages ? t->pages : "4k";
}

static void eh_close(void *ix) {
    eh *t = ix;
    eh_free_all(t);
    pthread_mutex_destroy(&t->dir_lock);
    free(t);
}

static int eh_clear(void *ix, rs_error *err) {
    eh *t = ix;
    eh_free_all(t);
    return eh_init(t, err);
}

static inline int eh_owns(const eh_bucket *b, uint64_t h) {
    uint8_t d = __atomic_load_n(&b->depth, __ATOMIC_RELAXED);
    uint64_t m = d ? (~0ull >> (64 - d)) : 0;
    return (h & m) == __atomic_load_n(&b->pattern, __ATOMIC_RELAXED);
}

static inline int eh_scan(eh_bucket *b, uint64_t key, rs_kv_slot *s) {
    unsigned used = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);
    while (used) {
        unsigned j = (unsigned)__builtin_ctz(used);
        if (__atomic_load_n(&b->keys[j], __ATOMIC_RELAXED) == key) {
            s->word = &b->words[j];
            s->keyp = &b->keys[j];
            return 1;
        }
        used &= used - 1;
    }
    return 0;
}

static int eh_find(void *ix, uint64_t key, rs_kv_slot *s) {
    eh *t = ix;
    uint64_t h = rs_kv_hash(key);
    for (;;) {
        eh_dir *d = __atomic_load_n(&t->dir, __ATOMIC_ACQUIRE);
        eh_bucket *b = __atomic_load_n(&d->b[h & d->mask], __ATOMIC_ACQUIRE);
        uint32_t v = __atomic_load_n(&b->ver, __ATOMIC_ACQUIRE);
        if ((v & 1) || !eh_owns(b, h)) {
            rs_kv_cpu_relax();
            continue;
        }
        s->guard = b;
        s->ver = v;
        return eh_scan(b, key, s);
    }
}

static int eh_validate(void *ix, const rs_kv_slot *s) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&((eh_bucket *)s->guard)->ver, __ATOMIC_RELAXED) == s->ver;
}

static void eh_lock(eh_bucket *b) {
    for (;;) {
        uint8_t z = 0;
        if (__atomic_compare_exchange_n(&b->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (__atomic_load_n(&b->lock, __ATOMIC_RELAXED))
            rs_kv_cpu_relax();
    }
}

static void eh_unlock(eh_bucket *b) {
    __atomic_store_n(&b->lock, 0, __ATOMIC_RELEASE);
}

static void eh_ver_bump(eh_bucket *b) {
    __atomic_store_n(&b->ver, b->ver + 1, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Split the full bucket that owns hash h (doubling the directory first if needed). Returns 0 when
 * the caller should retry its insert. */
static int eh_split(eh *t, uint64_t h, rs_error *err) {
    int rc = 0;
    pthread_mutex_lock(&t->dir_lock);
    eh_dir *d = t->dir;
    eh_bucket *b = d->b[h & d->mask];
    eh_lock(b);
    if (!eh_owns(b, h) || b->used != EH_FULL) goto out; /* someone else split it */
    if (b->depth == d->depth) {
        if (d->depth >= EH_MAX_DEPTH) {
            rc = rs_error_set(err, RS_EFULL,
                              "DRAM_EXTENDIBLE_HASH directory reached depth %u (capacity %llu)",
                              d->depth, (unsigned long long)t->capacity);
            goto out;
        }
        eh_dir *nd = eh_new_dir(d->depth + 1);
        if (!nd) {
            rc = rs_error_set(err, RS_ENOMEM, "DRAM_EXTENDIBLE_HASH directory of depth %u",
                              d->depth + 1);
            goto out;
        }
        memcpy(nd->b, d->b, sizeof(eh_bucket *) << d->depth);
        memcpy(nd->b + (1ull << d->depth), d->b, sizeof(eh_bucket *) << d->depth);
        nd->retired = d;
        __atomic_store_n(&t->dir, nd, __ATOMIC_RELEASE);
        d = nd;
    }
    eh_bucket *nb = eh_new_bucket(t, err);
    if (!nb) {
        rc = err ? err->code : RS_ENOMEM;
        goto out;
    }
    uint8_t depth = b->depth;
    nb->depth = (uint8_t)(depth + 1);
    nb->pattern = b->pattern | (1ull << depth);
    eh_ver_bump(b); /* odd: entries are moving */
    unsigned used = b->used, moved = 0, k = 0;
    for (unsigned j = 0; j < EH_SLOTS; j++) {
        if (!(used & (1u << j))) continue;
        if ((rs_kv_hash(b->keys[j]) >> depth) & 1) {
            nb->keys[k] = b->keys[j];
            nb->words[k] = b->words[j];
            k++;
            moved |= 1u << j;
        }
    }
    nb->used = (uint16_t)((1u << k) - 1);
    __atomic_store_n(&b->used, (uint16_t)(used & ~moved), __ATOMIC_RELEASE);
    __atomic_store_n(&b->depth, (uint8_t)(depth + 1), __ATOMIC_RELEASE);
    for (uint64_t i = nb->pattern; i <= d->mask; i += 1ull << nb->depth)
        __atomic_store_n(&d->b[i], nb, __ATOMIC_RELEASE);
    eh_ver_bump(b); /* even again */
out:
    eh_unlock(b);
    pthread_mutex_unlock(&t->dir_lock);
    return rc;
}

static int eh_acquire(void *ix, uint64_t key, int create, uint64_t new_word, rs_kv_slot *s,
                      int *created, rs_error *err) {
    eh *t = ix;
    uint64_t h = rs_kv_hash(key);
    for (;;) {
        eh_dir *d = __atomic_load_n(&t->dir, __ATOMIC_ACQUIRE);
        eh_bucket *b = __atomic_load_n(&d->b[h & d->mask], __ATOMIC_ACQUIRE);
        eh_lock(b);
        if (!eh_owns(b, h)) {
            eh_unlock(b);
            continue;
        }
        s->guard = b;
        s->ver = b->ver;
        if (eh_scan(b, key, s)) return 0;
        if (!create) {
            eh_unlock(b);
            return RS_ENOTFOUND;
        }
        if (b->used != EH_FULL) {
            unsigned j = (unsigned)__builtin_ctz(~(unsigned)b->used);
            /* atomic: lock-free readers may load a free slot's key/word while it is filled */
            __atomic_store_n(&b->keys[j], key, __ATOMIC_RELAXED);
            __atomic_store_n(&b->words[j], new_word, __ATOMIC_RELAXED);
            __atomic_store_n(&b->used, (uint16_t)(b->used | (1u << j)), __ATOMIC_RELEASE);
            s->word = &b->words[j];
            s->keyp = &b->keys[j];
            *created = 1;
            return 0;
        }
        eh_unlock(b);
        int rc = eh_split(t, h, err);
        if (rc) return rc;
    }
}

static void eh_release(void *ix, rs_kv_slot *s) {
    eh_unlock((eh_bucket *)s->guard);
}

static void eh_remove(void *ix, rs_kv_slot *s) {
    eh_bucket *b = s->guard;
    unsigned j = (unsigned)(s->keyp - b->keys);
    eh_ver_bump(b);
    __atomic_store_n(&b->used, (uint16_t)(b->used & ~(1u << j)), __ATOMIC_RELEASE);
    eh_ver_bump(b);
}

static uint64_t eh_count(void *ix) {
    eh *t = ix;
    uint64_t n = 0;
    for (eh_slab *s = t->slabs; s; s = s->next)
        for (size_t i = 0; i < s->used; i++)
            n += (uint64_t)__builtin_popcount(s->buckets[i].used);
    return n;
}

/*
 * Batch read, a segment of up to EH_SEG keys at a time: the lookup is one software pipeline of
 * four dependent steps, each EH_AHEAD keys behind the one before it (the whole segment's lookup
 * finishes before its rows are fetched; why, in kv_pet_hash.c):
 *   dir     hash, prefetch the directory slot
 *   bucket  load the bucket pointer, prefetch header + keys
 *   scan    check version/pattern, scan the keys, prefetch the word's line
 *   word    load the word (an odd word goes to the slow path)
 * then
 *   rows    rs_kv_rows: rows 12 keys ahead, word, key and bucket version re-checked after the copy
 * The directory pointer is read once per segment; a stale directory is still valid memory and the
 * pattern/version checks send affected keys to the slow path. The four steps used to be four
 * passes over the segment, each a burst of misses and then its work: on the Zen 3 VM that ran at
 * 54-59 % of the paired ceiling, the pipeline 8 / 16 / 32 keys apart at 61-66 % (kv_bench
 * --paired_ceiling, docs/kv-engine.md).
 */
#ifndef EH_SEG
#define EH_SEG 256
#endif
_Static_assert(EH_SEG <= RS_KV_LOOKUP_MAX, "an EH segment must fit the engine's batch loop");
#define EH_LOCALITY 2
#ifndef EH_AHEAD
#define EH_AHEAD 16 /* keys between one step of a key's lookup and the next */
#endif
static void eh_lookup_segment(const eh_dir *d, const uint64_t *kk, size_t cnt, uint64_t *h,
                              eh_bucket **b, rs_kv_hit *q) {
    for (size_t i = 0; i < cnt + 3 * EH_AHEAD; i++) {
        if (i < cnt) {
            h[i] = rs_kv_hash(kk[i]);
            __builtin_prefetch(&d->b[h[i] & d->mask], 0, EH_LOCALITY);
        }
        if (i >= EH_AHEAD && i - EH_AHEAD < cnt) {
            size_t k = i - EH_AHEAD;
            b[k] = __atomic_load_n(&d->b[h[k] & d->mask], __ATOMIC_ACQUIRE);
            __builtin_prefetch(b[k], 0, EH_LOCALITY);
            __builtin_prefetch((const char *)b[k] + 64, 0, EH_LOCALITY);
        }
        if (i >= 2 * EH_AHEAD && i - 2 * EH_AHEAD < cnt) {
            size_t k = i - 2 * EH_AHEAD;
            q[k].verp = &b[k]->ver;
            q[k].ver = __atomic_load_n(&b[k]->ver, __ATOMIC_ACQUIRE);
            q[k].st = RS_KV_HIT_MISS;
            rs_kv_slot s;
            if ((q[k].ver & 1) || !eh_owns(b[k], h[k]))
                q[k].st = RS_KV_HIT_SLOW;
            else if (eh_scan(b[k], kk[k], &s)) {
                q[k].word = s.word;
                q[k].keyp = s.keyp;
                __builtin_prefetch(s.word, 0, EH_LOCALITY);
                q[k].st = RS_KV_HIT_ROW;
            }
        }
        if (i >= 3 * EH_AHEAD) {
            size_t k = i - 3 * EH_AHEAD;
            if (q[k].st != RS_KV_HIT_ROW) continue;
            q[k].w1 = __atomic_load_n(q[k].word, __ATOMIC_ACQUIRE);
            if (q[k].w1 & 1) q[k].st = RS_KV_HIT_SLOW;
        }
    }
}

static void eh_batch_lookup(void *ix, const uint64_t *keys, size_t cnt, rs_kv_hit *q) {
    eh *t = ix;
    uint64_t h[EH_SEG];
    eh_bucket *b[EH_SEG];
    eh_lookup_segment(__atomic_load_n(&t->dir, __ATOMIC_ACQUIRE), keys, cnt, h, b, q);
}

/* Every bucket ever made is live (a split reuses the old bucket as one half), so the scan walks
 * the slabs; dir_lock keeps splits, and with them bucket creation and entry moves, out. */
static int eh_scan_all(void *ix, int (*fn)(void *ctx, const rs_kv_slot *s), void *ctx) {
    eh *t = ix;
    int rc = 0;
    pthread_mutex_lock(&t->dir_lock);
    for (eh_slab *sl = t->slabs; sl && !rc; sl = sl->next)
        for (size_t i = 0; i < sl->used && !rc; i++) {
            eh_bucket *b = &sl->buckets[i];
            uint32_t v = __atomic_load_n(&b->ver, __ATOMIC_ACQUIRE);
            unsigned used = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);
            for (; used && !rc; used &= used - 1) {
                unsigned j = (unsigned)__builtin_ctz(used);
                rs_kv_slot s = {.word = &b->words[j], .keyp = &b->keys[j], .guard = b, .ver = v};
                rc = fn(ctx, &s);
            }
        }
    pthread_mutex_unlock(&t->dir_lock);
    return rc;
}

const rs_kv_index_ops rs_kv_eh_ops = {
    .type = RS_KV_INDEX_EXTENDIBLE_HASH,
    .find = eh_find,
    .validate = eh_validate,
    .acquire = eh_acquire,
    .release = eh_release,
    .remove = eh_remove,
    .batch_lookup = eh_batch_lookup,
    .lookup_max = EH_SEG,
    .memory = eh_memory,
    .count = eh_count,
    .clear = eh_clear,
    .scan = eh_scan_all,
    .sync = NULL,
    .close = eh_close,
};
