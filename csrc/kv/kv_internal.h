/*
 * kv_internal.h — what the KV engine's files share: the value word, the index operation table,
 * the value store and the engine struct. Private to csrc/kv (and the C tests).
 *
 * The value word. Every index entry holds one 8-byte word next to its key:
 *
 *     63                                24 23                      1   0
 *    +------------------------------------+-------------------------+---+
 *    | handle (40 bits): row id (fixed)   | sequence (24 bits) ...  | W |
 *    |  or 16-byte block number (variable)|                         |   |
 *    +------------------------------------+-------------------------+---+
 *
 * The word sits next to its key in the index entry (PET hash lines, extendible-hash buckets,
 * CCEH segments), and it is the row's seqlock. W (bit 0) set = a writer is changing the row. A
 * writer holds the index's lock for the key (acquire/release below), stores word+1 (odd), writes
 * the bytes, stores word+2 (even, release). A reader loads the word (acquire; retries while odd),
 * checks the entry's key, copies the bytes, and accepts them only if the word and key read again
 * are unchanged and the index says its structure did not move the entry meanwhile (validate). An
 * inserter writes a reused entry's key before its word, so a reader that sees the new word also
 * sees the new key. Freed rows remember their last sequence, and a reused row continues from it,
 * so a word never repeats for a row within 2^23 writes (no ABA between a reader's two loads).
 *
 * Entry moves (extendible-hash bucket splits, CCEH segment splits) happen only under the same lock
 * a writer holds, and bump a structural version that readers validate.
 */
#ifndef RS_KV_INTERNAL_H
#define RS_KV_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "recstore/cpu.h"
#include "recstore/error.h"
#include "recstore/kv.h"

#define RS_KV_SEQ_BITS   24
#define RS_KV_SEQ_MASK   ((1ull << RS_KV_SEQ_BITS) - 1)
#define RS_KV_HANDLE_MAX ((1ull << 40) - 2) /* handles are < this */
#define RS_KV_WORD_EMPTY UINT64_MAX         /* CCEH empty slot; never a stored word */

static inline uint64_t rs_kv_word(uint64_t handle, uint64_t seq) {
    return (handle << RS_KV_SEQ_BITS) | (seq & RS_KV_SEQ_MASK);
}
static inline uint64_t rs_kv_word_handle(uint64_t w) {
    return w >> RS_KV_SEQ_BITS;
}
static inline uint64_t rs_kv_word_seq(uint64_t w) {
    return w & RS_KV_SEQ_MASK;
}
/* The same handle with the sequence advanced by one (even -> odd -> even; wraps in 24 bits). */
static inline uint64_t rs_kv_word_next(uint64_t w) {
    return rs_kv_word(rs_kv_word_handle(w), rs_kv_word_seq(w) + 1);
}

/* Key hash shared by the indexes: murmur3's fmix64. Deliberately not rs_mix64, which shards keys
 * across PS servers: inside one shard rs_mix64's low bits are correlated with the shard id. */
#define RS_KV_HASH_MUL1  0xff51afd7ed558ccdull
#define RS_KV_HASH_MUL2  0xc4ceb9fe1a85ec53ull
#define RS_KV_HASH_SHIFT 33
static inline uint64_t rs_kv_hash(uint64_t k) {
    k ^= k >> RS_KV_HASH_SHIFT;
    k *= RS_KV_HASH_MUL1;
    k ^= k >> RS_KV_HASH_SHIFT;
    k *= RS_KV_HASH_MUL2;
    k ^= k >> RS_KV_HASH_SHIFT;
    return k;
}

static inline void rs_kv_cpu_relax(void) {
    rs_cpu_relax();
}

/* ---- memory regions: anonymous or file-backed mmap, reserved once, grown in place ---------- */

typedef struct rs_kv_region {
    uint8_t *base;     /* reserved mapping; never moves */
    size_t reserved;   /* bytes of address space reserved */
    size_t backed;     /* bytes usable now (file size / mprotect'ed length) */
    int fd;            /* -1 for anonymous */
    const char *pages; /* "hugetlb", "thp" (advised), "4k" or "file" */
    size_t grain;      /* growth granularity: 4 KiB, or 2 MiB for hugetlb */
} rs_kv_region;

