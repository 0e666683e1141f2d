/*
 * kv_pet_hash.c — DRAM_PET_HASH: an F14 / PetPS PetHash-style open-addressing index over
 * 64-byte-aligned chunks of 14 slots, with an 8-bit tag per slot matched 14 at a time with SSE2.
 *
 * Chunk (256 bytes = 4 cache lines, 64-byte aligned):
 *
 *   byte 0                     14     15         16                                 240    256
 *   +--------------------------+------+----------+----------------------------------+------+
 *   | tags[0..13] (1 B each)   | lock | overflow | entries[0..13]: {u64 key, u64 word} | pad |
 *   +--------------------------+------+----------+----------------------------------+------+
 *   line 0 = bytes 0..63: tags, lock, overflow and entries 0..2; line 1: entries 3..6;
 *   line 2: entries 7..10; line 3: entries 11..13 and 16 bytes of padding.
 *
 *   tag 0 = empty slot; 0x01 = claimed by an inserter that is still writing the entry;
 *   0x80 | (hash >> 56) = occupied. Inserts fill the lowest free slot, so most lookups need line 0
 *   plus at most one more line.
 *
 * Hash h = fmix64(key). Home chunk h & (chunks - 1); probe step (tag * 2) | 1 is odd, so the probe
 * sequence (double hashing) visits every chunk of the power-of-two table. `overflow` counts keys
 * that probed past this chunk (saturating at 255); a lookup stops at the first chunk with
 * overflow 0. Sizing: chunks = next_pow2(ceil(capacity / 0.9 / 14)), so a table holding
 * `capacity` keys is at most 90 % full; the engine enforces capacity before inserting.
 *
 * Concurrency: readers take no lock (the value word's seqlock, kv_internal.h, and a key re-check
 * make them safe). Writers lock the key's home chunk (the `lock` byte) for the whole write, so two
 * writers of one key serialise and a key is never inserted twice; a slot is claimed with a CAS on
 * its tag (0 -> 0x01), the key and word are written, and the real tag is published last
 * (release). Entries never move, so a slot found by a reader stays that key's slot until removed.
 */
#include <emmintrin.h>
#include <stdlib.h>

#include "kv_internal.h"

#define PET_SLOTS        14
#define PET_TAG_RESERVED 0x01
#define PET_MAX_LOAD     0.9

typedef struct pet_entry {
    uint64_t key;
    uint64_t word;
} pet_entry;

typedef struct pet_chunk {
    uint8_t tags[PET_SLOTS];
    uint8_t lock;
    uint8_t overflow;
    pet_entry e[PET_SLOTS];
    uint8_t pad[16];
} __attribute__((aligned(64))) pet_chunk;

_Static_assert(sizeof(pet_chunk) == 256, "PET chunk must be 4 cache lines");

