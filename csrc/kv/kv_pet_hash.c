/*
 * kv_pet_hash.c — DRAM_PET_HASH: a PetPS PetHash-style open-addressing index whose lookups read
 * one cache line per key: four {key, word} entries per 64-byte line, matched by comparing the
 * keys themselves.
 *
 * Line (64 bytes, 64-byte aligned):
 *
 *   byte 0                              32                                  64
 *   +-----------------------------------+-----------------------------------+
 *   | key[0..3]   (u64 each)            | word[0..3]  (u64 each)            |
 *   +-----------------------------------+-----------------------------------+
 *
 *   The word is the value word of kv_internal.h (row id or value block, and the seqlock), so a
 *   lookup touches one line and the row. A DRAM value store never hands out handle 0, so words
 *   of handle 0 are free for markers: a free slot's word is 0 (a zero page is an empty table,
 *   so a big table commits memory only as keys arrive), a slot claimed by an inserter that is
 *   still writing holds 1 (odd: readers never take it). A removed entry keeps its (stale) key
 *   with word 0, so lookups skip it.
 *
 * Beside the lines, a meta array of two bytes per line: the writers' lock and `overflow`, the
 * number of keys that probed past this line (saturating at 255). A reader touches it only for a
 * key missing from a full home line, to know whether to probe on.
 *
 * Why one line of four entries and not the 128-byte chunk of 7 entries behind a byte-tag header
 * (the layout until 2026-12-05): a batch lookup's cost is its random lines per key, and on the
 * Zen 3 VM the chunk's second line, though adjacent, cost 5 points of the no-index ceiling
 * (ceiling + 1 line 87 %, + 2 lines 82 %: bench_kv_indexes.py --line_bounds --paired,
 * docs/kv-engine.md). The saving shows only since batch reads stopped re-reading each entry
 * after its row's copy (the engine's write epoch, kv_internal.h): with that re-check both layouts
 * ran at 78-80 %; without it, this one at 86-88 % (1M keys, 500 x 512 B). The tags bought fewer
 * key compares, which are free next to the miss.
 *
 * Load: the fuller the table, the more keys live outside their home line, and each costs a
 * second line. Both layouts measured about 67 % of the ceiling at 88 % load, against 86-88 %
 * (lines) and 78-80 % (chunks) at half load. So the table is sized for at most 78.75 % load,
 * 7/8 of the chunks' 90 %: the same bytes per key as the chunks took (plus the 2-byte meta), and
 * at any key count a lower load than the chunks had.
 *
 * Hash h = fmix64(key). Home line h & (lines - 1); probe step ((h >> 56) << 1) | 1 is odd, so
 * the probe sequence (double hashing) visits every line of the power-of-two table. Sizing: lines
 * = next_pow2(ceil(capacity / 0.7875 / 4)), so a table holding `capacity` keys is at most
 * 78.75 % full; the engine enforces capacity before inserting.
 *
 * Concurrency: readers take no lock (the entry word's seqlock, kv_internal.h, plus the key in the
 * same entry). Writers lock the key's home line (meta lock) for the whole write, so two writers
 * of one key serialise and a key is never inserted twice; a slot is claimed with a CAS on its
 * word (0 -> 1), the key is written and then the entry's real word (release), so a reader that
 * sees the word sees the key. Entries never move, so validate() has nothing to check.
 */
#include <stdlib.h>

#include "kv_internal.h"

#define PET_SLOTS        4
#define PET_WORD_FREE    0ull   /* handle 0 (never a row in a DRAM store), even */
#define PET_WORD_CLAIMED 1ull   /* handle 0, odd */
#define PET_MAX_LOAD     0.7875 /* 0.9 * 7 / 8: see "Load" above */

_Static_assert(PET_SLOTS * 16 == RS_KV_PET_LINE_BYTES, "a PET line is one cache line");

typedef struct pet_line {
    uint64_t key[PET_SLOTS];
    uint64_t word[PET_SLOTS];
} __attribute__((aligned(64))) pet_line;

