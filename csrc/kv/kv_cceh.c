/*
 * kv_cceh.c — SSD_EXTENDIBLE_HASH: CCEH (cache-line-conscious extendible hashing) kept in a file,
 * <path>/cceh.index, mapped with mmap so the index survives close and reopen with its data (the
 * values live beside it in <path>/cceh.values, kv_value_store.c).
 *
 * File layout (every block 16 KiB, so segments stay page aligned):
 *
 *   0        header: magic "RSCCEH01", format version, segment count, capacity | zero pad
 *   16 KiB   segment 0
 *   32 KiB   segment 1 ...
 *
 * Segment (16 KiB = 256 buckets of 64 bytes):
 *
 *   bucket 0      | ver u32 | lock u8 | depth u8 | pad u16 | pattern u64 | pad to 64 bytes |
 *   bucket 1..255 | {key u64, word u64} x 4 |      (word == UINT64_MAX: empty pair)
 *
 * The directory (2^global_depth segment pointers, addressed by the top bits of the key hash) is
 * rebuilt in DRAM at open from each segment's local depth and pattern — the MSB prefix its keys
 * share — so the file holds only segments. A key lives in the 4-bucket window (16 pairs) that
 * starts at bucket 1 + (hash mod 255) (bounded linear probing); when its window is full the
 * segment splits on the next hash bit, and the directory doubles when the segment was at global
 * depth. The file grows by whole segments (ftruncate) inside one mapping reserved at open, sized
 * from the capacity; running out of it is RS_EFULL naming the capacity.
 *
 * Concurrency is as in kv_ext_hash.c: writers lock the segment, splits also take dir_lock, and
 * readers validate the segment's ver (odd while pairs move or are removed). Reopen assumes the
 * store was closed cleanly (a crash in the middle of a split is not recovered).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kv_internal.h"

#define CCEH_MAGIC      0x3130484543435352ull /* "RSCCEH01" */
#define CCEH_FORMAT     1u
#define CCEH_SEG_BYTES  16384u
#define CCEH_BUCKETS    255u /* data buckets per segment */
#define CCEH_PAIRS      4u   /* pairs per 64-byte bucket */
#define CCEH_PROBE      4u   /* buckets in a key's window */
#define CCEH_INIT_DEPTH 2u
#define CCEH_MAX_DEPTH  32u

typedef struct cceh_pair {
    uint64_t key;
    uint64_t word;
} cceh_pair;

typedef struct cceh_seg {
    uint32_t ver;
    uint8_t lock;
    uint8_t depth;
    uint16_t pad0;
    uint64_t pattern;
    uint8_t pad1[48];
    cceh_pair b[CCEH_BUCKETS][CCEH_PAIRS];
} cceh_seg;

_Static_assert(sizeof(cceh_seg) == CCEH_SEG_BYTES, "CCEH segment must be 16 KiB");

typedef struct cceh_header {
    uint64_t magic;
    uint32_t format;
    uint32_t pad;
    uint64_t nseg;
    uint64_t capacity;
} cceh_header;

typedef struct cceh_dir {
    struct cceh_dir *retired;
    uint32_t depth;
    cceh_seg *s[];
} cceh_dir;

typedef struct cceh {
    rs_kv_region region;
    cceh_header *hdr;
    cceh_dir *dir; /* atomic pointer */
    pthread_mutex_t dir_lock;
    uint64_t max_seg;
    uint64_t capacity;
} cceh;

static inline cceh_seg *seg_at(cceh *c, uint64_t i) {
    return (cceh_seg *)(c->region.base + CCEH_SEG_BYTES * (i + 1));
}

static inline uint64_t dir_index(uint64_t h, uint32_t depth) {
    return depth ? h >> (64 - depth) : 0;
}

static inline int seg_owns(const cceh_seg *s, uint64_t h) {
    uint8_t d = __atomic_load_n(&s->depth, __ATOMIC_RELAXED);
    return dir_index(h, d) == __atomic_load_n(&s->pattern, __ATOMIC_RELAXED);
}

static inline cceh_pair *window_pair(cceh_seg *s, uint64_t h, unsigned p) {
    unsigned b = (unsigned)((h % CCEH_BUCKETS + p / CCEH_PAIRS) % CCEH_BUCKETS);
    return &s->b[b][p % CCEH_PAIRS];
}