/* Anonymous: reserve `reserve` bytes, make the first `initial` usable (zero-filled), on the pages
 * `huge` asks for (kv.h). */
int rs_kv_region_open_anon(rs_kv_region *r, size_t reserve, size_t initial, rs_kv_huge_pages huge,
                           rs_error *err);
/* File: open or create `path`; reserve `reserve` bytes of mapping; grow the file to at least
 * `initial`. *existed tells whether the file was there (with size > 0) before. */
int rs_kv_region_open_file(rs_kv_region *r, const char *path, size_t reserve, size_t initial,
                           int *existed, rs_error *err);
/* Make at least `need` bytes usable (caller serialises growth). RS_EFULL beyond the reservation. */
int rs_kv_region_grow(rs_kv_region *r, size_t need, rs_error *err);
/* Flush a file region to disk (msync). */
int rs_kv_region_sync(rs_kv_region *r, rs_error *err);
void rs_kv_region_close(rs_kv_region *r);
/* Share (0..1) of the region's backed bytes that sit on huge pages now: 1 for hugetlb, what
 * /proc/self/smaps counts as AnonHugePages for THP-advised memory (the kernel grants THP only
 * where it finds free 2 MiB pages, so "advised" can mean anything from 0 to 1), 0 for 4 KiB and
 * file regions; -1 if smaps cannot be read. */
double rs_kv_region_huge_share(const rs_kv_region *r);

/* ---- value store: fixed-size rows (slab) or size-classed blocks --------------------------- */

#define RS_KV_NCLASS 18 /* block sizes 16 B .. 2 MiB (16 << class) */

/* Persistent metadata at offset 0 of the value region (a file for CCEH). */
typedef struct rs_kv_vs_meta {
    uint64_t magic;
    uint32_t value_size;
    uint32_t stride;
    uint64_t capacity;
    uint64_t bump; /* fixed: rows ever handed out; variable: 16-byte units used */
    uint64_t free_head[RS_KV_NCLASS]; /* handle + 1 of the first free row/block; 0 = none */
} rs_kv_vs_meta;

#define RS_KV_VS_DATA_OFFSET 4096

typedef struct rs_kv_vs {
    rs_kv_region region;
    rs_kv_vs_meta *meta; /* = region.base */
    uint8_t *data;       /* = region.base + RS_KV_VS_DATA_OFFSET */
    uint32_t value_size; /* fixed: data bytes per row */
    uint32_t variable;   /* 1: size-classed blocks instead of rows */
    uint32_t stride;     /* fixed: bytes between rows */
    uint64_t capacity;
    uint64_t first;       /* the first handle handed out: 1 in DRAM, 0 in a file (below) */
    pthread_mutex_t lock; /* allocation and free lists */
} rs_kv_vs;

/* A DRAM value store never hands out handle 0 (one row, or 16 bytes, left unused), so no stored
 * word has handle 0 and an index may use such words as markers: DRAM_PET_HASH's empty slot is
 * word 0, which makes a zero page an empty table. File stores (CCEH) keep handle 0, as their
 * existing files have it; CCEH marks empty slots with RS_KV_WORD_EMPTY. */

/* Open a value store in DRAM (path NULL) or in the file `path`; an existing file is reopened
 * (its value_size must match). value_size 0 = variable-length blocks. Room for `capacity` rows
 * beyond the unused first handle. */
int rs_kv_vs_open(rs_kv_vs *vs, uint32_t value_size, uint64_t capacity, const char *path,
                  rs_kv_huge_pages huge, rs_error *err);
void rs_kv_vs_close(rs_kv_vs *vs);
int rs_kv_vs_sync(rs_kv_vs *vs, rs_error *err);
/* Forget every row (rs_kv_clear). */
void rs_kv_vs_reset(rs_kv_vs *vs);
/* Fixed rows: rebuild the free list as every row from `first` below bump that used[h] does not
 * mark (after a crash, when allocation state may be mid-update). used has bump entries. */
