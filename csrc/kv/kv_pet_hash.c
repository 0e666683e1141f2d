/*
 * kv_pet_hash.c — DRAM_PET_HASH: an F14 / PetPS PetHash-style open-addressing index over 64-byte
 * chunks of 14 slots, with an 8-bit tag per slot matched 14 at a time with SSE2.
 *
 * Chunk (64 bytes = one cache line, 64-byte aligned):
 *
 *   byte 0                 14     15         16                          58           64
 *   +----------------------+------+----------+---------------------------+------------+
 *   | tags[0..13] 1 B each | lock | overflow | id_lo[0..13]: 3 B each LE | id_hi bits |
 *   +----------------------+------+----------+---------------------------+------------+
 *   id_hi: slot j's bits 24..26 are bits 16+3j .. 18+3j of the little-endian u64 at byte 56
 *   (its low 16 bits are slot 13's id_lo bytes 1..2). A slot holds a 27-bit record id.
 *
 *   tag 0 = empty slot; 0x01 = claimed by an inserter that is still writing; 0x80 | (hash >> 56)
 *   = occupied.
 *
 * A record is a 16-byte header {u64 key, u64 word} (rs_kv_rec). With fixed rows the records are
 * the row headers of the value store, so record id = row id. Rows of >= 64 value bytes keep their
 * records in a separate compact array (kv_value_store.c), so a 512-byte row is exactly 8 aligned
 * cache lines, as in the no-index ceiling; a lookup is one chunk line, one record line (16 MiB of
 * records for 1M keys: often a cache hit) and the row lines:
 *
 *   records: | key | word | key | word | ...      rows (stride 512): | value bytes ... |
 *
 * With variable-length values PET keeps its own record store and the word points at a value
 * block. Record ids are 27 bits, so the capacity is at most 2^27 - 1 keys.
 *
 * Hash h = fmix64(key). Home chunk h & (chunks - 1); probe step (tag * 2) | 1 is odd, so the probe
 * sequence (double hashing) visits every chunk of the power-of-two table. `overflow` counts keys
 * that probed past this chunk (saturating at 255); a lookup stops at the first chunk with
 * overflow 0. Sizing: chunks = next_pow2(ceil(capacity / 0.9 / 14)), so a table holding
 * `capacity` keys is at most 90 % full; the engine enforces capacity before inserting.
 *
 * Concurrency: readers take no lock (the record word's seqlock, kv_internal.h, plus the key in
 * the same record). Writers lock the key's home chunk (`lock`) for the whole write, so two writers
 * of one key serialise and a key is never inserted twice; a slot is claimed with a CAS on its tag
 * (0 -> 0x01), the record and the slot's id are written, and the real tag is published last
 * (release). Other slots' id bits sharing the u64 at byte 56 change only through CAS.
 */
#include <emmintrin.h>
#include <stdlib.h>

#include "kv_internal.h"

#define PET_SLOTS        14
#define PET_TAG_RESERVED 0x01
#define PET_MAX_LOAD     0.9
#define PET_ID_BITS      27
#define PET_ID_MAX       ((1u << PET_ID_BITS) - 1)

typedef struct pet_chunk {
    uint8_t tags[PET_SLOTS];
    uint8_t lock;
    uint8_t overflow;
    uint8_t id[48]; /* id_lo[14][3] then the id_hi bits; see the picture above */
} __attribute__((aligned(64))) pet_chunk;

_Static_assert(sizeof(pet_chunk) == 64, "PET chunk must be one cache line");

typedef struct pet {
    rs_kv_region region; /* the chunk array */
    pet_chunk *chunks;
    uint64_t mask;
    uint64_t capacity;
    rs_kv_vs *recs;     /* where records live: the engine's rows, or own_recs */
    rs_kv_vs own_recs;  /* variable mode: records {key, word -> value block} */
    int own;
} pet;

static inline uint8_t pet_tag(uint64_t h) {
    return (uint8_t)((h >> 56) | 0x80);
}
static inline uint64_t pet_step(uint8_t tag) {
    return ((uint64_t)tag << 1) | 1;
}

/* Bit i set where tags[i] == tag (i < 14). */
static inline unsigned pet_match(const pet_chunk *c, uint8_t tag) {
    __m128i t = _mm_load_si128((const __m128i *)c->tags);
    __m128i m = _mm_cmpeq_epi8(t, _mm_set1_epi8((char)tag));
    return (unsigned)_mm_movemask_epi8(m) & 0x3fffu;
}