static cceh_dir *dir_new(uint32_t depth) {
    cceh_dir *d = calloc(1, sizeof *d + (sizeof(cceh_seg *) << depth));
    if (d) d->depth = depth;
    return d;
}

static void dir_free_all(cceh_dir *d) {
    while (d) {
        cceh_dir *r = d->retired;
        free(d);
        d = r;
    }
}

/* Append a fresh segment to the file (dir_lock held, or single-threaded open/clear). */
static int seg_alloc(cceh *c, uint8_t depth, uint64_t pattern, cceh_seg **out, rs_error *err) {
    uint64_t i = c->hdr->nseg;
    if (i >= c->max_seg)
        return rs_error_set(err, RS_EFULL,
                            "SSD_EXTENDIBLE_HASH index file is full: %llu segments of 16 KiB for "
                            "capacity %llu keys",
                            (unsigned long long)c->max_seg, (unsigned long long)c->capacity);
    int rc = rs_kv_region_grow(&c->region, (size_t)CCEH_SEG_BYTES * (i + 2), err);
    if (rc) return rc;
    cceh_seg *s = seg_at(c, i);
    memset(s, 0, 64);
    memset(s->b, 0xff, sizeof s->b);
    s->depth = depth;
    s->pattern = pattern;
    __atomic_store_n(&c->hdr->nseg, i + 1, __ATOMIC_RELEASE);
    *out = s;
    return 0;
}

static int cceh_format(cceh *c, rs_error *err) {
    c->hdr->magic = CCEH_MAGIC;
    c->hdr->format = CCEH_FORMAT;
    c->hdr->nseg = 0;
    c->hdr->capacity = c->capacity;
    cceh_dir *d = dir_new(CCEH_INIT_DEPTH);
    if (!d) return rs_error_set(err, RS_ENOMEM, "CCEH directory");
    for (uint64_t i = 0; i < (1ull << CCEH_INIT_DEPTH); i++) {
        int rc = seg_alloc(c, CCEH_INIT_DEPTH, i, &d->s[i], err);
        if (rc) {
            free(d);
            return rc;
        }
    }
    d->retired = c->dir;
    c->dir = d;
    return 0;
}

/* Rebuild the directory from the segments of an existing file. */
static int cceh_load(cceh *c, const char *path, rs_error *err) {
    uint64_t nseg = c->hdr->nseg;
    if (nseg == 0 || (size_t)CCEH_SEG_BYTES * (nseg + 1) > c->region.backed)
        return rs_error_set(err, RS_EPROTO, "%s: segment count %llu does not fit the file", path,
                            (unsigned long long)nseg);
    uint32_t g = 0;
    for (uint64_t i = 0; i < nseg; i++) {
        cceh_seg *s = seg_at(c, i);
        s->lock = 0;
        s->ver &= ~1u;
        if (s->depth > CCEH_MAX_DEPTH || (s->depth < 64 && s->pattern >> s->depth))
            return rs_error_set(err, RS_EPROTO, "%s: segment %llu has a bad depth/pattern", path,
                                (unsigned long long)i);
        if (s->depth > g) g = s->depth;
    }
    cceh_dir *d = dir_new(g);
    if (!d) return rs_error_set(err, RS_ENOMEM, "CCEH directory of depth %u", g);
    for (uint64_t i = 0; i < nseg; i++) {
        cceh_seg *s = seg_at(c, i);
        uint64_t lo = s->pattern << (g - s->depth), hi = (s->pattern + 1) << (g - s->depth);
        for (uint64_t j = lo; j < hi; j++)
            d->s[j] = s;
    }
    for (uint64_t j = 0; j < (1ull << g); j++)
        if (!d->s[j]) {
            free(d);
            return rs_error_set(err, RS_EPROTO, "%s: directory slot %llu has no segment", path,
                                (unsigned long long)j);
        }
    c->dir = d;
    return 0;
}