typedef struct pet {
    rs_kv_region region; /* the chunk array */
    pet_chunk *chunks;
    uint64_t mask;
    uint64_t capacity;
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

int rs_kv_pet_open(uint64_t capacity, void **out, rs_error *err) {
    pet *p = calloc(1, sizeof *p);
    if (!p) return rs_error_set(err, RS_ENOMEM, "DRAM_PET_HASH handle");
    uint64_t need = (uint64_t)((double)capacity / PET_MAX_LOAD / PET_SLOTS) + 1;
    uint64_t chunks = 1;
    while (chunks < need)
        chunks <<= 1;
    size_t bytes = (size_t)chunks * sizeof(pet_chunk);
    int rc = rs_kv_region_open_anon(&p->region, bytes, bytes, err);
    if (rc) {
        free(p);
        return rs_error_prefix(err, "DRAM_PET_HASH with capacity %llu: ",
                               (unsigned long long)capacity);
    }
    p->chunks = (pet_chunk *)p->region.base;
    p->mask = chunks - 1;
    p->capacity = capacity;
    *out = p;
    return 0;
}

static void pet_close(void *ix) {
    pet *p = ix;
    rs_kv_region_close(&p->region);
    free(p);
}

static int pet_clear(void *ix, rs_error *err) {
    pet *p = ix;
    memset(p->chunks, 0, (p->mask + 1) * sizeof(pet_chunk));
    return 0;
}

/* Look for key starting at its home chunk; on a hit fill s (ver = probe distance). */
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
            if (__atomic_load_n(&ch->e[j].key, __ATOMIC_ACQUIRE) == key) {
                s->word = &ch->e[j].word;
                s->keyp = &ch->e[j].key;
                s->guard = ch;
                s->ver = (uint32_t)i;
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
    return 1; /* entries never move; the word and key checks are enough */
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
    uint64_t c = home;
    for (uint64_t i = 0; i <= p->mask; i++) {
        pet_chunk *ch = &p->chunks[c];
        unsigned free_slots = pet_match(ch, 0);
        while (free_slots) {
            unsigned j = (unsigned)__builtin_ctz(free_slots);
            uint8_t z = 0;
            if (__atomic_compare_exchange_n(&ch->tags[j], &z, PET_TAG_RESERVED, 0,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                __atomic_store_n(&ch->e[j].key, key, __ATOMIC_RELAXED);
                __atomic_store_n(&ch->e[j].word, new_word, __ATOMIC_RELAXED);
                __atomic_store_n(&ch->tags[j], tag, __ATOMIC_RELEASE);
                s->word = &ch->e[j].word;
                s->keyp = &ch->e[j].key;
                s->guard = hc;
                s->ver = (uint32_t)i;
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
    pet_unlock(hc);
    return rs_error_set(err, RS_EFULL, "DRAM_PET_HASH is full: %llu slots, capacity %llu keys",
                        (unsigned long long)((p->mask + 1) * PET_SLOTS),
                        (unsigned long long)p->capacity);
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
    for (uint32_t i = 0; i < s->ver; i++, c = (c + step) & p->mask)
        overflow_dec(&p->chunks[c]);
    pet_chunk *ch = &p->chunks[c];
    unsigned j = (unsigned)(((const pet_entry *)(const void *)s->keyp) - ch->e);
    __atomic_store_n(&ch->tags[j], 0, __ATOMIC_RELEASE);
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
 * Pipelined batch read. Each key passes four stages, PET_D keys apart, so the two dependent cache
 * misses of a key (its chunk, then its row) overlap with the work on other keys:
 *   S0 hash, prefetch the home chunk's first line
 *   S1 SSE2 tag match; prefetch the line of the first matching entry
 *   S2 check the key, load the word, prefetch the row
 *   S3 copy the row and check the word again (seqlock)
 * Anything unusual (tag hit on another key, a probe past the home chunk, a writer in the way)
 * falls back to the slow single-key path for that key only.
 */
#ifndef PET_D
#define PET_D 4
#endif
#define PET_RING 16 /* power of two > 3 * PET_D */

enum { ST_MISS = 0, ST_HIT = 1, ST_SLOW = 2 };

typedef struct pet_pipe {
    const pet_chunk *ch;
    const pet_entry *e;
    uint64_t w;
    unsigned match;
    uint8_t tag;
    uint8_t st;
} pet_pipe;

static void pet_batch_get_flat(void *ix, const rs_kv_vs *vs, const uint64_t *keys, size_t n,
                               uint8_t *out, uint8_t *found, size_t *n_found) {
    const pet *p = ix;
    const size_t vsz = vs->value_size;
    pet_pipe ring[PET_RING];
    size_t hits = 0;
    for (size_t i = 0; i < n + 3 * PET_D; i++) {
        if (i < n) { /* S0 */
            uint64_t h = rs_kv_hash(keys[i]);
            pet_pipe *q = &ring[i % PET_RING];
            q->ch = &p->chunks[h & p->mask];
            q->tag = pet_tag(h);
            __builtin_prefetch(q->ch, 0, 3);
        }
        if (i >= PET_D && i - PET_D < n) { /* S1 */
            pet_pipe *q = &ring[(i - PET_D) % PET_RING];
            unsigned m = pet_match(q->ch, q->tag);
            q->match = m;
            if (m) {
                q->e = &q->ch->e[__builtin_ctz(m)];
                __builtin_prefetch(q->e, 0, 3);
                q->st = ST_HIT;
            } else {
                q->st = __atomic_load_n(&q->ch->overflow, __ATOMIC_RELAXED) ? ST_SLOW : ST_MISS;
            }
        }
        if (i >= 2 * PET_D && i - 2 * PET_D < n) { /* S2 */
            size_t k = i - 2 * PET_D;
            pet_pipe *q = &ring[k % PET_RING];
            if (q->st == ST_HIT) {
                if (__atomic_load_n(&q->e->key, __ATOMIC_ACQUIRE) == keys[k]) {
                    q->w = __atomic_load_n(&q->e->word, __ATOMIC_ACQUIRE);
                    rs_kv_prefetch_range(rs_kv_vs_row(vs, q->w), vsz);
                } else {
                    q->st = ST_SLOW;
                }
            }
        }
        if (i >= 3 * PET_D) { /* S3 */
            size_t k = i - 3 * PET_D;
            pet_pipe *q = &ring[k % PET_RING];
            uint8_t *dst = out + k * vsz;
            int hit;
            if (q->st == ST_HIT) {
                rs_kv_slot s = {(uint64_t *)&q->e->word, &q->e->key, NULL, 0};
                hit = rs_kv_copy_fixed(vs, keys[k], &s, q->w, dst)
                          ? 1
                          : rs_kv_read_fixed_slow(&rs_kv_pet_ops, ix, vs, keys[k], dst);
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
