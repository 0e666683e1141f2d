/*
 * kv_pet_hash.c — DRAM_PET_HASH: an F14 / PetPS PetHash-style open-addressing index over chunks
 * with a 16-byte header of 8-bit tags matched at once with SSE2, and the entries inline.
 *
 * Chunk (128 bytes = two adjacent cache lines, 128-byte aligned; both lines are fetched together):
 *
 *   byte 0          7      8          9      16                                              128
 *   +---------------+------+----------+------+------------------------------------------------+
 *   | tags[0..6]    | lock | overflow | pad  | entries[0..6]: {u64 key, u64 word} 16 B each   |
 *   +---------------+------+----------+------+------------------------------------------------+
 *
 *   tag 0 = empty slot; 0x01 = claimed by an inserter that is still writing; 0x80 | (hash >> 56)
 *   = occupied. The word is the value word of kv_internal.h (row id or value block, and the
 *   seqlock), so a lookup touches one chunk (two lines in the same DRAM page) and the row.
 *
 * Why 7 inline entries and not 14 slots of record ids in one line (the first design): with record
 * ids, a lookup read the chunk line and then a record line {key, word} at a random place before
 * the row, two dependent random DRAM accesses per key. Measured with bench_kv_indexes.py on the
 * 2-core EPYC VM (batch 500, 512-byte rows, 1M keys), that layout peaked at 65-75 % of the
 * no-index ceiling, the inline layout reaches about 81 % (fetching line 1 only when the key is
 * not in line 0 measured worse: 71 %).
 *
 * Hash h = fmix64(key). Home chunk h & (chunks - 1); probe step (tag * 2) | 1 is odd, so the probe
 * sequence (double hashing) visits every chunk of the power-of-two table. `overflow` counts keys
 * that probed past this chunk (saturating at 255); a lookup stops at the first chunk with
 * overflow 0. Sizing: chunks = next_pow2(ceil(capacity / 0.9 / 7)), so a table holding `capacity`
 * keys is at most 90 % full; the engine enforces capacity before inserting.
 *
 * Concurrency: readers take no lock (the entry word's seqlock, kv_internal.h, plus the key in the
 * same entry). Writers lock the key's home chunk (`lock`) for the whole write, so two writers of
 * one key serialise and a key is never inserted twice; a slot is claimed with a CAS on its tag
 * (0 -> 0x01), the entry's key and then its word are written, and the real tag is published last
 * (release). Entries never move, so validate() has nothing to check.
 */
#include <emmintrin.h>
#include <stdlib.h>

#include "kv_internal.h"

#define PET_SLOTS        7
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
    uint8_t pad[7];
    pet_entry e[PET_SLOTS];
} __attribute__((aligned(128))) pet_chunk;

_Static_assert(sizeof(pet_chunk) == RS_KV_PET_CHUNK_BYTES, "PET chunk must be two cache lines");

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

/* Bit i set where tags[i] == tag (i < 7). The 16-byte load covers the header only. */
static inline unsigned pet_match(const pet_chunk *c, uint8_t tag) {
    __m128i t = _mm_load_si128((const __m128i *)c->tags);
    __m128i m = _mm_cmpeq_epi8(t, _mm_set1_epi8((char)tag));
    return (unsigned)_mm_movemask_epi8(m) & ((1u << PET_SLOTS) - 1);
}

uint64_t rs_kv_pet_chunks(uint64_t capacity) {
    uint64_t need = (uint64_t)((double)capacity / PET_MAX_LOAD / PET_SLOTS) + 1;
    uint64_t chunks = 1;
    while (chunks < need)
        chunks <<= 1;
    return chunks;
}

int rs_kv_pet_open(uint64_t capacity, rs_kv_huge_pages huge, void **out, rs_error *err) {
    int rc;
    if (capacity > RS_KV_HANDLE_MAX)
        return rs_error_set(err, RS_EINVAL, "capacity %llu is too large for DRAM_PET_HASH",
                            (unsigned long long)capacity);
    pet *p = calloc(1, sizeof *p);
    if (!p) return rs_error_set(err, RS_ENOMEM, "DRAM_PET_HASH handle");
    uint64_t chunks = rs_kv_pet_chunks(capacity);
    size_t bytes = (size_t)chunks * sizeof(pet_chunk);
    rc = rs_kv_region_open_anon(&p->region, bytes, bytes, huge, err);
    if (rc) {
        rs_error_prefix(err, "DRAM_PET_HASH with capacity %llu: ", (unsigned long long)capacity);
        free(p);
        return rc;
    }
    p->chunks = (pet_chunk *)p->region.base;
    p->mask = chunks - 1;
    p->capacity = capacity;
    *out = p;
    return 0;
}

