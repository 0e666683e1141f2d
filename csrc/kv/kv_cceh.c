/*
 * kv_cceh.c — SSD_EXTENDIBLE_HASH: CCEH (cache-line-conscious extendible hashing) kept in a file,
 * <path>/cceh.index, mapped with mmap so the index survives close and reopen with its data (the
 * values live beside it in <path>/cceh.values, kv_value_store.c).
 *
 * File layout (every block 16 KiB, so segments stay page aligned):
 *
 *   0        header: magic "RSCCEH01", format version, segment count, capacity, open state,
 *            split journal {old segment + 1, new segment + 1} | zero pad
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
 * readers validate the segment's ver (odd while pairs move or are removed).
 *
 * Crash recovery (a process killed at any instruction; the mapped pages survive in the page
 * cache, in program order): `open_state` is 1 while a process has the file open and 0 after a
 * clean close. A split records {old, new} in the journal before it publishes the new segment and
 * clears it after the last pair moved and the old segment took its new depth; reopening with a
 * journal set redoes the split (idempotent: a pair is copied to the same place in the new segment
 * before it is cleared in the old one, and nothing else writes the new segment before the
 * directory points at it). After an unclean close, odd value words (a writer or a delete stopped
 * midway) are made even, and the engine rebuilds the value store's free list from the rows the
 * index references (kv_engine.c), since allocation state may be mid-update. Rows are written
 * copy-on-write in this index (kv_engine.c), so a PUT cut short leaves the old row or the new one,
 * never a mix. rs_kv_cceh_verify checks all of it. Format version 2 added open_state and the
 * journal (a version 1 file opens as version 2); a file from a newer version is refused by name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kv_internal.h"

#define CCEH_MAGIC      0x3130484543435352ull /* "RSCCEH01" */
#define CCEH_FORMAT     2u
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
    uint64_t open_state;           /* 1 while open, 0 after a clean close (format 2) */
    uint64_t split_old, split_new; /* segment index + 1 of a split in progress; 0 = none */
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
    int unclean; /* the file was not closed cleanly before this open */
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

static uint64_t seg_index(const cceh *c, const cceh_seg *s) {
    return (uint64_t)((const uint8_t *)s - c->region.base) / CCEH_SEG_BYTES - 1;
}

/* Move the pairs of s (at depth `depth`) whose next hash bit is 1 to ns, each to the same
 * position, then give s its deeper depth and pattern. Idempotent, so recovery can redo it. */
