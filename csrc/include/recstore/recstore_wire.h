/*
 * recstore_wire.h — RecStore's own PS wire (docs/recstore-wire.md), served and spoken next to
 * recbench's native recstore.PSService: the row block, the ParameterService semantics on a shard,
 * and RecStore's shard routing (CityHash64).
 *
 * Row block (RecStore's ParameterCompressor), everything packed little-endian, no padding:
 *
 *     offset 0         int32 N                       item count
 *     offset 4         int32 end[0..N-1]             cumulative end of item i, counted from the
 *                                                    start of the item area (item 0 starts at 0)
 *     offset 4 + 4N    items back to back            end[N-1] bytes
 *     item:            u64 key | i32 dim | float32[dim]       (12 + 4*dim bytes; dim 0 = missing)
 *
 * A valid block of length len has len >= 4, N >= 0, 4 + 4N + end[N-1] == len, and every item's
 * span equals 12 + 4*dim. Items are 4-byte but not 8-byte aligned: read keys with memcpy.
 */
#ifndef RECSTORE_RECSTORE_WIRE_H
#define RECSTORE_RECSTORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "recstore/error.h"
#include "recstore/ps.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- row block (recstore_block.c) ----------------------------------------------------------- */

#define RS_RSBLOCK_ITEM_HEAD 12u /* u64 key + i32 dim */

/* Check a block; on success *n_items is N. RS_EPROTO naming the offending offset otherwise
 * (e.g. "row block: end[3] = 40 at byte offset 16 is not after end[2] = 52"). */
int rs_rsblock_validate(const uint8_t *block, size_t len, uint32_t *n_items, rs_error *err);

/* Read a GetParameter reply block that must hold exactly m items into m rows of row_bytes (a
 * multiple of 4) at rows: item i's floats go to rows + i * row_bytes, cut or zero-padded to the
 * row, and an item of dim 0 (a miss) becomes a zero row; *found counts the items of dim > 0.
 * The block is checked exactly as rs_rsblock_validate checks it, with the same errors naming the
 * offset, plus RS_EPROTO when it holds another number of items. The usual reply (every key found,
 * at the row's dim) is checked in the same pass as its rows are copied: one look at each offset
 * and each dim, no per-item bounds walk. After an error the rows are unspecified. */
int rs_rsblock_read_rows(const uint8_t *block, size_t len, uint32_t m, size_t row_bytes,
                         uint8_t *rows, uint32_t *found, rs_error *err);

/* Item i of a validated block: its key, dim and a (possibly unaligned) view of its floats. */
static inline const uint8_t *rs_rsblock_item(const uint8_t *block, uint32_t n, uint32_t i,
                                             uint64_t *key, int32_t *dim) {
    int32_t start = 0;
    if (i) memcpy(&start, block + 4 + 4 * (size_t)(i - 1), 4);
    const uint8_t *item = block + 4 + 4 * (size_t)n + (size_t)start;
    memcpy(key, item, 8);
    memcpy(dim, item + 8, 4);
    return item + RS_RSBLOCK_ITEM_HEAD;
}

/* Largest block for n items of at most dim floats each. */
static inline size_t rs_rsblock_max_size(uint32_t n, uint32_t dim) {
    return 4 + (size_t)n * (4 + RS_RSBLOCK_ITEM_HEAD + 4 * (size_t)dim);
}

/* Builds a block of n items in place, in request order, chunk by chunk (out has
 * rs_rsblock_max_size(n, dim) bytes): add() appends m items, item i being key keys[i] (raw LE
 * bytes) with the dim floats of rows + i*dim when found[i], else dim 0 (rows copied to where
 * add_gathered expects them, then added by it). No allocation. */
typedef struct rs_rsblock_writer {
    uint8_t *out;
    uint32_t n, next; /* items announced / written */
    size_t pos;       /* bytes of items written */
} rs_rsblock_writer;
void rs_rsblock_writer_init(rs_rsblock_writer *w, uint8_t *out, uint32_t n);
void rs_rsblock_writer_add(rs_rsblock_writer *w, const uint8_t *keys, uint32_t m, uint32_t dim,
                           const float *rows, const uint8_t *found);
/* Where the rows of the next items are gathered: the next item's row first, each following row
 * one whole item (12 + 4*dim bytes) further, as if every key were found. */