void rs_kv_vs_rebuild_free(rs_kv_vs *vs, const uint8_t *used);
/* Allocate a row (fixed) or a block for len bytes (variable); *word = handle with an even sequence
 * that continues from the row's previous life. */
int rs_kv_vs_alloc(rs_kv_vs *vs, size_t len, uint64_t *word, rs_error *err);
/* Give back the row/block of `word` (its sequence is remembered for the next owner). */
void rs_kv_vs_free(rs_kv_vs *vs, uint64_t word);

static inline uint8_t *rs_kv_vs_row(const rs_kv_vs *vs, uint64_t word) {
    return vs->data + rs_kv_word_handle(word) * vs->stride;
}

/* A word a reader may follow to its row or block: even (no writer in it) and of a handle the
 * store hands out. DRAM_PET_HASH marks a free or claimed slot with a word of handle 0, below a
 * DRAM store's first handle, and a removed entry keeps its key: a reader that found the key and
 * then read the word of an entry removed meanwhile must not take handle 0's unused row for it. */
static inline int rs_kv_word_readable(const rs_kv_vs *vs, uint64_t word) {
    return !(word & 1) && rs_kv_word_handle(word) >= vs->first;
}

/* Variable blocks: [u32 len][u32 gen][bytes...], block size 16 << class. */
typedef struct rs_kv_vblock {
    uint32_t len;
    uint32_t gen;
    uint64_t next_free; /* overlaps the first data bytes while free */
} rs_kv_vblock;
#define RS_KV_VBLOCK_HDR 8

static inline rs_kv_vblock *rs_kv_vs_block(const rs_kv_vs *vs, uint64_t word) {
    return (rs_kv_vblock *)(vs->data + rs_kv_word_handle(word) * 16);
}
/* Capacity in bytes of the block behind `word` (its class is stored in the gen high bits). */
size_t rs_kv_vs_block_room(const rs_kv_vs *vs, uint64_t word);

/* ---- index operation table ------------------------------------------------------------------ */

/* Where a key's entry is, as seen by one lookup. */
typedef struct rs_kv_slot {
    uint64_t *word;       /* the entry's value word */
    const uint64_t *keyp; /* the entry's key */
    void *guard;          /* bucket/segment whose version `ver` was observed (EH, CCEH) */
    uint32_t ver;
} rs_kv_slot;

typedef struct rs_kv_hit rs_kv_hit; /* one key's lookup in a batch read (below) */

/* The most keys any index's batch_lookup takes at once (rs_kv_index_ops.lookup_max <= this). */
#define RS_KV_LOOKUP_MAX 512