int rs_kv_cceh_open(const char *dirpath, uint64_t capacity, void **out, rs_error *err) {
    char path[4096];
    int rc, existed = 0;
    snprintf(path, sizeof path, "%s/cceh.index", dirpath);
    cceh *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "CCEH handle");
    c->capacity = capacity;
    c->max_seg = capacity / 128 + 64;
    pthread_mutex_init(&c->dir_lock, NULL);
    rc = rs_kv_region_open_file(&c->region, path, (size_t)CCEH_SEG_BYTES * (c->max_seg + 1),
                                CCEH_SEG_BYTES, &existed, err);
    if (rc) goto fail_lock;
    c->hdr = (cceh_header *)c->region.base;
    if (existed) {
        if (c->hdr->magic != CCEH_MAGIC || c->hdr->format != CCEH_FORMAT) {
            rc = rs_error_set(err, RS_EPROTO, "%s is not a recbench CCEH index (format %u)", path,
                              CCEH_FORMAT);
            goto fail_region;
        }
        /* a store created with a larger capacity keeps its larger segment budget */
        uint64_t stored_max = c->hdr->capacity / 128 + 64;
        if (stored_max > c->max_seg || c->hdr->nseg > c->max_seg) {
            c->max_seg = stored_max > c->hdr->nseg ? stored_max : c->hdr->nseg;
            rs_kv_region_close(&c->region);
            rc = rs_kv_region_open_file(&c->region, path, (size_t)CCEH_SEG_BYTES * (c->max_seg + 1),
                                        CCEH_SEG_BYTES, &existed, err);
            if (rc) goto fail_lock;
            c->hdr = (cceh_header *)c->region.base;
        }
        if ((rc = cceh_load(c, path, err))) goto fail_region;
        if (capacity > c->hdr->capacity) c->hdr->capacity = capacity;
    } else {
        if ((rc = cceh_format(c, err))) goto fail_region;
    }
    *out = c;
    return 0;
fail_region:
    rs_kv_region_close(&c->region);
fail_lock:
    pthread_mutex_destroy(&c->dir_lock);
    free(c);
    return rc;
}

static void cceh_close(void *ix) {
    cceh *c = ix;
    dir_free_all(c->dir);
    rs_kv_region_close(&c->region);
    pthread_mutex_destroy(&c->dir_lock);
    free(c);
}

static int cceh_sync(void *ix, rs_error *err) {
    return rs_kv_region_sync(&((cceh *)ix)->region, err);
}

static int cceh_clear(void *ix, rs_error *err) {
    return cceh_format((cceh *)ix, err);
}

static int seg_scan(cceh_seg *s, uint64_t h, uint64_t key, rs_kv_slot *sl) {
    for (unsigned p = 0; p < CCEH_PROBE * CCEH_PAIRS; p++) {
        cceh_pair *pr = window_pair(s, h, p);
        if (__atomic_load_n(&pr->word, __ATOMIC_ACQUIRE) != RS_KV_WORD_EMPTY &&
            __atomic_load_n(&pr->key, __ATOMIC_RELAXED) == key) {
            sl->word = &pr->word;
            sl->keyp = &pr->key;
            return 1;
        }
    }
    return 0;
}

static int cceh_find(void *ix, uint64_t key, rs_kv_slot *sl) {
    cceh *c = ix;
    uint64_t h = rs_kv_hash(key);
    for (;;) {
        cceh_dir *d = __atomic_load_n(&c->dir, __ATOMIC_ACQUIRE);
        cceh_seg *s = __atomic_load_n(&d->s[dir_index(h, d->depth)], __ATOMIC_ACQUIRE);
        uint32_t v = __atomic_load_n(&s->ver, __ATOMIC_ACQUIRE);
        if ((v & 1) || !seg_owns(s, h)) {
            rs_kv_cpu_relax();
            continue;
        }
        sl->guard = s;
        sl->ver = v;
        return seg_scan(s, h, key, sl);
    }
}

static int cceh_validate(void *ix, const rs_kv_slot *sl) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&((cceh_seg *)sl->guard)->ver, __ATOMIC_RELAXED) == sl->ver;
}

