/*
 * kv_checkpoint_format.h — the constants of the checkpoint file format that the writer
 * (kv_checkpoint.c, where the layout is described) and the reader (kv_checkpoint_load.c) share.
 * Every block but the last holds exactly rows_per_block rows, so block b starts at
 * CKPT_HEADER_BYTES + b * (CKPT_BLOCK_HDR + rows_per_block * (8 + value_size)).
 */
#ifndef RECSTORE_KV_CHECKPOINT_FORMAT_H
#define RECSTORE_KV_CHECKPOINT_FORMAT_H

#include <stdint.h>

#define CKPT_MAGIC        "RSKVCKPT"
#define CKPT_END_MAGIC    "RSCKPEND"
#define CKPT_BLOCK_MAGIC  0x4b425352u /* "RSBK" */
#define CKPT_HEADER_BYTES 4096u
#define CKPT_BLOCK_HDR    32u
#define CKPT_TRAILER      32u
#define CKPT_BLOCK_TARGET (1u << 20)   /* payload bytes per block, about */
#define CKPT_IO_WINDOW    (8ull << 20) /* write-back started / read-ahead asked in these steps */

static inline uint32_t rs_ckpt_rows_per_block(uint32_t value_size) {
    uint32_t n = CKPT_BLOCK_TARGET / (value_size + 8u);
    return n ? n : 1;
}

#endif