typedef struct rs_kv_index_ops {
    rs_kv_index_type type;
    /* Reader lookup without locks. Returns 1 and fills s if the key has an entry, 0 if not.
     * Either answer is trusted only if validate(s) holds afterwards. */
    int (*find)(void *ix, uint64_t key, rs_kv_slot *s);
    /* 1 if no structural change could have moved or hidden the entry since find. */
    int (*validate)(void *ix, const rs_kv_slot *s);
    /* Writer: lock the key's place in the index. If the key is present fill s and return 0. If
     * absent and create: insert it with `new_word` (already pointing at a written row), fill s and
     * set *created. Absent and !create: RS_ENOTFOUND (nothing held). RS_EFULL if there is no room.
     * On 0, the lock is held until release(s). */
    int (*acquire)(void *ix, uint64_t key, int create, uint64_t new_word, rs_kv_slot *s,
                   int *created, rs_error *err);
    void (*release)(void *ix, rs_kv_slot *s);
    /* Remove the acquired entry (lock still held; release follows). */
    void (*remove)(void *ix, rs_kv_slot *s);
    /* Optional pipelined lookup of cnt <= lookup_max keys without locks: q[0..cnt) as rs_kv_rows
     * takes them. The engine's batch read runs it a segment at a time and then rs_kv_rows;
     * rs_kv_batch_row_refs builds references from it. NULL: both loop over find. */
    void (*batch_lookup)(void *ix, const uint64_t *keys, size_t cnt, rs_kv_hit *q);
    uint32_t lookup_max; /* keys per batch_lookup call (a segment), <= RS_KV_LOOKUP_MAX */
    /* Optional: start fetching the index lines a write of key will touch (batch_put runs it a
     * few keys ahead, so a bulk load overlaps its misses). */
    void (*prefetch)(void *ix, uint64_t key);
    /* Bytes the index holds now and the pages behind them ("hugetlb", "thp", "4k", "file"). */
    void (*memory)(void *ix, uint64_t *bytes, const char **pages);
    /* Number of entries (used on reopen). */
    uint64_t (*count)(void *ix);
    int (*clear)(void *ix, rs_error *err);
    /* Checkpoint scan: call fn(ctx, s) for every entry occupied when the scan reaches it, with
     * s->word/keyp pointing at it and s->guard/ver as find would fill them (validate(s) says
     * whether the entry stayed in place). Entry moves (EH/CCEH splits) wait until the scan ends,
     * so an entry present throughout is visited exactly once. Stops at fn's first non-zero
     * return and passes it on. */
    int (*scan)(void *ix, int (*fn)(void *ctx, const rs_kv_slot *s), void *ctx);
    int (*sync)(void *ix, rs_error *err);
    void (*close)(void *ix);
} rs_kv_index_ops;

extern const rs_kv_index_ops rs_kv_pet_ops;
extern const rs_kv_index_ops rs_kv_eh_ops;
extern const rs_kv_index_ops rs_kv_cceh_ops;

int rs_kv_pet_open(uint64_t capacity, rs_kv_huge_pages huge, void **out, rs_error *err);
#define RS_KV_PET_LINE_BYTES 64
/* Number of RS_KV_PET_LINE_BYTES lines DRAM_PET_HASH allocates for `capacity` keys (a power of
 * two; beside them it keeps 2 bytes of writer state per line). */
uint64_t rs_kv_pet_lines(uint64_t capacity);
int rs_kv_eh_open(uint64_t capacity, rs_kv_huge_pages huge, void **out, rs_error *err);
/* dir: directory holding cceh.index; reopened if it exists. */
int rs_kv_cceh_open(const char *dir, uint64_t capacity, void **out, rs_error *err);
/* 1 if the CCEH files were not closed cleanly before this open (the engine then rebuilds the
 * value store's free list). */
int rs_kv_cceh_unclean(void *ix);
/* Full consistency check of a CCEH index against its value store; report (cap bytes) gets a
 * one-line summary. RS_EVERIFY naming the first problems. */
int rs_kv_cceh_verify(void *ix, const rs_kv_vs *vs, char *report, size_t cap, rs_error *err);

/* ---- moving whole rows ---------------------------------------------------------------------- */

#define RS_KV_INLINE static inline __attribute__((always_inline))

#ifndef RS_KV_ROW_LOCALITY
/* Rows are fetched with prefetcht1 (locality 2). Measured on the AMD EPYC (Zen 4) VM with
 * tools/benchmarks/bench_kv_indexes.py: prefetchnta (locality 0) and prefetcht0 (3) keep far
 * fewer misses in flight; the no-index ceiling was 16.9 M keys/s with nta against 26 M with t1. */
#define RS_KV_ROW_LOCALITY 2
#endif

#ifndef RS_KV_CHUNK_LOCALITY
/* PET's lines (and the ceiling's stand-in for them, kv_bench.c) are fetched with the same
 * prefetcht1. */
#define RS_KV_CHUNK_LOCALITY 2
#endif

/* Prefetch the `bytes` bytes at p (whole cache lines). */
RS_KV_INLINE void rs_kv_prefetch_range(const void *p, size_t bytes) {
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63);
    const char *end = (const char *)p + bytes;
    for (; c < end; c += 64)
        __builtin_prefetch(c, 0, RS_KV_ROW_LOCALITY);
}