static void seg_lock(cceh_seg *s) {
    for (;;) {
        uint8_t z = 0;
        if (__atomic_compare_exchange_n(&s->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
            rs_kv_cpu_relax();
    }
}

static void seg_unlock(cceh_seg *s) {
    __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

static void seg_ver_bump(cceh_seg *s) {
    __atomic_store_n(&s->ver, s->ver + 1, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static cceh_pair *window_free(cceh_seg *s, uint64_t h) {
    for (unsigned p = 0; p < CCEH_PROBE * CCEH_PAIRS; p++) {
        cceh_pair *pr = window_pair(s, h, p);
        if (pr->word == RS_KV_WORD_EMPTY) return pr;
    }
    return NULL;
}

static int cceh_split(cceh *c, uint64_t h, rs_error *err) {
    int rc = 0;
    pthread_mutex_lock(&c->dir_lock);
    cceh_dir *d = c->dir;
    cceh_seg *s = d->s[dir_index(h, d->depth)];
    seg_lock(s);
    if (!seg_owns(s, h) || window_free(s, h)) goto out;
    if (s->depth == d->depth) {
        if (d->depth >= CCEH_MAX_DEPTH) {
            rc = rs_error_set(err, RS_EFULL,
                              "SSD_EXTENDIBLE_HASH directory reached depth %u (capacity %llu)",
                              d->depth, (unsigned long long)c->capacity);
            goto out;
        }
        cceh_dir *nd = dir_new(d->depth + 1);
        if (!nd) {
            rc = rs_error_set(err, RS_ENOMEM, "CCEH directory of depth %u", d->depth + 1);
            goto out;
        }
        for (uint64_t i = 0; i < (2ull << d->depth); i++)
            nd->s[i] = d->s[i >> 1];
        nd->retired = d;
        __atomic_store_n(&c->dir, nd, __ATOMIC_RELEASE);
        d = nd;
    }
    uint8_t depth = s->depth;
    cceh_seg *ns = NULL;
    if ((rc = seg_alloc(c, (uint8_t)(depth + 1), (s->pattern << 1) | 1, &ns, err))) goto out;
    seg_ver_bump(s); /* odd: pairs are moving */
    for (unsigned b = 0; b < CCEH_BUCKETS; b++)
        for (unsigned p = 0; p < CCEH_PAIRS; p++) {
            cceh_pair *pr = &s->b[b][p];
            if (pr->word == RS_KV_WORD_EMPTY) continue;
            uint64_t kh = rs_kv_hash(pr->key);
            if (!((kh >> (63 - depth)) & 1)) continue;
            cceh_pair *dst = &ns->b[b][p]; /* same place: it is inside the key's window */
            dst->key = pr->key;
            dst->word = pr->word;
            __atomic_store_n(&pr->word, RS_KV_WORD_EMPTY, __ATOMIC_RELAXED); /* readers load it */
        }
    __atomic_store_n(&s->pattern, s->pattern << 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->depth, (uint8_t)(depth + 1), __ATOMIC_RELEASE);
    uint32_t shift = d->depth - ns->depth;
    for (uint64_t j = ns->pattern << shift; j < (ns->pattern + 1) << shift; j++)
        __atomic_store_n(&d->s[j], ns, __ATOMIC_RELEASE);
    seg_ver_bump(s); /* even again */
out:
    seg_unlock(s);
    pthread_mutex_unlock(&c->dir_lock);
    return rc;
}

static int cceh_acquire(void *ix, uint64_t key, int create, uint64_t new_word, rs_kv_slot *sl,
                        int *created, rs_error *err) {
    cceh *c = ix;
    uint64_t h = rs_kv_hash(key);
    for (;;) {
        cceh_dir *d = __atomic_load_n(&c->dir, __ATOMIC_ACQUIRE);
        cceh_seg *s = __atomic_load_n(&d->s[dir_index(h, d->depth)], __ATOMIC_ACQUIRE);
        seg_lock(s);
        if (!seg_owns(s, h)) {
            seg_unlock(s);
            continue;
        }
        sl->guard = s;
        sl->ver = s->ver;
        if (seg_scan(s, h, key, sl)) return 0;
        if (!create) {
            seg_unlock(s);
            return RS_ENOTFOUND;
        }
        cceh_pair *pr = window_free(s, h);
        if (pr) {
            __atomic_store_n(&pr->key, key, __ATOMIC_RELAXED); /* lock-free readers load keys */
            __atomic_store_n(&pr->word, new_word, __ATOMIC_RELEASE);
            sl->word = &pr->word;
            sl->keyp = &pr->key;
            *created = 1;
            return 0;
        }
        seg_unlock(s);
        int rc = cceh_split(c, h, err);
        if (rc) return rc;
    }
}

static void cceh_release(void *ix, rs_kv_slot *sl) {
    seg_unlock((cceh_seg *)sl->guard);
}

static void cceh_remove(void *ix, rs_kv_slot *sl) {
    cceh_seg *s = sl->guard;
    seg_ver_bump(s);
    __atomic_store_n(sl->word, RS_KV_WORD_EMPTY, __ATOMIC_RELEASE);
    seg_ver_bump(s);
}

static uint64_t cceh_count(void *ix) {
    cceh *c = ix;
    uint64_t n = 0;
    for (uint64_t i = 0; i < c->hdr->nseg; i++) {
        cceh_seg *s = seg_at(c, i);
        for (unsigned b = 0; b < CCEH_BUCKETS; b++)
            for (unsigned p = 0; p < CCEH_PAIRS; p++)
                n += s->b[b][p].word != RS_KV_WORD_EMPTY;
    }
    return n;
}

/*
 * Batch read, a segment of up to CCEH_SEG keys at a time (bursts of independent misses, as in
 * kv_pet_hash.c): hash, directory (in DRAM, small) -> segment, prefetch the segment's header line
 * and the first two buckets of the key's window; then version/pattern check, window scan and word
 * load; then rs_kv_rows, which re-checks word, key and segment version after each copy.
 */
#define CCEH_SEG 256

static void cceh_lookup_segment(cceh *c, const uint64_t *kk, size_t cnt, uint64_t *h, cceh_seg **sg,
                                rs_kv_hit *q) {
    cceh_dir *d = __atomic_load_n(&c->dir, __ATOMIC_ACQUIRE);
    for (size_t k = 0; k < cnt; k++) {
        h[k] = rs_kv_hash(kk[k]);
        sg[k] = __atomic_load_n(&d->s[dir_index(h[k], d->depth)], __ATOMIC_ACQUIRE);
        __builtin_prefetch(sg[k], 0, 2);
        __builtin_prefetch(window_pair(sg[k], h[k], 0), 0, 2);
        __builtin_prefetch(window_pair(sg[k], h[k], CCEH_PAIRS), 0, 2);
    }
    for (size_t k = 0; k < cnt; k++) {
        q[k].verp = &sg[k]->ver;
        q[k].ver = __atomic_load_n(&sg[k]->ver, __ATOMIC_ACQUIRE);
        rs_kv_slot sl;
        if ((q[k].ver & 1) || !seg_owns(sg[k], h[k])) {
            q[k].st = RS_KV_HIT_SLOW;
        } else if (!seg_scan(sg[k], h[k], kk[k], &sl)) {
            q[k].st = RS_KV_HIT_MISS;
        } else {
            q[k].word = sl.word;
            q[k].keyp = sl.keyp;
            q[k].w1 = __atomic_load_n(sl.word, __ATOMIC_ACQUIRE);
            q[k].st = (q[k].w1 & 1) ? RS_KV_HIT_SLOW : RS_KV_HIT_ROW;
        }
    }
}

static void cceh_batch_get_flat(void *ix, const rs_kv_vs *vs, const uint64_t *keys, size_t n,
                                uint8_t *out, uint8_t *found, size_t *n_found) {
    uint64_t h[CCEH_SEG];
    cceh_seg *sg[CCEH_SEG];
    rs_kv_hit q[CCEH_SEG];
    size_t hits = 0;
    for (size_t base = 0; base < n; base += CCEH_SEG) {
        size_t cnt = n - base < CCEH_SEG ? n - base : CCEH_SEG;
        cceh_lookup_segment(ix, keys + base, cnt, h, sg, q);
        hits += rs_kv_rows(&rs_kv_cceh_ops, ix, vs, keys + base, cnt, q,
                           out + base * vs->value_size, found ? found + base : NULL);
    }
    if (n_found) *n_found = hits;
}

/* The index file's mapped length. */
static void cceh_memory(void *ix, uint64_t *bytes, const char **pages) {
    cceh *c = ix;
    *bytes = __atomic_load_n(&c->region.backed, __ATOMIC_ACQUIRE);
    *pages = c->region.pages;
}

const rs_kv_index_ops rs_kv_cceh_ops = {
    .type = RS_KV_INDEX_CCEH,
    .find = cceh_find,
    .validate = cceh_validate,
    .acquire = cceh_acquire,
    .release = cceh_release,
    .remove = cceh_remove,
    .batch_get_flat = cceh_batch_get_flat,
    .memory = cceh_memory,
    .count = cceh_count,
    .clear = cceh_clear,
    .sync = cceh_sync,
    .close = cceh_close,
};
