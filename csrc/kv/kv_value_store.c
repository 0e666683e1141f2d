/*
 * kv_value_store.c — where the KV engine keeps values: a slab of fixed-size rows (value_size > 0,
 * the embedding hot path) or size-classed blocks (value_size == 0, variable-length values).
 *
 * Region layout (DRAM, or the file <path>/cceh.values for CCEH, so values persist with the index):
 *
 *   0      rs_kv_vs_meta (magic, value_size, stride, capacity, bump, free-list heads) | pad to 4
 * KiB 4096   fixed:    row 0 | row 1 | ... each `stride` bytes (value_size rounded up to 8; the
 *                    index entries hold the keys and seqlock words, so a 512-byte row is exactly 8
 *                    cache lines, aligned like the no-index ceiling's)
 *          variable: blocks of 16 << class bytes: [u32 len][u32 gen | class << 24][bytes ...]
 *
 * Handles: a row id (fixed) or the block offset in 16-byte units (variable); a DRAM store starts
 * at handle 1, a file store at 0 (rs_kv_vs.first, kv_internal.h). A free row holds
 * {u64 next handle + 1, u32 last sequence}; a free block keeps its header and links through its
 * first data word. The sequence a row or block last had is kept when it is freed and the next
 * owner continues after it (see kv_internal.h: no word repeats for a row within 2^23 writes).
 *
 * The region grows in place (kv_region.c) under `lock`; all allocation and freeing take `lock`,
 * reads take nothing. A variable region always has RS_KV_MAX_VALUE bytes of slack past its last
 * block, so a racing reader that reads a stale length never reads outside the mapping.
 */
#include <errno.h>
#include <stdio.h>

#include "kv_internal.h"

#define RS_KV_VS_MAGIC  0x3130535653524b52ull /* "RKRSVS01" */
#define RS_KV_VS_GROWTH (64ull << 20)

static uint32_t fixed_stride(uint32_t value_size) {
    uint32_t s = (value_size + 7u) & ~7u;
    return s < 16 ? 16 : s;
}

static size_t vs_reserve(const rs_kv_vs *vs, uint64_t capacity) {
    if (!vs->variable) return RS_KV_VS_DATA_OFFSET + (size_t)(vs->first + capacity) * vs->stride;
    uint64_t r = capacity << 16;
    if (capacity > (1ull << 24) || r > (1ull << 40)) r = 1ull << 40;
    if (r < (1ull << 30)) r = 1ull << 30;
    return RS_KV_VS_DATA_OFFSET + r + RS_KV_MAX_VALUE + 64;
}

static void vs_meta_init(rs_kv_vs *vs) {
    memset(vs->meta, 0, sizeof *vs->meta);
    vs->meta->magic = RS_KV_VS_MAGIC;
    vs->meta->value_size = vs->value_size;
    vs->meta->stride = vs->stride;
    vs->meta->capacity = vs->capacity;
    vs->meta->bump = vs->first;
}