/* Copy a row in 64-byte blocks the compiler turns into straight vector moves (one zmm per block
 * in an RS_KV_AVX512 function). With a constant `bytes` the loop unrolls; library memcpy of a
 * runtime size was measured 20 % slower in the gather loops. */
RS_KV_INLINE void rs_kv_row_copy(void *dst, const void *src, size_t bytes) {
    size_t o = 0;
    for (; o + 64 <= bytes; o += 64)
        __builtin_memcpy((char *)dst + o, (const char *)src + o, 64);
    if (o < bytes) memcpy((char *)dst + o, (const char *)src + o, bytes - o);
}

/* Row gather loops are compiled three times — plain (x86-64 baseline: 16-byte SSE2 moves), for
 * AVX2 (32-byte moves) and for AVX-512 (64-byte moves) — and picked at run time (kv_cpu.c):
 * rs_kv_cpu_kernel() is the best build the CPU runs, unless a test or benchmark forced one. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RS_KV_AVX512 __attribute__((target("avx512f")))
#define RS_KV_AVX2   __attribute__((target("avx2")))
#else
#define RS_KV_AVX512
#define RS_KV_AVX2
#endif
/* the rs_cpu_vec levels (cpu.h), by the names the row loops have always used */
enum {
    RS_KV_KERNEL_PLAIN = RS_CPU_VEC_BASE,
    RS_KV_KERNEL_AVX2 = RS_CPU_VEC_AVX2,
    RS_KV_KERNEL_AVX512 = RS_CPU_VEC_AVX512
};
int rs_kv_cpu_kernel(void);
/* 1 when the CPU can run kernel k. */
int rs_kv_cpu_supports(int k);

#define RS_KV_UNPAREN(...) __VA_ARGS__
/* Define `static size_t name params`, which runs body(vsz, args...) from its plain, AVX2 or
 * AVX-512 build (rs_kv_cpu_kernel), with vsz == 512 (the embedding row) a compile-time constant
 * so the row loop unrolls. body must be RS_KV_INLINE. */
#define RS_KV_ROW_LOOP(name, body, vsz, params, args)                                              \
    static size_t name##_plain params {                                                            \
        return (vsz) == 512 ? body(512, RS_KV_UNPAREN args) : body((vsz), RS_KV_UNPAREN args);     \
    }                                                                                              \
    RS_KV_AVX2 static size_t name##_avx2 params {                                                  \
        return (vsz) == 512 ? body(512, RS_KV_UNPAREN args) : body((vsz), RS_KV_UNPAREN args);     \
    }                                                                                              \
    RS_KV_AVX512 static size_t name##_avx512 params {                                              \
        return (vsz) == 512 ? body(512, RS_KV_UNPAREN args) : body((vsz), RS_KV_UNPAREN args);     \
    }                                                                                              \
    static size_t name params {                                                                    \
        switch (rs_kv_cpu_kernel()) {                                                              \
        case RS_KV_KERNEL_AVX512: return name##_avx512 args;                                       \
        case RS_KV_KERNEL_AVX2: return name##_avx2 args;                                           \
        default: return name##_plain args;                                                         \
        }                                                                                          \
    }

/* ---- reading one fixed row under the seqlock ------------------------------------------------ */

/* Copy the row of entry s into out if its word is stable across the copy. Returns 1 on success,
 * 0 if the caller must look the key up again (a writer interfered). */
static inline int rs_kv_copy_fixed(const rs_kv_vs *vs, uint64_t key, const rs_kv_slot *s,
                                   uint64_t w1, void *out) {
    if (!rs_kv_word_readable(vs, w1)) return 0;
    if (__atomic_load_n(s->keyp, __ATOMIC_ACQUIRE) != key) return 0;
    rs_kv_row_copy(out, rs_kv_vs_row(vs, w1), vs->value_size);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(s->word, __ATOMIC_RELAXED) == w1 &&
           __atomic_load_n(s->keyp, __ATOMIC_RELAXED) == key;
}