static inline uint64_t *pet_hi_word(const pet_chunk *c) {
    return (uint64_t *)((uint8_t *)c + 56);
}

static inline uint32_t pet_id(const pet_chunk *c, unsigned j) {
    /* byte-wise atomic loads: an inserter may be writing another slot's (or, briefly before its
     * tag is published, this slot's) bytes; a stale id only leads to a key mismatch */
    const uint8_t *b = c->id + 3 * j;
    uint32_t lo = (uint32_t)__atomic_load_n(&b[0], __ATOMIC_RELAXED) |
                  (uint32_t)__atomic_load_n(&b[1], __ATOMIC_RELAXED) << 8 |
                  (uint32_t)__atomic_load_n(&b[2], __ATOMIC_RELAXED) << 16;
    uint64_t hi = __atomic_load_n(pet_hi_word(c), __ATOMIC_RELAXED);
    return lo | (uint32_t)((hi >> (16 + 3 * j)) & 7u) << 24;
}

static void pet_set_id(pet_chunk *c, unsigned j, uint32_t id) {
    for (int b = 0; b < 3; b++)
        __atomic_store_n(&c->id[3 * j + (unsigned)b], (uint8_t)(id >> (8 * b)), __ATOMIC_RELAXED);
    uint64_t *hw = pet_hi_word(c);
    uint64_t old = __atomic_load_n(hw, __ATOMIC_RELAXED), nw;
    do {
        nw = (old & ~(7ull << (16 + 3 * j))) | ((uint64_t)(id >> 24) << (16 + 3 * j));
    } while (!__atomic_compare_exchange_n(hw, &old, nw, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

int rs_kv_pet_open(uint64_t capacity, rs_kv_vs *rows, void **out, rs_error *err) {
    int rc;
    if (capacity > PET_ID_MAX)
        return rs_error_set(err, RS_EINVAL,
                            "capacity %llu is too large for DRAM_PET_HASH (27-bit record ids: at "
                            "most %u keys)",
                            (unsigned long long)capacity, PET_ID_MAX);
    pet *p = calloc(1, sizeof *p);
    if (!p) return rs_error_set(err, RS_ENOMEM, "DRAM_PET_HASH handle");
    uint64_t need = (uint64_t)((double)capacity / PET_MAX_LOAD / PET_SLOTS) + 1;
    uint64_t chunks = 1;
    while (chunks < need)
        chunks <<= 1;
    size_t bytes = (size_t)chunks * sizeof(pet_chunk);
    rc = rs_kv_region_open_anon(&p->region, bytes, bytes, err);
    if (rc) {
        rs_error_prefix(err, "DRAM_PET_HASH with capacity %llu: ", (unsigned long long)capacity);
        goto fail_free;
    }
    p->chunks = (pet_chunk *)p->region.base;
    p->mask = chunks - 1;
    p->capacity = capacity;
    if (rows) {
        p->recs = rows;
    } else {
        rc = rs_kv_vs_open(&p->own_recs, 0, 1, capacity, NULL, err);
        if (rc) goto fail_region;
        p->own = 1;
        p->recs = &p->own_recs;
    }
    *out = p;
    return 0;
fail_region:
    rs_kv_region_close(&p->region);
fail_free:
    free(p);
    return rc;
}

static void pet_close(void *ix) {
    pet *p = ix;
    if (p->own) rs_kv_vs_close(&p->own_recs);
    rs_kv_region_close(&p->region);
    free(p);
}

static int pet_clear(void *ix, rs_error *err) {
    pet *p = ix;
    memset(p->chunks, 0, (p->mask + 1) * sizeof(pet_chunk));
    if (p->own) rs_kv_vs_reset(&p->own_recs);
    return 0;
}

/* Slot position for remove(): probe distance << 4 | slot. */
#define PET_POS(i, j) ((uint32_t)((i) << 4 | (j)))

/* Look for key starting at its home chunk; on a hit fill s (ver = position). */
static int pet_find(void *ix, uint64_t key, rs_kv_slot *s) {
    pet *p = ix;
    uint64_t h = rs_kv_hash(key);
    uint8_t tag = pet_tag(h);
    uint64_t c = h & p->mask, step = pet_step(tag);
    for (uint64_t i = 0; i <= p->mask; i++) {
        pet_chunk *ch = &p->chunks[c];
        unsigned m = pet_match(ch, tag);
        while (m) {
            unsigned j = (unsigned)__builtin_ctz(m);
            rs_kv_rec *rec = rs_kv_vs_rec(p->recs, pet_id(ch, j));
            if (__atomic_load_n(&rec->key, __ATOMIC_ACQUIRE) == key) {
                s->word = &rec->word;
                s->keyp = &rec->key;
                s->guard = ch;
                s->ver = PET_POS(i, j);
                return 1;
            }
            m &= m - 1;
        }
        if (__atomic_load_n(&ch->overflow, __ATOMIC_ACQUIRE) == 0) return 0;
        c = (c + step) & p->mask;
    }
    return 0;
}

static int pet_validate(void *ix, const rs_kv_slot *s) {
    return 1; /* records never move while linked; the word and key checks are enough */
}

static void pet_lock(pet_chunk *ch) {
    for (;;) {
        uint8_t z = 0;
        if (__atomic_compare_exchange_n(&ch->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (__atomic_load_n(&ch->lock, __ATOMIC_RELAXED))
            rs_kv_cpu_relax();
    }
}

static void pet_unlock(pet_chunk *ch) {
    __atomic_store_n(&ch->lock, 0, __ATOMIC_RELEASE);
}

static void overflow_inc(pet_chunk *ch) {
    uint8_t o = __atomic_load_n(&ch->overflow, __ATOMIC_RELAXED);
    while (o < 255 && !__atomic_compare_exchange_n(&ch->overflow, &o, (uint8_t)(o + 1), 0,
                                                   __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

static void overflow_dec(pet_chunk *ch) {
    uint8_t o = __atomic_load_n(&ch->overflow, __ATOMIC_RELAXED);
    while (o > 0 && o < 255 && !__atomic_compare_exchange_n(&ch->overflow, &o, (uint8_t)(o - 1), 0,
                                                            __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

static int pet_acquire(void *ix, uint64_t key, int create, uint64_t new_word, rs_kv_slot *s,
                       int *created, rs_error *err) {
    pet *p = ix;
    int rc;
    uint64_t h = rs_kv_hash(key);
    uint8_t tag = pet_tag(h);
    uint64_t home = h & p->mask, step = pet_step(tag);
    pet_chunk *hc = &p->chunks[home];
    pet_lock(hc);
    if (pet_find(ix, key, s)) {
        s->guard = hc;
        return 0;
    }
    if (!create) {
        pet_unlock(hc);
        return RS_ENOTFOUND;
    }
    /* the record: the new row's header, or a record of our own pointing at the value block */
    uint64_t rid;
    if (p->own) {
        uint64_t rw;
        if ((rc = rs_kv_vs_alloc(&p->own_recs, 0, &rw, err))) goto fail_unlock;
        rid = rs_kv_word_handle(rw);
    } else {
        rid = rs_kv_word_handle(new_word);
    }
    rs_kv_rec *rec = rs_kv_vs_rec(p->recs, rid);
    __atomic_store_n(&rec->word, new_word, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->key, key, __ATOMIC_RELEASE);
    uint64_t c = home;
    for (uint64_t i = 0; i <= p->mask; i++) {
        pet_chunk *ch = &p->chunks[c];
        unsigned free_slots = pet_match(ch, 0);
        while (free_slots) {
            unsigned j = (unsigned)__builtin_ctz(free_slots);
            uint8_t z = 0;
            if (__atomic_compare_exchange_n(&ch->tags[j], &z, PET_TAG_RESERVED, 0,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                pet_set_id(ch, j, (uint32_t)rid);
                __atomic_store_n(&ch->tags[j], tag, __ATOMIC_RELEASE);
                s->word = &rec->word;
                s->keyp = &rec->key;
                s->guard = hc;
                s->ver = PET_POS(i, j);
                *created = 1;
                return 0;
            }
            free_slots &= free_slots - 1;
        }
        overflow_inc(ch);
        c = (c + step) & p->mask;
    }
    /* every chunk full: undo the overflow marks (cannot happen below the 90 % load bound) */
    c = home;
    for (uint64_t i = 0; i <= p->mask; i++, c = (c + step) & p->mask)
        overflow_dec(&p->chunks[c]);
    if (p->own) rs_kv_vs_free(&p->own_recs, rs_kv_word(rid, 1));
    rc = rs_error_set(err, RS_EFULL, "DRAM_PET_HASH is full: %llu slots, capacity %llu keys",
                      (unsigned long long)((p->mask + 1) * PET_SLOTS),
                      (unsigned long long)p->capacity);
fail_unlock:
    pet_unlock(hc);
    return rc;
}

static void pet_release(void *ix, rs_kv_slot *s) {
    pet_unlock((pet_chunk *)s->guard);
}

static void pet_remove(void *ix, rs_kv_slot *s) {
    pet *p = ix;
    uint64_t key = *s->keyp;
    uint64_t h = rs_kv_hash(key);
    uint8_t tag = pet_tag(h);
    uint64_t c = h & p->mask, step = pet_step(tag);
    uint32_t dist = s->ver >> 4, j = s->ver & 15u;
    for (uint32_t i = 0; i < dist; i++, c = (c + step) & p->mask)
        overflow_dec(&p->chunks[c]);
    __atomic_store_n(&p->chunks[c].tags[j], 0, __ATOMIC_RELEASE);
    if (p->own) /* the engine frees the value block; the record is ours */
        rs_kv_vs_free(&p->own_recs,
                      rs_kv_word((uint64_t)((const uint8_t *)s->keyp - p->own_recs.data) /
                                     p->own_recs.stride,
                                 1));
}

static uint64_t pet_count(void *ix) {
    pet *p = ix;
    uint64_t n = 0;
    for (uint64_t c = 0; c <= p->mask; c++)
        for (int j = 0; j < PET_SLOTS; j++)
            n += (p->chunks[c].tags[j] & 0x80) != 0;
    return n;
}

/*
 * Batch read: a continuous software pipeline over the keys, with the chunk step done in blocks.
 *   stage   (2 blocks ahead)  hash, prefetch the home chunk line
 *   resolve (1 block ahead)   SSE2 tag match and record id for a whole block of PET_R keys, and
 *                             prefetch the record of the first tag match: the chunk loads are
 *                             independent, so lines a prefetch did not bring in time are waited
 *                             for together rather than one by one
 *   row     (PET_C keys ahead) prefetch the row of the first tag match (its address is the
 *                             record id times the stride, no dependent load)
 *   copy                       check the record's key, copy the row, check word and key again
 * (Measured on AMD EPYC: software prefetches of chunk lines issued while row prefetches fill the
 * miss buffers often arrive late, and a per-key tag match then stalls the whole pipeline.)
 * Anything unusual (no match but an overflowed chunk, a tag hit on another key, a writer in the
 * way) falls back to the slow single-key path for that key only.
 */
#ifndef PET_R
#define PET_R 32
#endif
#ifndef PET_C
#define PET_C 8
#endif
#ifndef PET_CHUNK_LOCALITY
#define PET_CHUNK_LOCALITY 2
#endif
#ifndef PET_REC_LOCALITY
#define PET_REC_LOCALITY 2
#endif
#define PET_RING (4 * PET_R) /* power of two: stage runs 2 blocks ahead of the copy */

enum { ST_MISS = 0, ST_ROW = 1, ST_SLOW = 2 };

typedef struct pet_pipe {
    const pet_chunk *ch;
    rs_kv_rec *rec; /* record of the first tag match */
    uint32_t id;    /* its record (= row) id */
    uint16_t m;     /* all tag matches */
    uint8_t tag;
    uint8_t st;
} pet_pipe;

static inline void pet_stage(const pet *p, const uint64_t *keys, size_t from, size_t to,
                             pet_pipe *ring) {
    for (size_t k = from; k < to; k++) {
        pet_pipe *q = &ring[k % PET_RING];
        uint64_t h = rs_kv_hash(keys[k]);
        q->ch = &p->chunks[h & p->mask];
        q->tag = pet_tag(h);
        __builtin_prefetch(q->ch, 0, PET_CHUNK_LOCALITY);
    }
}

static inline void pet_resolve(const rs_kv_vs *vs, size_t from, size_t to, pet_pipe *ring) {
    for (size_t k = from; k < to; k++) {
        pet_pipe *q = &ring[k % PET_RING];
        unsigned m = pet_match(q->ch, q->tag);
        q->m = (uint16_t)m;
        if (m) {
            q->id = pet_id(q->ch, (unsigned)__builtin_ctz(m));
            q->rec = rs_kv_vs_rec(vs, q->id);
            __builtin_prefetch(q->rec, 0, PET_REC_LOCALITY);
            q->st = ST_ROW;
        } else {
            q->st = __atomic_load_n(&q->ch->overflow, __ATOMIC_RELAXED) ? ST_SLOW : ST_MISS;
        }
    }
}

static inline size_t min_sz(size_t a, size_t b) {
    return a < b ? a : b;
}

static void pet_batch_get_flat(void *ix, const rs_kv_vs *vs, const uint64_t *keys, size_t n,
                               uint8_t *out, uint8_t *found, size_t *n_found) {
    const pet *p = ix;
    const size_t vsz = vs->value_size;
    pet_pipe ring[PET_RING];
    size_t hits = 0;
    pet_stage(p, keys, 0, min_sz(n, 2 * PET_R), ring);
    pet_resolve(vs, 0, min_sz(n, PET_R), ring);
    for (size_t i = 0; i < n + PET_C; i++) {
        if (i % PET_R == 0 && i + PET_R < n) {
            pet_stage(p, keys, i + 2 * PET_R, min_sz(n, i + 3 * PET_R), ring);
            pet_resolve(vs, i + PET_R, min_sz(n, i + 2 * PET_R), ring);
        }
        if (i < n && ring[i % PET_RING].st == ST_ROW) {
            pet_pipe *q = &ring[i % PET_RING];
            rs_kv_prefetch_range(vs->data + (size_t)q->id * vs->stride, vs->hdr + vsz);
            if (q->m & (q->m - 1)) /* a second tag match: fetch its key too */
                __builtin_prefetch(
                    rs_kv_vs_rec(vs, pet_id(q->ch, (unsigned)__builtin_ctz(q->m & (q->m - 1)))), 0,
                    3);
        }
        if (i >= PET_C) {
            size_t k = i - PET_C;
            pet_pipe *q = &ring[k % PET_RING];
            uint8_t *dst = out + k * vsz;
            int hit;
            if (q->st == ST_ROW) {
                /* the first tag match is almost always the key; else try the other matches */
                rs_kv_rec *rec = q->rec;
                unsigned m = q->m;
                while (__atomic_load_n(&rec->key, __ATOMIC_RELAXED) != keys[k] && (m &= m - 1))
                    rec = rs_kv_vs_rec(vs, pet_id(q->ch, (unsigned)__builtin_ctz(m)));
                if (m) {
                    rs_kv_slot s = {&rec->word, &rec->key, NULL, 0};
                    uint64_t w1 = __atomic_load_n(&rec->word, __ATOMIC_ACQUIRE);
                    hit = rs_kv_copy_fixed(vs, keys[k], &s, w1, dst)
                              ? 1
                              : rs_kv_read_fixed_slow(&rs_kv_pet_ops, ix, vs, keys[k], dst);
                } else if (__atomic_load_n(&q->ch->overflow, __ATOMIC_RELAXED)) {
                    hit = rs_kv_read_fixed_slow(&rs_kv_pet_ops, ix, vs, keys[k], dst);
                } else {
                    memset(dst, 0, vsz);
                    hit = 0;
                }
            } else if (q->st == ST_MISS) {
                memset(dst, 0, vsz);
                hit = 0;
            } else {
                hit = rs_kv_read_fixed_slow(&rs_kv_pet_ops, ix, vs, keys[k], dst);
            }
            if (found) found[k] = (uint8_t)hit;
            hits += (size_t)hit;
        }
    }
    if (n_found) *n_found = hits;
}

const rs_kv_index_ops rs_kv_pet_ops = {
    .type = RS_KV_INDEX_PET_HASH,
    .find = pet_find,
    .validate = pet_validate,
    .acquire = pet_acquire,
    .release = pet_release,
    .remove = pet_remove,
    .batch_get_flat = pet_batch_get_flat,
    .count = pet_count,
    .clear = pet_clear,
    .sync = NULL,
    .close = pet_close,
};
