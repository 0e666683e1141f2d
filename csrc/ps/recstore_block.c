/*
 * recstore_block.c — RecStore's row block (ParameterCompressor layout, recstore/recstore_wire.h):
 * validation of blocks that arrive from the network, the client's reader of GET replies into
 * rows, and the one-pass writer of GET replies.
 *
 * Validation walks the offset table once and checks every item, so a handler may then read any
 * item through rs_rsblock_item without bounds checks. Errors name the byte offset that does not
 * add up. The writer lays items out in request order straight into the transport's reply buffer,
 * with no per-key allocation. A GET reply's rows are gathered by the engine straight into their
 * items (rs_kv_batch_get_strided at a stride of one whole item); the writer then writes each
 * item's key and dim, and only after a miss (a 12-byte dim-0 item) moves the following rows down.
 * The reader first tries the usual reply's layout (every key found at the row's dim): one
 * branch-free comparison per offset and per dim, made while the rows are copied out; any other
 * block takes the full validation, so its errors are the validator's, naming the offset.
 */
#include <stdint.h>
#include <string.h>

#include "recstore/recstore_wire.h"

int rs_rsblock_validate(const uint8_t *block, size_t len, uint32_t *n_items, rs_error *err) {
    int32_t n;
    *n_items = 0;
    if (len < 4)
        return rs_error_set(err, RS_EPROTO,
                            "row block of %zu bytes is shorter than its 4-byte item count", len);
    memcpy(&n, block, 4);
    if (n < 0)
        return rs_error_set(err, RS_EPROTO, "row block: item count %d at byte offset 0 is negative",
                            n);
    size_t area = 4 + 4 * (size_t)n;
    if (area > len)
        return rs_error_set(err, RS_EPROTO,
                            "row block: item count %d at byte offset 0 needs %zu bytes of offsets "
                            "but the block has %zu bytes",
                            n, area, len);
    int64_t prev = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t end, dim;
        size_t off = 4 + 4 * (size_t)i;
        memcpy(&end, block + off, 4);
        int64_t span = (int64_t)end - prev;
        if (span < RS_RSBLOCK_ITEM_HEAD)
            return rs_error_set(err, RS_EPROTO,
                                "row block: end[%d] = %d at byte offset %zu leaves item %d %lld "
                                "bytes (an item is at least 12)",
                                i, end, off, i, (long long)span);
        if ((uint64_t)area + (uint64_t)end > len)
            return rs_error_set(err, RS_EPROTO,
                                "row block: end[%d] = %d at byte offset %zu points past the "
                                "%zu-byte block",
                                i, end, off, len);
        size_t item = area + (size_t)prev;
        memcpy(&dim, block + item + 8, 4);
        if (dim < 0 || (int64_t)RS_RSBLOCK_ITEM_HEAD + 4 * (int64_t)dim != span)
            return rs_error_set(err, RS_EPROTO,
                                "row block: item %d at byte offset %zu has dim %d but spans %lld "
                                "bytes (end[%d] at byte offset %zu)",
                                i, item, dim, (long long)span, i, off);
        prev = end;
    }
    if (area + (size_t)prev != len)
        return rs_error_set(err, RS_EPROTO,
                            "row block: items end at byte offset %zu but the block has %zu bytes",
                            area + (size_t)prev, len);
    *n_items = (uint32_t)n;
    return 0;
}

/* The usual GET reply: m items of exactly row_bytes floats each, i.e. end[i] = (i + 1) * item for
 * every i and every dim = row_bytes / 4. Copies the rows while checking; returns 0 when the block
 * has that layout (it is then valid), 1 when it does not (the rows are then unspecified). */