static inline uint8_t *rs_rsblock_writer_next_rows(const rs_rsblock_writer *w) {
    return w->out + 4 + 4 * (size_t)w->n + w->pos + RS_RSBLOCK_ITEM_HEAD;
}
/* Append m items whose rows were gathered at rs_rsblock_writer_next_rows (found[i]: key i's row
 * is there): writes each item's key (keys[i], raw LE bytes) and dim, dim 0 for a miss, and moves
 * the rows after a miss down to their items. The GET reply's single pass over the rows. */
void rs_rsblock_writer_add_gathered(rs_rsblock_writer *w, const uint8_t *keys, uint32_t m,
                                    uint32_t dim, const uint8_t *found);
/* Length of the finished block (all n items added). */
static inline size_t rs_rsblock_writer_len(const rs_rsblock_writer *w) {
    return 4 + 4 * (size_t)w->n + w->pos;
}

/* ---- CityHash64 v1.1 and RecStore's shard routing (cityhash.c) ------------------------------ */

/* Google's CityHash64 (v1.1, unseeded) of len bytes. */
uint64_t rs_cityhash64(const void *data, size_t len);

typedef enum rs_rs_hash_method {
    RS_RS_HASH_CITY = 0,       /* "city_hash": CityHash64(8 LE bytes of key) % shards */
    RS_RS_HASH_SIMPLE_MOD = 1, /* "simple_mod": key % shards */
} rs_rs_hash_method;

/* "city_hash" / "simple_mod" -> method; RS_EINVAL naming the value otherwise. */
int rs_rs_hash_method_parse(const char *name, rs_rs_hash_method *out, rs_error *err);
const char *rs_rs_hash_method_name(rs_rs_hash_method m);

static inline uint32_t rs_recstore_shard_of(uint64_t key, uint32_t num_shards,
                                            rs_rs_hash_method m) {
    if (num_shards <= 1) return 0;
    if (m == RS_RS_HASH_SIMPLE_MOD) return (uint32_t)(key % num_shards);
    uint8_t le[8];
    memcpy(le, &key, 8); /* little-endian hosts only, as the rest of the wire */
    return (uint32_t)(rs_cityhash64(le, 8) % num_shards);
}

/* ---- ParameterService semantics on one shard (recstore_ps.c) -------------------------------- */

/* What went wrong, in the categories both wires can express: gRPC status codes / brpc error
 * codes are chosen by the transport from these. */
typedef enum rs_rsps_code {
    RS_RSPS_OK = 0,
    RS_RSPS_INVALID = 1,     /* malformed or unacceptable input (INVALID_ARGUMENT / EINVAL) */
    RS_RSPS_UNSUPPORTED = 2, /* a command recbench cannot honour (UNIMPLEMENTED / ENOTSUP) */
    RS_RSPS_CAPACITY = 3,    /* the shard is full (RESOURCE_EXHAUSTED) */
    RS_RSPS_INTERNAL = 4,    /* engine failure (INTERNAL) */
    RS_RSPS_PRECONDITION = 5 /* FAILED_PRECONDITION */
} rs_rsps_code;

/* RecStore's server optimizers (its src/optimizer: SGD one tensor per table, AdaGrad and
 * RowWiseAdaGrad two: the table's rows and an accumulator tensor of tag + 1). The accumulator
 * rows live in the same shard as rows of the shard's width under the key with the accumulator's
 * tag (key & 2^56-1 | (tag + 1) << 56): AdaGrad uses every float, RowWiseAdaGrad float 0. */
typedef enum rs_rsps_optimizer_type {
    RS_RSPS_SGD = 0,             /* w -= lr * g; a missing key starts as -lr * g */
    RS_RSPS_ADAGRAD = 1,         /* a += g*g; w -= lr / (sqrt(a) + eps) * g, per element */
    RS_RSPS_ROWWISE_ADAGRAD = 2, /* a += mean(g*g) per row; w -= lr / (sqrt(a) + eps) * g */
} rs_rsps_optimizer_type;

typedef struct rs_rsps_optimizer {
    rs_rsps_optimizer_type type;
    float learning_rate; /* default 0.01, RecStore's */
    float epsilon;       /* AdaGrad's; default 1e-10, RecStore's */
} rs_rsps_optimizer;

/* Default optimizer (SGD, lr 0.01, epsilon 1e-10). */
void rs_rsps_optimizer_default(rs_rsps_optimizer *o);
/* Tensors per table of an optimizer (the tag stride: tag = table_id * this). */
int rs_rsps_optimizer_tensors(rs_rsps_optimizer_type t);
/* One server option: "optimizer=SGD|AdaGrad|RowWiseAdaGrad" (RecStore's spellings,
 * case-insensitive), "learning_rate=0.05" or "epsilon=1e-8". Returns 1 if the key is one of these
 * (parsed into o, or an RS_EINVAL naming the value), 0 if it is not an optimizer key. */