int rs_kv_vs_open(rs_kv_vs *vs, uint32_t value_size, uint64_t capacity, const char *path,
                  rs_kv_huge_pages huge, rs_error *err) {
    int rc, existed = 0;
    memset(vs, 0, sizeof *vs);
    vs->value_size = value_size;
    vs->variable = !value_size;
    vs->stride = vs->variable ? 16 : fixed_stride(value_size);
    vs->capacity = capacity;
    vs->first = path ? 0 : 1;
    vs->region.fd = -1;
    if (pthread_mutex_init(&vs->lock, NULL) != 0)
        return rs_error_set(err, RS_ENOMEM, "value store mutex");
    size_t initial = RS_KV_VS_DATA_OFFSET + (vs->variable ? RS_KV_MAX_VALUE + 64 : 0) +
                     (size_t)vs->first * vs->stride;
    if (path) {
        /* a reopened store keeps the larger of its old and the requested capacity */
        rc = rs_kv_region_open_file(&vs->region, path, vs_reserve(vs, capacity), initial, &existed,
                                    err);
        if (rc) goto fail_lock;
        rs_kv_vs_meta *m = (rs_kv_vs_meta *)vs->region.base;
        if (existed) {
            if (m->magic != RS_KV_VS_MAGIC) {
                rc = rs_error_set(err, RS_EPROTO, "%s is not a recbench value file", path);
                goto fail_region;
            }
            if (m->value_size != value_size || m->stride != vs->stride) {
                rc = rs_error_set(err, RS_EINVAL,
                                  "value_size %u does not match the store at %s (created with "
                                  "value_size %u)",
                                  value_size, path, m->value_size);
                goto fail_region;
            }
            if (m->capacity > capacity) {
                /* the mapping must cover every row ever handed out */
                rs_kv_region_close(&vs->region);
                rc = rs_kv_region_open_file(&vs->region, path, vs_reserve(vs, m->capacity), initial,
                                            &existed, err);
                if (rc) goto fail_lock;
                vs->capacity = ((rs_kv_vs_meta *)vs->region.base)->capacity;
            }
        }
    } else {
        rc = rs_kv_region_open_anon(&vs->region, vs_reserve(vs, capacity), initial, huge, err);
        if (rc) goto fail_lock;
    }
    vs->meta = (rs_kv_vs_meta *)vs->region.base;
    vs->data = vs->region.base + RS_KV_VS_DATA_OFFSET;
    if (!existed) vs_meta_init(vs);
    vs->meta->capacity = vs->capacity;
    return 0;
fail_region:
    rs_kv_region_close(&vs->region);
fail_lock:
    pthread_mutex_destroy(&vs->lock);
    return rc;
}

void rs_kv_vs_close(rs_kv_vs *vs) {
    rs_kv_region_close(&vs->region);
    pthread_mutex_destroy(&vs->lock);
}

int rs_kv_vs_sync(rs_kv_vs *vs, rs_error *err) {
    return rs_kv_region_sync(&vs->region, err);
}

void rs_kv_vs_reset(rs_kv_vs *vs) {
    pthread_mutex_lock(&vs->lock);
    vs_meta_init(vs);
    pthread_mutex_unlock(&vs->lock);
}

void rs_kv_vs_rebuild_free(rs_kv_vs *vs, const uint8_t *used) {
    pthread_mutex_lock(&vs->lock);
    rs_kv_vs_meta *m = vs->meta;
    uint64_t head = 0;
    uint32_t seq = 0; /* no reader of this process saw these rows yet: any sequence is safe */
    for (uint64_t h = m->bump; h-- > vs->first;) {
        if (used[h]) continue;
        uint8_t *row = vs->data + h * vs->stride;
        memcpy(row, &head, 8);
        memcpy(row + 8, &seq, 4);
        head = h + 1;
    }
    m->free_head[0] = head;
    pthread_mutex_unlock(&vs->lock);
}

/* The sequence a new owner starts from: even and after `last`. */
static uint64_t next_even(uint64_t last) {
    return ((last | 1) + 1) & RS_KV_SEQ_MASK;
}

static int vs_make_room(rs_kv_vs *vs, size_t end, rs_error *err) {
    if (end <= vs->region.backed) return 0;
    size_t want = end + RS_KV_VS_GROWTH;
    if (want > vs->region.reserved) want = vs->region.reserved;
    if (want < end) want = end;
    return rs_kv_region_grow(&vs->region, want, err);
}

static int alloc_fixed(rs_kv_vs *vs, uint64_t *word, rs_error *err) {
    rs_kv_vs_meta *m = vs->meta;
    if (m->free_head[0]) {
        uint64_t h = m->free_head[0] - 1;
        uint8_t *row = vs->data + h * vs->stride;
        uint64_t next;
        uint32_t gen;
        memcpy(&next, row, 8);
        memcpy(&gen, row + 8, 4);
        m->free_head[0] = next;
        *word = rs_kv_word(h, next_even(gen));
        return 0;
    }
    if (m->bump >= vs->first + vs->capacity)
        return rs_error_set(err, RS_EFULL, "value store full: %llu rows of %u bytes",
                            (unsigned long long)vs->capacity, vs->value_size);
    uint64_t h = m->bump;
    int rc = vs_make_room(vs, RS_KV_VS_DATA_OFFSET + (size_t)(h + 1) * vs->stride, err);
    if (rc) return rc;
    m->bump = h + 1;
    *word = rs_kv_word(h, 0);
    return 0;
}

