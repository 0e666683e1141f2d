/*
 * kv.h — the KV engine façade: an index (u64 key -> 64-bit value handle) plus a value store.
 *
 * This is the contract other subsystems (PS server, YCSB bindings, kv_bench) code against.
 *
 * Fixed-row mode (value_size > 0): every value is exactly value_size bytes (an embedding row of
 * value_size/4 float32). This is the hot path: batch_get_flat copies rows contiguously.
 * Variable mode (value_size == 0): values of any length up to RS_KV_MAX_VALUE bytes, kept in size
 * classes (YCSB compat mode). batch_* and update_add_f32 need fixed-row mode (RS_EINVAL otherwise).
 *
 * Concurrency: any number of threads may call any function concurrently on one rs_kv, except
 * rs_kv_close. A reader never observes a torn row: a row read concurrently with a write of the
 * same key returns either the old or the new bytes, whole.
 *
 * Errors: RS_EINVAL (bad argument; err names it), RS_ENOTFOUND (get/delete of a missing key),
 * RS_EFULL (capacity reached; err names the capacity and index type), RS_EIO (CCEH file errors),
 * RS_ENOMEM.
 */
#ifndef RECSTORE_KV_H
#define RECSTORE_KV_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_KV_MAX_VALUE (1u << 20)

typedef enum rs_kv_index_type {
    RS_KV_INDEX_PET_HASH = 1,        /* "DRAM_PET_HASH" */
    RS_KV_INDEX_EXTENDIBLE_HASH = 2, /* "DRAM_EXTENDIBLE_HASH" (alias "DRAM") */
    RS_KV_INDEX_CCEH = 3, /* "SSD_EXTENDIBLE_HASH" (aliases "SSD", "CCEH"): file-backed */
} rs_kv_index_type;

/* Parse an index type name (case-insensitive, aliases above). RS_EINVAL with the accepted names. */
int rs_kv_index_type_parse(const char *name, rs_kv_index_type *out, rs_error *err);

/* Canonical name ("DRAM_PET_HASH", ...). */
const char *rs_kv_index_type_name(rs_kv_index_type t);

/* Pages behind the DRAM regions (PET line array, value slab, kv_bench's ceiling array). */
typedef enum rs_kv_huge_pages {
    RS_KV_HUGE_AUTO = 0,     /* explicit 2 MiB pages when the hugetlb pool has room for the whole
                              * region, else transparent huge pages advised (MADV_HUGEPAGE) */
    RS_KV_HUGE_EXPLICIT = 1, /* explicit 2 MiB pages (MAP_HUGETLB) or RS_ENOMEM naming the pool */
    RS_KV_HUGE_THP = 2,      /* transparent huge pages advised (what the kernel grants varies) */
    RS_KV_HUGE_OFF = 3,      /* 4 KiB pages (MADV_NOHUGEPAGE) */
} rs_kv_huge_pages;

/* "auto" | "explicit" | "thp" | "off" (case-insensitive); RS_EINVAL names the accepted values. */
int rs_kv_huge_pages_parse(const char *name, rs_kv_huge_pages *out, rs_error *err);
const char *rs_kv_huge_pages_name(rs_kv_huge_pages m);

/* When a file-backed engine (CCEH) forces its files to disk (docs/durability.md). Every mode
 * survives the process being killed: the files are mapped, the kernel keeps what was written. */
typedef enum rs_kv_sync_mode {
    RS_KV_SYNC_NONE = 0,     /* default: the kernel writes back when it likes; msync at close */
    RS_KV_SYNC_INTERVAL = 1, /* a thread msyncs both files every sync_interval_ms */
    RS_KV_SYNC_ALWAYS = 2,   /* every put/batch_put/update/delete msyncs before it returns */
} rs_kv_sync_mode;

/* Parse "none" | "interval:MS" (MS >= 1) | "always". RS_EINVAL naming the value otherwise. */
int rs_kv_sync_parse(const char *s, rs_kv_sync_mode *mode, uint32_t *interval_ms, rs_error *err);

typedef struct rs_kv_config {
    rs_kv_index_type index_type;
    uint32_t value_size;       /* bytes per row; 0 = variable-length values */
    uint64_t capacity;         /* maximum number of keys (> 0) */
    const char *path;          /* directory for file-backed data (CCEH: required; DRAM: ignored) */
    rs_kv_sync_mode sync;      /* CCEH only (a DRAM index refuses anything but NONE) */
    uint32_t sync_interval_ms; /* RS_KV_SYNC_INTERVAL's period */
    rs_kv_huge_pages huge_pages; /* DRAM regions (0 = auto) */
} rs_kv_config;

/* Memory of an engine: what the index and the value slab take, and on which pages. */
typedef struct rs_kv_memory {
    uint64_t capacity;    /* keys */
    uint64_t index_bytes; /* index memory now (PET: the whole line array, reserved at
                           * open; EH: buckets and directory so far; CCEH: its file) */
    uint64_t slab_bytes;  /* value store bytes in use now (rows handed out x stride) */
    uint64_t slab_bytes_at_capacity;
    uint32_t row_bytes;      /* value_size (0: variable-length values) */
    uint32_t row_stride;     /* bytes a row takes in the slab */
    double bytes_per_key;    /* (index + slab at capacity) / capacity */
    double overhead_per_key; /* bytes_per_key - row_bytes */
    const char *index_pages; /* "hugetlb", "thp" (advised), "4k", "file" */
    const char *slab_pages;
} rs_kv_memory;