int rs_rsps_optimizer_option(rs_rsps_optimizer *o, const char *who, const char *key,
                             const char *val, rs_error *err);

typedef struct rs_rsps rs_rsps; /* one shard's RecStore service state: tables, optimizer */

int rs_rsps_create(rs_ps_shard *shard, const rs_rsps_optimizer *opt, rs_rsps **out, rs_error *err);
void rs_rsps_destroy(rs_rsps *s);
rs_ps_shard *rs_rsps_shard(rs_rsps *s);

/* Result of one call: code and a readable reason. */
typedef struct rs_rsps_result {
    rs_rsps_code code;
    char msg[256];
} rs_rsps_result;

/* Bytes the GetParameter reply block for keys_len bytes of keys needs (0 if keys_len is not a
 * positive multiple of 8). */
size_t rs_rsps_get_reply_max(const rs_rsps *s, size_t keys_len);
/* GetParameter: keys (raw LE u64, keys_len bytes) -> one row block written to out (cap bytes,
 * at least rs_rsps_get_reply_max) in request order; misses are dim-0 items. *out_len is the
 * block length. Zero keys or a length that is not a multiple of 8: RS_RSPS_INVALID. */
rs_rsps_code rs_rsps_get(rs_rsps *s, const uint8_t *keys, size_t keys_len, uint8_t *out, size_t cap,
                         size_t *out_len, unsigned thread_slot, rs_rsps_result *res);
/* PutParameter: store every item of a row block. Items must have the shard's dim. */
rs_rsps_code rs_rsps_put(rs_rsps *s, const uint8_t *block, size_t len, unsigned thread_slot,
                         rs_rsps_result *res);
/* UpdateParameter: apply a gradient block through the optimizer for a registered table whose
 * tag every key carries in its top 8 bits. Any refusal (unknown table, tag mismatch, bad block)
 * is a non-OK code: RecStore's callers see success=false, the reason goes to the log line
 * (component=recstore_ps event=update_refused) and the shard's handled_error counter. */
rs_rsps_code rs_rsps_update(rs_rsps *s, const char *table, size_t table_len, const uint8_t *block,
                            size_t len, unsigned thread_slot, rs_rsps_result *res);
/* InitEmbeddingTable: register table with its JSON config ({"embedding_dim":D,
 * "num_embeddings":N,"table_id":T}); *tag = T * rs_rsps_optimizer_tensors(optimizer) on success
 * (same config again: same tag), -1 when refused (res says why). */
rs_rsps_code rs_rsps_init_table(rs_rsps *s, const char *table, size_t table_len,
                                const uint8_t *json, size_t json_len, int have_json, int32_t *tag,
                                rs_rsps_result *res);

/* Command: RecStore's PSCommand values. */
enum {
    RS_RSPS_CLEAR_PS = 0,
    RS_RSPS_RELOAD_PS = 1,
    RS_RSPS_LOAD_FAKE_DATA = 2,
    RS_RSPS_DUMP_FAKE_DATA = 3,
    RS_RSPS_SAVE_CHECKPOINT = 4,
    RS_RSPS_LOAD_CHECKPOINT = 5,
};
#define RS_RSPS_MAX_ARGS 8
typedef struct rs_rsps_bytes {
    const uint8_t *data;
    size_t len;
} rs_rsps_bytes;
typedef struct rs_rsps_command_args {
    int64_t command;
    rs_rsps_bytes arg1[RS_RSPS_MAX_ARGS], arg2[RS_RSPS_MAX_ARGS];
    uint32_t n_arg1, n_arg2, n_arg3; /* counts as sent (may exceed RS_RSPS_MAX_ARGS) */
} rs_rsps_command_args;
/* Largest LOAD_FAKE_DATA reply (16 MiB, RecStore's limit). */
#define RS_RSPS_FAKE_DATA_MAX (16u << 20)
/* Execute a command. The reply is either text (reply, reply_len bytes; "ok") or, for
 * LOAD_FAKE_DATA, *fake_len bytes of 0xAB that the transport writes itself. */
rs_rsps_code rs_rsps_command(rs_rsps *s, const rs_rsps_command_args *a, const char **reply,
                             size_t *reply_len, size_t *fake_len, unsigned thread_slot,
                             rs_rsps_result *res);

#ifdef __cplusplus
}
#endif
#endif