static int read_all_found(const uint8_t *block, size_t len, uint32_t m, size_t row_bytes,
                          uint8_t *rows) {
    const size_t item = RS_RSBLOCK_ITEM_HEAD + row_bytes, table = 4 + 4 * (size_t)m;
    if (m == 0 || len != table + (size_t)m * item || len > INT32_MAX) return 1;
    uint32_t cnt, bad = 0, step = (uint32_t)item, want = step;
    memcpy(&cnt, block, 4);
    if (cnt != m) return 1;
    const uint8_t *ends = block + 4;
    for (uint32_t i = 0; i < m; i++, want += step) { /* branch-free: one OR per offset */
        uint32_t e;
        memcpy(&e, ends + 4 * (size_t)i, 4);
        bad |= e ^ want;
    }
    if (bad) return 1;
    const uint32_t dim = (uint32_t)(row_bytes / 4);
    const uint8_t *it = block + table;
    for (uint32_t i = 0; i < m; i++, it += item) {
        uint32_t d;
        memcpy(&d, it + 8, 4);
        bad |= d ^ dim;
        memcpy(rows + (size_t)i * row_bytes, it + RS_RSBLOCK_ITEM_HEAD, row_bytes);
    }
    return bad != 0;
}

int rs_rsblock_read_rows(const uint8_t *block, size_t len, uint32_t m, size_t row_bytes,
                         uint8_t *rows, uint32_t *found, rs_error *err) {
    *found = 0;
    if (read_all_found(block, len, m, row_bytes, rows) == 0) {
        *found = m;
        return 0;
    }
    uint32_t n;
    if (rs_rsblock_validate(block, len, &n, err)) return RS_EPROTO;
    if (n != m) return rs_error_set(err, RS_EPROTO, "row block of %u items answers %u keys", n, m);
    const size_t dim = row_bytes / 4;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t key;
        int32_t d;
        const uint8_t *v = rs_rsblock_item(block, n, i, &key, &d);
        size_t take = (size_t)d < dim ? (size_t)d : dim;
        uint8_t *row = rows + (size_t)i * row_bytes;
        memcpy(row, v, 4 * take);
        if (take < dim) memset(row + 4 * take, 0, 4 * (dim - take));
        *found += d > 0;
    }
    return 0;
}

void rs_rsblock_writer_init(rs_rsblock_writer *w, uint8_t *out, uint32_t n) {
    int32_t cnt = (int32_t)n;
    memcpy(out, &cnt, 4);
    w->out = out;
    w->n = n;
    w->next = 0;
    w->pos = 0;
}

void rs_rsblock_writer_add_gathered(rs_rsblock_writer *w, const uint8_t *keys, uint32_t m,
                                    uint32_t dim, const uint8_t *found) {
    uint8_t *ends = w->out + 4;
    uint8_t *items = w->out + 4 + 4 * (size_t)w->n;
    uint8_t *item = items + w->pos; /* where item i goes */
    const uint8_t *gathered = item; /* where item i's row was gathered: a whole item each */
    const size_t row_bytes = 4 * (size_t)dim;
    const size_t full = RS_RSBLOCK_ITEM_HEAD + row_bytes;
    for (uint32_t i = 0; i < m; i++, gathered += full) {
        int32_t d = found[i] ? (int32_t)dim : 0;
        /* item <= gathered: neither the move nor the head reaches a later item's row */
        if (d && item != gathered)
            memmove(item + RS_RSBLOCK_ITEM_HEAD, gathered + RS_RSBLOCK_ITEM_HEAD, row_bytes);
        memcpy(item, keys + 8 * (size_t)i, 8);
        memcpy(item + 8, &d, 4);
        item += d ? full : RS_RSBLOCK_ITEM_HEAD;
        int32_t end = (int32_t)(item - items);
        memcpy(ends + 4 * (size_t)(w->next + i), &end, 4);
    }
    w->next += m;
    w->pos = (size_t)(item - items);
}

void rs_rsblock_writer_add(rs_rsblock_writer *w, const uint8_t *keys, uint32_t m, uint32_t dim,
                           const float *rows, const uint8_t *found) {
    uint8_t *dst = rs_rsblock_writer_next_rows(w);
    const size_t row_bytes = 4 * (size_t)dim;
    for (uint32_t i = 0; i < m; i++)
        if (found[i])
            memcpy(dst + i * (RS_RSBLOCK_ITEM_HEAD + row_bytes),
                   (const uint8_t *)rows + row_bytes * i, row_bytes);
    rs_rsblock_writer_add_gathered(w, keys, m, dim, found);
}