/* The slow, always-correct single-key read used when a pipelined read is disturbed. Returns 1 if
 * found (row copied), 0 if absent (row zeroed). */
int rs_kv_read_fixed_slow(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs, uint64_t key,
                          void *out);

/* ---- the row pass of a batch read ----------------------------------------------------------- */

/* A batch read looks a segment of keys up (the index's batch_lookup, its own passes), then hands
 * the results to rs_kv_rows, which fetches the rows RS_KV_ROWS_AHEAD keys ahead of copying them.
 * The copies are checked afterwards: by the engine's write epoch (below) when no write ran
 * meanwhile, else by rs_kv_rows_recheck, key by key (word, key and, for indexes whose entries
 * move, the bucket version). */
enum { RS_KV_HIT_MISS = 0, RS_KV_HIT_ROW = 1, RS_KV_HIT_SLOW = 2 };

struct rs_kv_hit {
    const uint64_t *word; /* ROW: the entry's value word and key */
    const uint64_t *keyp;
    uint64_t w1;          /* ROW: the word as read at lookup (even) */
    const uint32_t *verp; /* EH/CCEH: the bucket/segment version seen at lookup; NULL for PET */
    uint32_t ver;
    uint8_t st; /* RS_KV_HIT_*; a MISS with verp is trusted only if the version still holds */
};

/* The bucket/segment version a hit saw at lookup still holds (always, for PET). */
RS_KV_INLINE int rs_kv_hit_valid(const rs_kv_hit *q) {
    return !q->verp || __atomic_load_n(q->verp, __ATOMIC_RELAXED) == q->ver;
}

/* A ROW hit still holds (after an acquire fence): its word and key unchanged since the lookup, and
 * its bucket version too. */
RS_KV_INLINE int rs_kv_hit_holds(const rs_kv_hit *q, uint64_t key) {
    return __atomic_load_n(q->word, __ATOMIC_RELAXED) == q->w1 &&
           __atomic_load_n(q->keyp, __ATOMIC_RELAXED) == key && rs_kv_hit_valid(q);
}

#define RS_KV_ROWS_AHEAD 12

/* Copy the rows of hits q[0..cnt) into out, row k at out + k * out_stride (misses: zero rows; keys
 * the lookup left to the slow path: ops' slow read); fills found[0..cnt) if not NULL and returns
 * the number found. out_stride == value_size is the contiguous (flat) case. The copies are not
 * checked: the caller proves them with the write epoch or runs rs_kv_rows_recheck. */
size_t rs_kv_rows(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs, const uint64_t *kk,
                  size_t cnt, const rs_kv_hit *q, uint8_t *out, size_t out_stride, uint8_t *found);
/* After rs_kv_rows (which returned hits): accept a copied row only if its word and key, and its
 * bucket version, still hold (a word never repeats, so unchanged now means unchanged since the
 * lookup, copy included), a miss only if its version holds; read the others again with ops' slow
 * read. Returns the number found, corrected. */
size_t rs_kv_rows_recheck(const rs_kv_index_ops *ops, void *ix, const rs_kv_vs *vs,
                          const uint64_t *kk, size_t cnt, const rs_kv_hit *q, uint8_t *out,
                          size_t out_stride, uint8_t *found, size_t hits);

/* After an unclean close of a file-backed engine: rebuild the free list from the rows the index
 * references (kv_verify.c). */
int rs_kv_repair_rows(rs_kv *kv, rs_error *err);

/* mkdir -p `path` (kv_engine.c); errors name the path. */
int rs_kv_make_dir(const char *path, rs_error *err);

/* ---- the engine ----------------------------------------------------------------------------- */

typedef struct rs_kv_syncer rs_kv_syncer;