typedef struct pet_meta {
    uint8_t lock;
    uint8_t overflow;
} pet_meta;

typedef struct pet {
    rs_kv_region region; /* the lines, then the meta array */
    pet_line *lines;
    pet_meta *meta;
    uint64_t mask;
    uint64_t capacity;
} pet;

static inline uint64_t pet_step(uint64_t h) {
    return ((h >> 56) << 1) | 1;
}

/* A stored entry: neither free nor claimed by an inserter still writing. */
static inline int pet_word_live(uint64_t w) {
    return w > PET_WORD_CLAIMED;
}

/* Bit j set where key[j] == key: four compares, no branch. The entries are checked again under
 * the seqlock before they are used. */
static inline unsigned pet_match(const pet_line *l, uint64_t key) {
    return (unsigned)(__atomic_load_n(&l->key[0], __ATOMIC_RELAXED) == key) |
           (unsigned)(__atomic_load_n(&l->key[1], __ATOMIC_RELAXED) == key) << 1 |
           (unsigned)(__atomic_load_n(&l->key[2], __ATOMIC_RELAXED) == key) << 2 |
           (unsigned)(__atomic_load_n(&l->key[3], __ATOMIC_RELAXED) == key) << 3;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&                            \
    !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define PET_VECTOR_MATCH 1
/* pet_match with one 32-byte compare, for the AVX2 and AVX-512 builds of the batch lookup. An
 * aligned vector load reads each 8-byte key whole, as the scalar loads do; what a match finds is
 * proven after the copy (pet_match_hit). ThreadSanitizer builds keep the scalar atomic loads it
 * can see. (A 64-byte compare of the whole line with the key broadcast from its register, in an
 * AVX-512 build, measured no better on Zen 4: 83.3-84.0 % against 84.4-86.1 %.) */
RS_KV_AVX2 static inline unsigned pet_match_avx2(const pet_line *l, uint64_t key) {
    __m256i e = _mm256_cmpeq_epi64(_mm256_load_si256((const __m256i *)l->key),
                                   _mm256_set1_epi64x((long long)key));
    return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(e));
}
#else
#define PET_VECTOR_MATCH 0
#define pet_match_avx2   pet_match
#endif

uint64_t rs_kv_pet_lines(uint64_t capacity) {
    uint64_t need = (uint64_t)((double)capacity / PET_MAX_LOAD / PET_SLOTS) + 1;
    uint64_t lines = 1;
    while (lines < need)
        lines <<= 1;
    return lines;
}

static size_t pet_bytes(uint64_t lines) {
    return (size_t)lines * (sizeof(pet_line) + sizeof(pet_meta));
}

static int pet_clear(void *ix, rs_error *err) {
    pet *p = ix;
    memset(p->lines, 0, pet_bytes(p->mask + 1)); /* free words, unlocked, no overflow */
    return 0;
}

int rs_kv_pet_open(uint64_t capacity, rs_kv_huge_pages huge, void **out, rs_error *err) {
    int rc;
    if (capacity > RS_KV_HANDLE_MAX)
        return rs_error_set(err, RS_EINVAL, "capacity %llu is too large for DRAM_PET_HASH",
                            (unsigned long long)capacity);
    pet *p = calloc(1, sizeof *p);
    if (!p) return rs_error_set(err, RS_ENOMEM, "DRAM_PET_HASH handle");
    uint64_t lines = rs_kv_pet_lines(capacity);
    size_t bytes = pet_bytes(lines);
    rc = rs_kv_region_open_anon(&p->region, bytes, bytes, huge, err);
    if (rc) {
        rs_error_prefix(err, "DRAM_PET_HASH with capacity %llu: ", (unsigned long long)capacity);
        free(p);
        return rc;
    }
    p->lines = (pet_line *)p->region.base;
    p->meta = (pet_meta *)(p->region.base + lines * sizeof(pet_line));
    p->mask = lines - 1;
    p->capacity = capacity;
    *out = p; /* a fresh mapping reads as zeros: every slot free */
    return 0;
}