static void pet_memory(void *ix, uint64_t *bytes, const char **pages) {
    const pet *p = ix;
    *bytes = (p->mask + 1) * sizeof(pet_chunk);
    *pages = p->region.pages;
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

/* Slot position for remove(): probe distance << 3 | slot. */
#define PET_POS(i, j) ((uint32_t)((i) << 3 | (j)))

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
            if (__atomic_load_n(&ch->e[j].key, __ATOMIC_ACQUIRE) == key) {
                s->word = &ch->e[j].word;
                s->keyp = &ch->e[j].key;
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

/* Both lines of key's home chunk, for writing (the lock byte and the entries). */
static void pet_prefetch(void *ix, uint64_t key) {
    const pet *p = ix;
    const pet_chunk *ch = &p->chunks[rs_kv_hash(key) & p->mask];
    __builtin_prefetch(ch, 1, 3);
    __builtin_prefetch((const char *)ch + 64, 1, 3);
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
    while (o > 0 && o < 255 &&
           !__atomic_compare_exchange_n(&ch->overflow, &o, (uint8_t)(o - 1), 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
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
            if (__atomic_compare_exchange_n(&ch->tags[j], &z, PET_TAG_RESERVED, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                /* key before word: a reader still holding this entry from its previous owner
                 * either sees the old (odd) word or, with the new word, the new key */
                __atomic_store_n(&ch->e[j].key, key, __ATOMIC_RELAXED);
                __atomic_store_n(&ch->e[j].word, new_word, __ATOMIC_RELEASE);
                __atomic_store_n(&ch->tags[j], tag, __ATOMIC_RELEASE);
                s->word = &ch->e[j].word;
                s->keyp = &ch->e[j].key;
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
    pet_unlock(hc);
    return rs_error_set(err, RS_EFULL, "DRAM_PET_HASH is full: %llu slots, capacity %llu keys",
                        (unsigned long long)((p->mask + 1) * PET_SLOTS),
                        (unsigned long long)p->capacity);
}

static void pet_release(void *ix, rs_kv_slot *s) {
    pet_unlock((pet_chunk *)s->guard);
}

/* The entry keeps its key and its (odd, set by the engine) word; only the tag is cleared. */
static void pet_remove(void *ix, rs_kv_slot *s) {
    pet *p = ix;
    uint64_t key = *s->keyp;
    uint64_t h = rs_kv_hash(key);
    uint8_t tag = pet_tag(h);
    uint64_t c = h & p->mask, step = pet_step(tag);
    uint32_t dist = s->ver >> 3, j = s->ver & 7u;
    for (uint32_t i = 0; i < dist; i++, c = (c + step) & p->mask)
        overflow_dec(&p->chunks[c]);
    __atomic_store_n(&p->chunks[c].tags[j], 0, __ATOMIC_RELEASE);
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
 * Batch read (the engine's loop, kv_engine.c), a segment of up to PET_SEG keys at a time, in
 * passes:
 *   lookup  hash key i and prefetch both lines of its home chunk, while matching key
 *           i - PET_LOOKUP_AHEAD (SSE2 tag match, key compare, load the word); a key whose home
 *           chunk overflowed without a hit is carried to the next chunk of its probe sequence
 *           (prefetched; matched in one more short pass); a second overflow, or a word with a
 *           writer in it, goes to the slow single-key read
 *   rows    rs_kv_rows (kv_rows.c): rows fetched 12 keys ahead of their copy, word and key
 *           re-checked after it
 * Measured on the AMD EPYC VMs: chunk prefetches issued among row prefetches often arrive late, so
 * a continuous per-key pipeline through the rows stalls on the tag match; the lookup of a whole
 * segment finishes before its first row is fetched. Within the lookup, matching 32 keys behind
 * the prefetches hides the match's work under the chunk misses: on the Zen 3 VM a burst of all
 * prefetches and then all matches ran at 68-73 % of the paired ceiling, 16 / 32 / 48 / 64 keys
 * behind at 75-78 % (kv_bench --paired_ceiling, docs/kv-engine.md).
 */
#ifndef PET_SEG
#define PET_SEG 512
#endif
_Static_assert(PET_SEG <= RS_KV_LOOKUP_MAX, "a PET segment must fit the engine's batch loop");
#ifndef PET_LOOKUP_AHEAD
#define PET_LOOKUP_AHEAD 32 /* keys between a chunk's prefetch and its match */
#endif

#define PET_PROBE 3 /* lookup-only state next to RS_KV_HIT_*: try the next chunk */

RS_KV_INLINE void pet_prefetch_chunk(const pet_chunk *ch) {
    __builtin_prefetch(ch, 0, RS_KV_CHUNK_LOCALITY);
    __builtin_prefetch((const char *)ch + 64, 0, RS_KV_CHUNK_LOCALITY);
}

/* Match key in *chp; returns the state (PET_PROBE: *chp moved on to the next chunk). */
RS_KV_INLINE uint8_t pet_match_hit(const pet *p, const pet_chunk **chp, uint8_t tag, uint64_t key,
                                   rs_kv_hit *q) {
    const pet_chunk *ch = *chp;
    unsigned m = pet_match(ch, tag);
    while (m) {
        unsigned j = (unsigned)__builtin_ctz(m);
        const pet_entry *e = &ch->e[j];
        if (__atomic_load_n(&e->key, __ATOMIC_ACQUIRE) == key) {
            uint64_t w = __atomic_load_n(&e->word, __ATOMIC_ACQUIRE);
            if ((w & 1) || __atomic_load_n(&e->key, __ATOMIC_RELAXED) != key) return RS_KV_HIT_SLOW;
            q->word = &e->word;
            q->keyp = &e->key;
            q->w1 = w;
            return RS_KV_HIT_ROW;
        }
        m &= m - 1;
    }
    if (!__atomic_load_n(&ch->overflow, __ATOMIC_ACQUIRE)) return RS_KV_HIT_MISS;
    uint64_t c = (uint64_t)(ch - p->chunks);
    *chp = &p->chunks[(c + pet_step(tag)) & p->mask];
    pet_prefetch_chunk(*chp);
    return PET_PROBE;
}

static void pet_lookup_segment(const pet *p, const uint64_t *kk, size_t cnt, const pet_chunk **ch,
                               uint8_t *tag, rs_kv_hit *q) {
    size_t probes = 0;
    for (size_t i = 0; i < cnt + PET_LOOKUP_AHEAD; i++) {
        if (i < cnt) {
            uint64_t h = rs_kv_hash(kk[i]);
            ch[i] = &p->chunks[h & p->mask];
            tag[i] = pet_tag(h);
            pet_prefetch_chunk(ch[i]);
        }
        if (i < PET_LOOKUP_AHEAD) continue;
        size_t k = i - PET_LOOKUP_AHEAD;
        q[k].verp = NULL; /* entries never move */
        q[k].st = pet_match_hit(p, &ch[k], tag[k], kk[k], &q[k]);
        probes += q[k].st == PET_PROBE;
    }
    if (!probes) return;
    for (size_t k = 0; k < cnt; k++) {
        if (q[k].st != PET_PROBE) continue;
        uint8_t st = pet_match_hit(p, &ch[k], tag[k], kk[k], &q[k]);
        q[k].st = st == PET_PROBE ? RS_KV_HIT_SLOW : st;
    }
}

static void pet_batch_lookup(void *ix, const uint64_t *keys, size_t cnt, rs_kv_hit *q) {
    const pet_chunk *ch[PET_SEG];
    uint8_t tag[PET_SEG];
    pet_lookup_segment(ix, keys, cnt, ch, tag, q);
}

/* Entries never move, so the scan needs no lock; a slot reused while the scan reads it is caught
 * by the caller's key/word re-check. */
static int pet_scan(void *ix, int (*fn)(void *ctx, const rs_kv_slot *s), void *ctx) {
    pet *p = ix;
    for (uint64_t c = 0; c <= p->mask; c++) {
        pet_chunk *ch = &p->chunks[c];
        for (int j = 0; j < PET_SLOTS; j++) {
            if (!(__atomic_load_n(&ch->tags[j], __ATOMIC_ACQUIRE) & 0x80)) continue;
            rs_kv_slot s = {
                .word = &ch->e[j].word, .keyp = &ch->e[j].key, .guard = NULL, .ver = PET_POS(0, j)};
            int rc = fn(ctx, &s);
            if (rc) return rc;
        }
    }
    return 0;
}

const rs_kv_index_ops rs_kv_pet_ops = {
    .type = RS_KV_INDEX_PET_HASH,
    .find = pet_find,
    .validate = pet_validate,
    .acquire = pet_acquire,
    .release = pet_release,
    .remove = pet_remove,
    .batch_lookup = pet_batch_lookup,
    .lookup_max = PET_SEG,
    .prefetch = pet_prefetch,
    .memory = pet_memory,
    .count = pet_count,
    .clear = pet_clear,
    .scan = pet_scan,
    .sync = NULL,
    .close = pet_close,
};