/*
 * The write epoch: what lets a batch read skip the per-key seqlock re-check.
 *
 * Every write of the engine (put, update, delete, clear; a checkpoint load writes through put)
 * runs between rs_kv_write_begin and rs_kv_write_end, which add one to a stripe's write count and
 * active count (begin) and take the active count back (end). A writing thread always uses the
 * same stripe, so writers on different threads rarely share a line. A batch read snapshots the
 * stripes before its lookups (rs_kv_epoch_snap) and compares them after its copies
 * (rs_kv_epoch_held): if no writer was active at the snapshot and no stripe changed, no write
 * overlapped the lookups or the copies, and every copy is whole without looking at its entry
 * again. Otherwise the read re-checks key by key (rs_kv_rows_recheck).
 *
 * Why it is correct: a writer issues a release fence after its begin and before it stores
 * anything; the reader an acquire fence after its copies and before it reads the stripes again.
 * If the reader saw any store of a write, the fences synchronise, so the reader's second read
 * of that writer's stripe sees the begin (or later): the stripe changed. A write that ended
 * before the snapshot was seen whole (the snapshot's acquire read sees the end's release or a
 * later value); one in flight at the snapshot shows as active. The 32-bit write count would have
 * to wrap within one segment's read for a change to go unseen.
 *
 * Why: the re-check reads each entry's word again after the row copy, a second random line per
 * key once the segment's index lines have left the cache; on the Zen 3 VM it cost DRAM_PET_HASH
 * 7 points of the no-index ceiling (docs/kv-engine.md).
 */
#define RS_KV_EPOCH_STRIPES 8
#define RS_KV_EPOCH_WRITE   ((1ull << 32) | 1) /* one more write, one more active writer */

typedef struct rs_kv_epoch_line {
    uint64_t v; /* write count << 32 | writers active */
    uint8_t pad[56];
} __attribute__((aligned(64))) rs_kv_epoch_line;

struct rs_kv {
    rs_kv_epoch_line epoch[RS_KV_EPOCH_STRIPES]; /* first: the struct is 64-byte aligned */
    rs_kv_index_type type;
    uint32_t value_size;
    uint64_t capacity;
    const rs_kv_index_ops *ops;
    void *ix;
    rs_kv_vs vs;
    uint64_t count; /* atomic: keys stored plus inserts in flight (reserved before insertion) */
    rs_kv_sync_mode sync;
    rs_kv_syncer *syncer; /* RS_KV_SYNC_INTERVAL's thread (kv_sync.c) */
};

/* The stripes before a batch read's lookups; 1 if no writer was active then. */
static inline int rs_kv_epoch_snap(const rs_kv *kv, uint64_t snap[RS_KV_EPOCH_STRIPES]) {
    uint64_t active = 0;
    for (int i = 0; i < RS_KV_EPOCH_STRIPES; i++) {
        snap[i] = __atomic_load_n(&kv->epoch[i].v, __ATOMIC_ACQUIRE);
        active |= snap[i] & 0xffffffffu;
    }
    return active == 0;
}

/* After the copies: 1 if no stripe moved since rs_kv_epoch_snap (which said quiet). */
static inline int rs_kv_epoch_held(const rs_kv *kv, const uint64_t snap[RS_KV_EPOCH_STRIPES]) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t diff = 0;
    for (int i = 0; i < RS_KV_EPOCH_STRIPES; i++)
        diff |= __atomic_load_n(&kv->epoch[i].v, __ATOMIC_RELAXED) ^ snap[i];
    return diff == 0;
}

/* Bracket every change to the index or to a row a reader may see (kv_engine.c). begin returns the
 * stripe end must be given. */
uint64_t *rs_kv_write_begin(rs_kv *kv);
static inline void rs_kv_write_end(uint64_t *stripe) {
    __atomic_fetch_sub(stripe, 1, __ATOMIC_RELEASE);
}

/* Rows of a CCEH engine are written copy-on-write: the value store holds this many rows beyond
 * the capacity for writes in flight. */
#define RS_KV_COW_SPARE_ROWS 4096

/* kv_sync.c: msync index and values now; start/stop the interval thread. */
int rs_kv_sync_now(rs_kv *kv, rs_error *err);
int rs_kv_syncer_start(rs_kv *kv, uint32_t interval_ms, rs_error *err);
void rs_kv_syncer_stop(rs_kv *kv);

#endif