typedef struct rs_kv rs_kv;

/* Open an engine. For CCEH, an existing store under cfg->path is reopened with its data
 * (value_size must match what it was created with). */
int rs_kv_open(const rs_kv_config *cfg, rs_kv **out, rs_error *err);

/* Close and free; for CCEH, data is flushed to its file first. NULL is accepted. */
void rs_kv_close(rs_kv *kv);

/* Insert or overwrite one value (len == value_size in fixed-row mode). */
int rs_kv_put(rs_kv *kv, uint64_t key, const void *val, size_t len, rs_error *err);

/* Copy the value into buf (cap bytes) and store its length in *len. RS_ENOTFOUND if missing;
 * RS_EINVAL if cap is too small (*len still tells the needed size). */
int rs_kv_get(rs_kv *kv, uint64_t key, void *buf, size_t cap, size_t *len);

/* Remove a key. RS_ENOTFOUND if missing. */
int rs_kv_delete(rs_kv *kv, uint64_t key);

/* Insert or overwrite n fixed-size rows (rows = n * value_size bytes, contiguous). Stops at the
 * first failure (e.g. RS_EFULL) and reports how many were stored in *n_done (nullable). */
int rs_kv_batch_put(rs_kv *kv, const uint64_t *keys, size_t n, const void *rows, size_t *n_done,
                    rs_error *err);

/* Read n rows into out_rows (n * value_size bytes) in key order; a missing key reads as a zero
 * row. out_found[i] (nullable) is set to 1/0; *n_found (nullable) counts hits. */
int rs_kv_batch_get_flat(rs_kv *kv, const uint64_t *keys, size_t n, void *out_rows,
                         uint8_t *out_found, size_t *n_found);

/* The same read with row i at out_rows + i * out_stride (out_stride >= value_size; the bytes
 * between rows are left alone), for callers that interleave rows with their own headers: the
 * RecStore GET reply gathers rows straight into its row block items. RS_EINVAL for a smaller
 * stride. */
int rs_kv_batch_get_strided(rs_kv *kv, const uint64_t *keys, size_t n, void *out_rows,
                            size_t out_stride, uint8_t *out_found, size_t *n_found);

/* PS UPDATE: row[key] += deltas (element-wise float32); a missing key starts from a zero row
 * and is inserted. deltas = n * value_size bytes. Atomic per row with respect to other updates. */
int rs_kv_update_add_f32(rs_kv *kv, const uint64_t *keys, size_t n, const float *deltas,
                         rs_error *err);

/* Zero-copy row references (fixed-row mode), for readers that move rows themselves (the RC
 * transport's direct_sg GET writes them straight from the value store to the client): refs[i] is
 * the address of key i's row inside the value store, or NULL if the key is missing; *n_found
 * (nullable) counts hits. A reference stays valid until the key is overwritten, deleted or cleared;
 * unlike batch_get_flat, bytes read through it while another thread writes that key may be torn.
 * Works for every index type (CCEH's rows live in its mmap'ed values file, so they are
 * addressable too); RS_EINVAL in variable-length mode. */
int rs_kv_batch_row_refs(rs_kv *kv, const uint64_t *keys, size_t n, const void **refs,
                         size_t *n_found);

/* The value store's rows as one address range [*base, *base + *len) usable now (fixed-row mode):
 * the RC transport registers it for direct_sg where the device has no on-demand paging. The range
 * only grows (its start never moves); RS_EINVAL in variable-length mode. */
int rs_kv_value_region(rs_kv *kv, const void **base, size_t *len);

/* Number of keys stored. */
uint64_t rs_kv_count(rs_kv *kv);

/* Remove every key (PS COMMAND clear). Not concurrent-safe with other writers. */
int rs_kv_clear(rs_kv *kv);

/* Full consistency check (kv_verify.c): keys unique, words even and naming distinct rows, the
 * count, the free list and the row accounting (nothing leaked), and for CCEH the index structure
 * (segment ranges, directory, probe windows, no split left half done). Not concurrent-safe with
 * writers. 0 with a one-line summary in report (cap bytes), or RS_EVERIFY naming the first
 * problem. */
int rs_kv_verify(rs_kv *kv, char *report, size_t cap, rs_error *err);

/* Which build of the batch-read row loops runs in this process: "avx512" (the CPU has AVX-512F),
 * "avx2" (AVX2, no AVX-512: Zen 3, older Intel) or "plain" (SSE2). Benchmarks report it, since it
 * changes absolute rates (about 10 % on Zen 4). */
const char *rs_kv_row_kernel(void);
/* Run the row loops of this process from now on with "plain", "avx2", "avx512" or "auto" (the
 * best the CPU runs): benchmarks measure what a CPU without AVX-512 would run. RS_ENOTSUP when the
 * CPU lacks the instructions, RS_EINVAL for an unknown name. Process-wide; not for use while
 * other threads read. */
int rs_kv_row_kernel_select(const char *name, rs_error *err);

/* Index and slab bytes, bytes and overhead per key at capacity, and the pages behind them. */
void rs_kv_get_memory(const rs_kv *kv, rs_kv_memory *out);

/* Configuration accessors. */
uint32_t rs_kv_value_size(const rs_kv *kv);
uint64_t rs_kv_capacity(const rs_kv *kv);
rs_kv_index_type rs_kv_get_index_type(const rs_kv *kv);

#ifdef __cplusplus
}
#endif
#endif