static int alloc_block(rs_kv_vs *vs, size_t len, uint64_t *word, rs_error *err) {
    rs_kv_vs_meta *m = vs->meta;
    unsigned cls = 0;
    while ((16ull << cls) < len + RS_KV_VBLOCK_HDR)
        cls++;
    if (cls >= RS_KV_NCLASS)
        return rs_error_set(err, RS_EINVAL, "value of %zu bytes is larger than %u", len,
                            RS_KV_MAX_VALUE);
    if (m->free_head[cls]) {
        uint64_t h = m->free_head[cls] - 1;
        rs_kv_vblock *b = (rs_kv_vblock *)(vs->data + h * 16);
        m->free_head[cls] = b->next_free;
        *word = rs_kv_word(h, next_even(b->gen & 0xffffffu));
        return 0;
    }
    uint64_t units = (16ull << cls) / 16;
    uint64_t h = m->bump;
    size_t end = RS_KV_VS_DATA_OFFSET + (size_t)(h + units) * 16;
    if (h + units > RS_KV_HANDLE_MAX || end + RS_KV_MAX_VALUE + 64 > vs->region.reserved)
        return rs_error_set(err, RS_EFULL, "value arena full (%zu bytes reserved)",
                            vs->region.reserved);
    int rc = vs_make_room(vs, end + RS_KV_MAX_VALUE + 64, err);
    if (rc) return rc;
    m->bump = h + units;
    rs_kv_vblock *b = (rs_kv_vblock *)(vs->data + h * 16);
    b->gen = (uint32_t)cls << 24;
    *word = rs_kv_word(h, 0);
    return 0;
}

int rs_kv_vs_alloc(rs_kv_vs *vs, size_t len, uint64_t *word, rs_error *err) {
    pthread_mutex_lock(&vs->lock);
    int rc = vs->variable ? alloc_block(vs, len, word, err) : alloc_fixed(vs, word, err);
    if (!rc && vs->variable) {
        rs_kv_vblock *b = rs_kv_vs_block(vs, *word);
        b->gen = (b->gen & 0xff000000u) | (uint32_t)rs_kv_word_seq(*word);
    }
    pthread_mutex_unlock(&vs->lock);
    return rc;
}

void rs_kv_vs_free(rs_kv_vs *vs, uint64_t word) {
    uint64_t h = rs_kv_word_handle(word);
    uint32_t seq = (uint32_t)rs_kv_word_seq(word);
    pthread_mutex_lock(&vs->lock);
    rs_kv_vs_meta *m = vs->meta;
    if (!vs->variable) {
        uint8_t *row = vs->data + h * vs->stride;
        memcpy(row, &m->free_head[0], 8);
        memcpy(row + 8, &seq, 4);
        m->free_head[0] = h + 1;
    } else {
        rs_kv_vblock *b = rs_kv_vs_block(vs, word);
        unsigned cls = b->gen >> 24;
        b->gen = (b->gen & 0xff000000u) | seq;
        b->next_free = m->free_head[cls];
        m->free_head[cls] = h + 1;
    }
    pthread_mutex_unlock(&vs->lock);
}

size_t rs_kv_vs_block_room(const rs_kv_vs *vs, uint64_t word) {
    unsigned cls = __atomic_load_n(&rs_kv_vs_block(vs, word)->gen, __ATOMIC_RELAXED) >> 24;
    if (cls >= RS_KV_NCLASS) return 0;
    return (16ull << cls) - RS_KV_VBLOCK_HDR;
}