static void pet_memory(void *ix, uint64_t *bytes, const char **pages) {
    const pet *p = ix;
    *bytes = pet_bytes(p->mask + 1);
    *pages = p->region.pages;
}

static void pet_close(void *ix) {
    pet *p = ix;
    rs_kv_region_close(&p->region);
    free(p);
}

/* Slot position for remove(): probe distance << 3 | slot. */
#define PET_POS(i, j) ((uint32_t)((i) << 3 | (j)))

static void pet_fill_slot(pet *p, pet_line *l, unsigned j, uint64_t pos, rs_kv_slot *s) {
    s->word = &l->word[j];
    s->keyp = &l->key[j];
    s->guard = &p->meta[l - p->lines];
    s->ver = (uint32_t)pos;
}

/* Look for key starting at its home line; on a hit fill s (ver = position; guard = the meta of
 * the line holding it, replaced by the home line's under acquire). */
static int pet_find(void *ix, uint64_t key, rs_kv_slot *s) {
    pet *p = ix;
    uint64_t h = rs_kv_hash(key);
    uint64_t c = h & p->mask, step = pet_step(h);
    for (uint64_t i = 0; i <= p->mask; i++) {
        pet_line *l = &p->lines[c];
        unsigned m = pet_match(l, key);
        while (m) {
            unsigned j = (unsigned)__builtin_ctz(m);
            if (__atomic_load_n(&l->key[j], __ATOMIC_ACQUIRE) == key &&
                pet_word_live(__atomic_load_n(&l->word[j], __ATOMIC_ACQUIRE))) {
                pet_fill_slot(p, l, j, PET_POS(i, j), s);
                return 1;
            }
            m &= m - 1;
        }
        if (__atomic_load_n(&p->meta[c].overflow, __ATOMIC_ACQUIRE) == 0) return 0;
        c = (c + step) & p->mask;
    }
    return 0;
}

/* key's home line and its meta, for writing. */
static void pet_prefetch(void *ix, uint64_t key) {
    const pet *p = ix;
    uint64_t c = rs_kv_hash(key) & p->mask;
    __builtin_prefetch(&p->lines[c], 1, 3);
    __builtin_prefetch(&p->meta[c], 1, 3);
}

static int pet_validate(void *ix, const rs_kv_slot *s) {
    return 1; /* entries never move; the word and key checks are enough */
}