static void split_move(cceh_seg *s, cceh_seg *ns, uint8_t depth) {
    for (unsigned b = 0; b < CCEH_BUCKETS; b++)
        for (unsigned p = 0; p < CCEH_PAIRS; p++) {
            cceh_pair *pr = &s->b[b][p];
            if (pr->word == RS_KV_WORD_EMPTY) continue;
            uint64_t kh = rs_kv_hash(pr->key);
            if (!((kh >> (63 - depth)) & 1)) continue;
            cceh_pair *dst = &ns->b[b][p]; /* same place: it is inside the key's window */
            dst->key = pr->key;
            __atomic_store_n(&dst->word, pr->word, __ATOMIC_RELEASE);        /* before the clear */
            __atomic_store_n(&pr->word, RS_KV_WORD_EMPTY, __ATOMIC_RELEASE); /* readers load it */
        }
    __atomic_store_n(&s->pattern, (uint64_t)ns->pattern & ~1ull, __ATOMIC_RELAXED);
    __atomic_store_n(&s->depth, (uint8_t)(depth + 1), __ATOMIC_RELEASE);
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
    c->hdr->split_old = c->hdr->split_new = 0;
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

/* Finish a split that a crash interrupted (the journal names it), and after an unclean close
 * make odd value words even: the write or delete that made one odd never finished. */
static int cceh_recover(cceh *c, const char *path, rs_error *err) {
    cceh_header *h = c->hdr;
    if (h->split_old) {
        uint64_t so = h->split_old - 1, sn = h->split_new - 1;
        if (so >= h->nseg || h->split_new == 0)
            return rs_error_set(err, RS_EPROTO, "%s: split journal names segment %llu of %llu",
                                path, (unsigned long long)so, (unsigned long long)h->nseg);
        if (sn < h->nseg) { /* the new segment was published: redo the move */
            cceh_seg *s = seg_at(c, so), *ns = seg_at(c, sn);
            if (ns->depth == 0 || ns->depth > CCEH_MAX_DEPTH || !(ns->pattern & 1))
                return rs_error_set(
                    err, RS_EPROTO, "%s: split journal: segment %llu has depth %u pattern %llu",
                    path, (unsigned long long)sn, ns->depth, (unsigned long long)ns->pattern);
            uint8_t depth = (uint8_t)(ns->depth - 1);
            s->depth = depth;
            s->pattern = ns->pattern >> 1;
            split_move(s, ns, depth);
        }
        h->split_old = h->split_new = 0;
    }
    if (!c->unclean) return 0;
    for (uint64_t i = 0; i < h->nseg; i++) {
        cceh_seg *s = seg_at(c, i);
        for (unsigned b = 0; b < CCEH_BUCKETS; b++)
            for (unsigned p = 0; p < CCEH_PAIRS; p++) {
                uint64_t w = s->b[b][p].word;
                if (w != RS_KV_WORD_EMPTY && (w & 1)) s->b[b][p].word = rs_kv_word_next(w);
            }
    }
    return 0;
}

/* Rebuild the directory from the segments of an existing file. */
static int cceh_load(cceh *c, const char *path, rs_error *err) {
    uint64_t nseg = c->hdr->nseg;
    if (nseg == 0 || (size_t)CCEH_SEG_BYTES * (nseg + 1) > c->region.backed)
        return rs_error_set(err, RS_EPROTO, "%s: segment count %llu does not fit the file", path,
                            (unsigned long long)nseg);
    int rc = cceh_recover(c, path, err);
    if (rc) return rc;
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

int rs_kv_cceh_unclean(void *ix) {
    return ((cceh *)ix)->unclean;
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
        if (c->hdr->magic != CCEH_MAGIC) {
            rc = rs_error_set(err, RS_EPROTO,
                              "%s is not a recbench CCEH index (no RSCCEH01 magic at offset 0)",
                              path);
            goto fail_region;
        }
        if (c->hdr->format > CCEH_FORMAT || c->hdr->format == 0) {
            rc = rs_error_set(err, RS_ENOTSUP,
                              "%s: CCEH format version %u is newer than this build reads (up to "
                              "%u); open it with a newer recbench",
                              path, c->hdr->format, CCEH_FORMAT);
            goto fail_region;
        }
        c->unclean = c->hdr->format >= 2 && c->hdr->open_state != 0;
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
        c->hdr->format = CCEH_FORMAT;
    } else {
        if ((rc = cceh_format(c, err))) goto fail_region;
    }
    __atomic_store_n(&c->hdr->open_state, 1, __ATOMIC_RELEASE);
    *out = c;
    return 0;
fail_region:
    rs_kv_region_close(&c->region);
fail_lock:
    pthread_mutex_destroy(&c->dir_lock);
    free(c);
    return rc;
}

/* Called after the engine synced the values file: data first, then the clean mark. */
static void cceh_close(void *ix) {
    cceh *c = ix;
    if (rs_kv_region_sync(&c->region, NULL) == 0) {
        __atomic_store_n(&c->hdr->open_state, 0, __ATOMIC_RELEASE);
        rs_kv_region_sync(&c->region, NULL);
    }
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
    /* journal first: a crash after the new segment is published redoes the split at open */
    __atomic_store_n(&c->hdr->split_new, c->hdr->nseg + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&c->hdr->split_old, seg_index(c, s) + 1, __ATOMIC_RELEASE);
    if ((rc = seg_alloc(c, (uint8_t)(depth + 1), (s->pattern << 1) | 1, &ns, err))) {
        __atomic_store_n(&c->hdr->split_old, 0, __ATOMIC_RELEASE);
        goto out;
    }
    seg_ver_bump(s); /* odd: pairs are moving */
    split_move(s, ns, depth);
    uint32_t shift = d->depth - ns->depth;
    for (uint64_t j = ns->pattern << shift; j < (ns->pattern + 1) << shift; j++)
        __atomic_store_n(&d->s[j], ns, __ATOMIC_RELEASE);
    seg_ver_bump(s); /* even again */
    __atomic_store_n(&c->hdr->split_old, 0, __ATOMIC_RELEASE);
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

typedef struct seg_range {
    uint64_t start; /* first hash of the segment's range (pattern in the top depth bits) */
    uint8_t depth;
    uint64_t index;
} seg_range;

static int range_cmp(const void *a, const void *b) {
    const seg_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Structure of the index: the journal is clear, segments have sane depths and patterns, their
 * hash ranges tile the whole hash space exactly once, the directory points every slot at the
 * segment owning it, and every pair sits in its owner segment inside its probe window with an
 * even word. (Keys, rows and counts are checked by kv_verify.c.) Splits wait meanwhile. */
int rs_kv_cceh_verify(void *ix, const rs_kv_vs *vs, char *report, size_t cap, rs_error *err) {
    cceh *c = ix;
    int rc = 0;
    (void)vs;
    pthread_mutex_lock(&c->dir_lock);
    uint64_t nseg = c->hdr->nseg, pairs = 0;
    cceh_dir *d = c->dir;
    seg_range *r = calloc(nseg ? nseg : 1, sizeof *r);
    if (!r) {
        rc = rs_error_set(err, RS_ENOMEM, "verify: %llu segment ranges", (unsigned long long)nseg);
        goto out;
    }
    if (c->hdr->split_old) {
        rc = rs_error_set(err, RS_EVERIFY, "CCEH: a split of segment %llu is still journaled",
                          (unsigned long long)(c->hdr->split_old - 1));
        goto out;
    }
    for (uint64_t i = 0; i < nseg; i++) {
        cceh_seg *sg = seg_at(c, i);
        if (sg->depth > d->depth || (sg->depth < 64 && sg->pattern >> sg->depth)) {
            rc = rs_error_set(err, RS_EVERIFY,
                              "CCEH: segment %llu has depth %u and pattern %llu (global depth %u)",
                              (unsigned long long)i, sg->depth, (unsigned long long)sg->pattern,
                              d->depth);
            goto out;
        }
        r[i] = (seg_range){sg->depth ? sg->pattern << (64 - sg->depth) : 0, sg->depth, i};
        for (unsigned b = 0; b < CCEH_BUCKETS; b++)
            for (unsigned p = 0; p < CCEH_PAIRS; p++) {
                cceh_pair *pr = &sg->b[b][p];
                uint64_t w = __atomic_load_n(&pr->word, __ATOMIC_ACQUIRE);
                if (w == RS_KV_WORD_EMPTY) continue;
                pairs++;
                uint64_t h = rs_kv_hash(pr->key);
                unsigned off = (b + CCEH_BUCKETS - (unsigned)(h % CCEH_BUCKETS)) % CCEH_BUCKETS;
                const char *bad = (w & 1)             ? "has an odd (unfinished) value word"
                                  : !seg_owns(sg, h)  ? "hashes outside its segment"
                                  : off >= CCEH_PROBE ? "sits outside its probe window"
                                                      : NULL;
                if (bad) {
                    rc = rs_error_set(
                        err, RS_EVERIFY, "CCEH: key %llu in segment %llu bucket %u %s",
                        (unsigned long long)pr->key, (unsigned long long)i, b + 1, bad);
                    goto out;
                }
            }
    }
    qsort(r, nseg, sizeof *r, range_cmp);
    uint64_t next = 0;
    for (uint64_t i = 0; i < nseg; i++) {
        if (r[i].start != next || (i > 0 && next == 0)) {
            rc = rs_error_set(err, RS_EVERIFY,
                              "CCEH: segment %llu starts its hash range at 0x%016llx, expected "
                              "0x%016llx (ranges %s)",
                              (unsigned long long)r[i].index, (unsigned long long)r[i].start,
                              (unsigned long long)next,
                              r[i].start < next ? "overlap" : "leave a gap");
            goto out;
        }
        next = r[i].depth ? r[i].start + (1ull << (64 - r[i].depth)) : 0;
    }
    if (nseg == 0 || next != 0) {
        rc = rs_error_set(err, RS_EVERIFY, "CCEH: segment ranges end at 0x%016llx, not 2^64",
                          (unsigned long long)next);
        goto out;
    }
    for (uint64_t j = 0; j < (1ull << d->depth); j++) {
        uint64_t hj = d->depth ? j << (64 - d->depth) : 0;
        if (!seg_owns(d->s[j], hj)) {
            rc = rs_error_set(err, RS_EVERIFY,
                              "CCEH: directory slot %llu points at segment %llu, which does not "
                              "own it",
                              (unsigned long long)j, (unsigned long long)seg_index(c, d->s[j]));
            goto out;
        }
    }
    snprintf(report, cap, "segments=%llu global_depth=%u pairs=%llu", (unsigned long long)nseg,
             d->depth, (unsigned long long)pairs);
out:
    pthread_mutex_unlock(&c->dir_lock);
    free(r);
    return rc;
}

/* Segments are never freed and only splits (under dir_lock) add them or move pairs. */
static int cceh_scan(void *ix, int (*fn)(void *ctx, const rs_kv_slot *s), void *ctx) {
    cceh *c = ix;
    int rc = 0;
    pthread_mutex_lock(&c->dir_lock);
    for (uint64_t i = 0; i < c->hdr->nseg && !rc; i++) {
        cceh_seg *s = seg_at(c, i);
        uint32_t v = __atomic_load_n(&s->ver, __ATOMIC_ACQUIRE);
        for (unsigned b = 0; b < CCEH_BUCKETS && !rc; b++)
            for (unsigned p = 0; p < CCEH_PAIRS && !rc; p++) {
                cceh_pair *pr = &s->b[b][p];
                if (__atomic_load_n(&pr->word, __ATOMIC_ACQUIRE) == RS_KV_WORD_EMPTY) continue;
                rs_kv_slot sl = {.word = &pr->word, .keyp = &pr->key, .guard = s, .ver = v};
                rc = fn(ctx, &sl);
            }
    }
    pthread_mutex_unlock(&c->dir_lock);
    return rc;
}

/*
 * Batch read, a segment of up to CCEH_SEG keys at a time (bursts of independent misses, as in
 * kv_pet_hash.c): hash, directory (in DRAM, small) -> segment, prefetch the segment's header line
 * and the first two buckets of the key's window; then version/pattern check, window scan and word
 * load; then rs_kv_rows, which re-checks word, key and segment version after each copy.
 */
#define CCEH_SEG 256
_Static_assert(CCEH_SEG <= RS_KV_LOOKUP_MAX, "a CCEH segment must fit the engine's batch loop");

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

static void cceh_batch_lookup(void *ix, const uint64_t *keys, size_t cnt, rs_kv_hit *q) {
    uint64_t h[CCEH_SEG];
    cceh_seg *sg[CCEH_SEG];
    cceh_lookup_segment(ix, keys, cnt, h, sg, q);
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
    .batch_lookup = cceh_batch_lookup,
    .lookup_max = CCEH_SEG,
    .memory = cceh_memory,
    .count = cceh_count,
    .clear = cceh_clear,
    .scan = cceh_scan,
    .sync = cceh_sync,
    .close = cceh_close,
};