static void pet_lock(pet_meta *m) {
    for (;;) {
        uint8_t z = 0;
        if (__atomic_compare_exchange_n(&m->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (__atomic_load_n(&m->lock, __ATOMIC_RELAXED))
            rs_kv_cpu_relax();
    }
}

static void pet_unlock(pet_meta *m) {
    __atomic_store_n(&m->lock, 0, __ATOMIC_RELEASE);
}

static void overflow_inc(pet_meta *m) {
    uint8_t o = __atomic_load_n(&m->overflow, __ATOMIC_RELAXED);
    while (o < 255 && !__atomic_compare_exchange_n(&m->overflow, &o, (uint8_t)(o + 1), 0,
                                                   __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

static void overflow_dec(pet_meta *m) {
    uint8_t o = __atomic_load_n(&m->overflow, __ATOMIC_RELAXED);
    while (o > 0 && o < 255 &&
           !__atomic_compare_exchange_n(&m->overflow, &o, (uint8_t)(o - 1), 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
    }
}

static int pet_acquire(void *ix, uint64_t key, int create, uint64_t new_word, rs_kv_slot *s,
                       int *created, rs_error *err) {
    pet *p = ix;
    uint64_t h = rs_kv_hash(key);
    uint64_t home = h & p->mask, step = pet_step(h);
    pet_meta *hm = &p->meta[home];
    pet_lock(hm);
    if (pet_find(ix, key, s)) {
        s->guard = hm;
        return 0;
    }
    if (!create) {
        pet_unlock(hm);
        return RS_ENOTFOUND;
    }
    uint64_t c = home;
    for (uint64_t i = 0; i <= p->mask; i++) {
        pet_line *l = &p->lines[c];
        for (unsigned j = 0; j < PET_SLOTS; j++) {
            uint64_t w = PET_WORD_FREE;
            if (!__atomic_compare_exchange_n(&l->word[j], &w, PET_WORD_CLAIMED, 0, __ATOMIC_ACQUIRE,
                                             __ATOMIC_RELAXED))
                continue;
            /* key before word: a reader that sees the new word also sees the new key */
            __atomic_store_n(&l->key[j], key, __ATOMIC_RELAXED);
            __atomic_store_n(&l->word[j], new_word, __ATOMIC_RELEASE);
            pet_fill_slot(p, l, j, PET_POS(i, j), s);
            s->guard = hm;
            *created = 1;
            return 0;
        }
        overflow_inc(&p->meta[c]);
        c = (c + step) & p->mask;
    }
    /* every line full: undo the overflow marks (cannot happen below the load bound) */
    c = home;
    for (uint64_t i = 0; i <= p->mask; i++, c = (c + step) & p->mask)
        overflow_dec(&p->meta[c]);
    pet_unlock(hm);
    return rs_error_set(err, RS_EFULL, "DRAM_PET_HASH is full: %llu slots, capacity %llu keys",
                        (unsigned long long)((p->mask + 1) * PET_SLOTS),
                        (unsigned long long)p->capacity);
}

static void pet_release(void *ix, rs_kv_slot *s) {
    pet_unlock((pet_meta *)s->guard);
}

/* The entry keeps its key; its word (made odd by the engine) becomes free. */
static void pet_remove(void *ix, rs_kv_slot *s) {
    pet *p = ix;
    uint64_t h = rs_kv_hash(*s->keyp);
    uint64_t c = h & p->mask, step = pet_step(h);
    uint32_t dist = s->ver >> 3;
    for (uint32_t i = 0; i < dist; i++, c = (c + step) & p->mask)
        overflow_dec(&p->meta[c]);
    __atomic_store_n((uint64_t *)s->word, PET_WORD_FREE, __ATOMIC_RELEASE);
}

static uint64_t pet_count(void *ix) {
    pet *p = ix;
    uint64_t n = 0;
    for (uint64_t c = 0; c <= p->mask; c++)
        for (int j = 0; j < PET_SLOTS; j++)
            n += pet_word_live(__atomic_load_n(&p->lines[c].word[j], __ATOMIC_RELAXED));
    return n;
}

/*
 * Batch read (the engine's loop, kv_engine.c), a segment of up to PET_SEG keys at a time, in
 * passes:
 *   lookup  prefetch key i's home line (the vector build hashes the keys 16 at a time, four
 *           per step, before a chunk's first prefetch), while matching key i - PET_LOOKUP_AHEAD
 *           (one compare of the line's four keys, load the word); a key not in its home line
 *           whose line overflowed is carried to the next line of its probe sequence (prefetched;
 *           matched in a short pass over the carried keys, up to PET_PROBE_PASSES lines on); a
 *           key carried further, or a word with a writer in it, goes to the slow single-key read
 *           (passes rather than one: 77.6 % of the paired ceiling against 76.2 %, medians of 5
 *           rounds, in a table 77 % full; docs/kv-engine.md)
 *   rows    rs_kv_rows (kv_rows.c): rows fetched 12 keys ahead of their copy; the copies
 *           proven by the write epoch, or re-checked key by key after a write
 * Measured on the AMD EPYC VMs: index prefetches issued among row prefetches often arrive late, so
 * a continuous per-key pipeline through the rows stalls on the match; the lookup of a whole
 * segment finishes before its first row is fetched (on Zen 4, 2026-12-06: the lookup fused into
 * the row pass 67-72 % of the paired ceiling, segments of 64-250 keys with the next one's lines
 * prefetched before each row pass 71-78 %, against 81 % then). Within the lookup, matching keys
 * behind the prefetches hides the match's work under the misses: on the Zen 3 VM a burst of all
 * prefetches and then all matches ran at 68-73 % of the paired ceiling, 16 / 32 / 48 / 64 keys
 * behind at 75-78 % (kv_bench --paired_ceiling, docs/kv-engine.md; 128-byte chunks then); on
 * Zen 4 with the vector match, 64 behind 84.1 % (median of 3 runs) against 80.7 % at 32.
 *
 * The lookup's work per key is what separates PET from the one-line bound (the ceiling that also
 * touches one random line per key): on Zen 4 the lookup took 2.5 times the bound's line pass
 * (about 14k against 5.5k cycles per 500 keys; the row pass as long as the ceiling's gather). So
 * the match is lean: the line's keys compared once (the scalar four compares with AVX2 are one
 * 32-byte compare), no key read again after the word (the write epoch or the re-check proves the
 * pair, below), the carried keys kept in a list rather than found by sweeping the segment.
 */
#ifndef PET_SEG
#define PET_SEG 512
#endif
_Static_assert(PET_SEG <= RS_KV_LOOKUP_MAX, "a PET segment must fit the engine's batch loop");
#ifndef PET_LOOKUP_AHEAD
#define PET_LOOKUP_AHEAD 64 /* keys between a line's prefetch and its match */
#endif

#ifndef PET_PROBE_PASSES
/* lines past the home line a batch lookup follows before the slow path */
#define PET_PROBE_PASSES 4
#endif

/* lookup-only states next to RS_KV_HIT_*: try the next line; the same, with the home line's
 * overflow count still to check */
#define PET_PROBE           3
#define PET_PROBE_UNCHECKED 4

/* Take the live entry among m, the slots of *lp whose key matched; returns the state (PET_PROBE:
 * *lp moved on to the next line). The key is not read again after the word: a word that is not
 * free was stored after its key, and the batch read proves the pair after the copy — by the write
 * epoch when no write ran, else by rs_kv_rows_recheck, which accepts the row only while the word
 * is still this one (a word never repeats, and a slot's key changes only after its word is
 * freed) and the key still this key. */
RS_KV_INLINE uint8_t pet_match_hit(const pet *p, const pet_line **lp, uint64_t key, unsigned m,
                                   rs_kv_hit *q) {
    const pet_line *l = *lp;
    while (m) {
        unsigned j = (unsigned)__builtin_ctz(m);
        uint64_t w = __atomic_load_n(&l->word[j], __ATOMIC_ACQUIRE);
        if (w != PET_WORD_FREE) {
            if (w & 1) return RS_KV_HIT_SLOW;
            q->word = &l->word[j];
            q->keyp = &l->key[j];
            q->w1 = w;
            return RS_KV_HIT_ROW;
        }
        m &= m - 1;
    }
    uint64_t c = (uint64_t)(l - p->lines);
    if (!__atomic_load_n(&p->meta[c].overflow, __ATOMIC_ACQUIRE)) return RS_KV_HIT_MISS;
    *lp = &p->lines[(c + pet_step(rs_kv_hash(key))) & p->mask];
    __builtin_prefetch(*lp, 0, RS_KV_CHUNK_LOCALITY);
    return PET_PROBE;
}

/* Every slot of l taken (by entries or inserters). */
RS_KV_INLINE int pet_line_full(const pet_line *l) {
    unsigned free_slots = 0;
    for (unsigned j = 0; j < PET_SLOTS; j++)
        free_slots += __atomic_load_n(&l->word[j], __ATOMIC_RELAXED) == PET_WORD_FREE;
    return free_slots == 0;
}

/* The first match of a batch key in its home line. A key missing from a full home line (a few
 * percent at the usual loads) is probed on without reading the line's overflow count, which
 * would be one more miss in the burst; the probe pass reads it (prefetched here). */
RS_KV_INLINE uint8_t pet_match_home(const int vec, const pet *p, const pet_line **lp, uint64_t key,
                                    rs_kv_hit *q) {
    const pet_line *l = *lp;
    unsigned m = vec ? pet_match_avx2(l, key) : pet_match(l, key);
    if (__builtin_expect(m == 0, 0) && pet_line_full(l)) {
        uint64_t c = (uint64_t)(l - p->lines);
        __builtin_prefetch(&p->meta[c], 0, RS_KV_CHUNK_LOCALITY);
        *lp = &p->lines[(c + pet_step(rs_kv_hash(key))) & p->mask];
        __builtin_prefetch(*lp, 0, RS_KV_CHUNK_LOCALITY);
        return PET_PROBE_UNCHECKED;
    }
    return pet_match_hit(p, lp, key, m, q);
}

/* key's home line */
RS_KV_INLINE const pet_line *pet_home(const pet *p, uint64_t key) {
    return &p->lines[rs_kv_hash(key) & p->mask];
}

/* key's home line, fetched */
RS_KV_INLINE const pet_line *pet_home_fetch(const pet *p, uint64_t key) {
    const pet_line *l = pet_home(p, key);
    __builtin_prefetch(l, 0, RS_KV_CHUNK_LOCALITY);
    return l;
}

/* The vector build hashes its keys 16 at a time, four per step, before the first of the 16
 * prefetches (the home lines go to an array the prefetches and matches read): the scalar
 * hash (two 64-bit multiplies, three shift-xors) was 11 of the lookup's instructions per key and
 * these are about 6; on Zen 4 the lookup of 500 keys took 7.8k rdtsc cycles against 8.7k in quiet
 * runs, and PET rose from 82.5 to 85.9 % of the paired ceiling (docs/kv-engine.md). Chunks of 8 and
 * 16 keys measured alike, 32 no better; 16 was kept. */
#define PET_HASH_CHUNK 16

#if PET_VECTOR_MATCH
/* x * c (mod 2^64) in each 64-bit lane, from 32-bit multiplies (AVX2 has no 64-bit one) */
RS_KV_AVX2 static inline __m256i pet_mul64_avx2(__m256i x, uint64_t c) {
    const __m256i lo = _mm256_set1_epi64x((long long)(c & 0xffffffffu));
    const __m256i hi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross =
        _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), lo), _mm256_mul_epu32(x, hi));
    return _mm256_add_epi64(_mm256_mul_epu32(x, lo), _mm256_slli_epi64(cross, 32));
}

RS_KV_AVX2 static inline __m256i pet_shift_xor_avx2(__m256i x) {
    return _mm256_xor_si256(x, _mm256_srli_epi64(x, RS_KV_HASH_SHIFT));
}

/* l[i] = pet_home(p, kk[i]) for i in [from, to): rs_kv_hash in four lanes, the rest one by one. */
RS_KV_AVX2 static inline void pet_home_lines_avx2(const pet *p, const uint64_t *kk, size_t from,
                                                  size_t to, const pet_line **l) {
    const __m256i mask = _mm256_set1_epi64x((long long)p->mask);
    const __m256i base = _mm256_set1_epi64x((long long)(uintptr_t)p->lines);
    size_t i = from;
    for (; i + 4 <= to; i += 4) {
        __m256i h = pet_shift_xor_avx2(_mm256_loadu_si256((const __m256i *)(kk + i)));
        h = pet_shift_xor_avx2(pet_mul64_avx2(h, RS_KV_HASH_MUL1));
        h = pet_shift_xor_avx2(pet_mul64_avx2(h, RS_KV_HASH_MUL2));
        /* &lines[h & mask]: a line is 64 bytes */
        h = _mm256_add_epi64(base, _mm256_slli_epi64(_mm256_and_si256(h, mask), 6));
        _mm256_storeu_si256((__m256i *)(l + i), h);
    }
    for (; i < to; i++)
        l[i] = pet_home(p, kk[i]);
}
_Static_assert(sizeof(pet_line) == 64, "pet_home_lines_avx2 scales line numbers by 64");
#else
#define pet_home_lines_avx2(p, kk, from, to, l) ((void)0)
#endif

RS_KV_INLINE void pet_lookup_body(const int vec, const pet *ix, const uint64_t *kk, size_t cnt,
                                  rs_kv_hit *q) {
    /* the fields the loop reads, in registers: stores through q may alias *ix */
    const pet view = {.lines = ix->lines, .meta = ix->meta, .mask = ix->mask}, *p = &view;
    const pet_line *l[PET_SEG];
    uint16_t carried[PET_SEG]; /* keys still to match in a later line of their probe sequence */
    size_t n_carried = 0;
    for (size_t i = 0; i < cnt + PET_LOOKUP_AHEAD; i++) {
        if (vec && i % PET_HASH_CHUNK == 0 && i < cnt)
            pet_home_lines_avx2(p, kk, i, i + PET_HASH_CHUNK < cnt ? i + PET_HASH_CHUNK : cnt, l);
        if (i < cnt) {
            if (vec)
                __builtin_prefetch(l[i], 0, RS_KV_CHUNK_LOCALITY);
            else
                l[i] = pet_home_fetch(p, kk[i]);
        }
        if (i < PET_LOOKUP_AHEAD) continue;
        size_t k = i - PET_LOOKUP_AHEAD;
        q[k].verp = NULL; /* entries never move */
        q[k].st = pet_match_home(vec, p, &l[k], kk[k], &q[k]);
        if (q[k].st >= PET_PROBE) carried[n_carried++] = (uint16_t)k;
    }
    /* probe passes: each matches every carried key in its next line (prefetched by the pass
     * before) */
    for (int pass = 0; n_carried && pass < PET_PROBE_PASSES; pass++) {
        size_t still = 0;
        for (size_t x = 0; x < n_carried; x++) {
            size_t k = carried[x];
            if (q[k].st == PET_PROBE_UNCHECKED &&
                !__atomic_load_n(&p->meta[rs_kv_hash(kk[k]) & p->mask].overflow,
                                 __ATOMIC_ACQUIRE)) {
                q[k].st = RS_KV_HIT_MISS;
                continue;
            }
            q[k].st = pet_match_hit(p, &l[k], kk[k], pet_match(l[k], kk[k]), &q[k]);
            if (q[k].st == PET_PROBE) carried[still++] = (uint16_t)k;
        }
        n_carried = still;
    }
    for (size_t x = 0; x < n_carried; x++) /* still carried: the slow single-key read */
        q[carried[x]].st = RS_KV_HIT_SLOW;
}

static void pet_lookup_plain(const pet *p, const uint64_t *kk, size_t cnt, rs_kv_hit *q) {
    pet_lookup_body(0, p, kk, cnt, q);
}

RS_KV_AVX2 static void pet_lookup_avx2(const pet *p, const uint64_t *kk, size_t cnt, rs_kv_hit *q) {
    pet_lookup_body(PET_VECTOR_MATCH, p, kk, cnt, q);
}

static void pet_batch_lookup(void *ix, const uint64_t *kk, size_t cnt, rs_kv_hit *q) {
    if (rs_kv_cpu_kernel() != RS_KV_KERNEL_PLAIN)
        pet_lookup_avx2(ix, kk, cnt, q);
    else
        pet_lookup_plain(ix, kk, cnt, q);
}

/* Entries never move, so the scan needs no lock; a slot reused while the scan reads it is caught
 * by the caller's key/word re-check. */
static int pet_scan(void *ix, int (*fn)(void *ctx, const rs_kv_slot *s), void *ctx) {
    pet *p = ix;
    for (uint64_t c = 0; c <= p->mask; c++) {
        pet_line *l = &p->lines[c];
        for (unsigned j = 0; j < PET_SLOTS; j++) {
            if (!pet_word_live(__atomic_load_n(&l->word[j], __ATOMIC_ACQUIRE))) continue;
            rs_kv_slot s = {
                .word = &l->word[j], .keyp = &l->key[j], .guard = NULL, .ver = PET_POS(0, j)};
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
