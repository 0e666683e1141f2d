/*
 * kv_checkpoint.h — checkpoints of a KV engine's fixed-size rows: one file per PS shard,
 * <dir>/shard_<id>.rsckpt, saved while other threads keep reading and writing the engine and
 * loaded with every byte verified. The format is described in csrc/kv/kv_checkpoint.c and
 * docs/durability.md.
 *
 * Snapshot semantics of a save taken under concurrent writers: every row in the file is a whole
 * row that the key had at some moment during the save (never torn, read under the row's seqlock);
 * a key present and not deleted for the whole save is in the file; a key inserted or deleted
 * during the save may or may not be; a key deleted and re-inserted during the save may appear
 * twice (load keeps the later copy). It is not a point-in-time snapshot across keys.
 *
 * Errors (rs_error names the file and, for damage, the byte offset): RS_EIO (open/read/write/fsync
 * failed), RS_EPROTO (not a checkpoint, truncated, a checksum mismatch, inconsistent counts),
 * RS_ENOTSUP (a newer format version, another shard routing hash), RS_EINVAL (value_size, shard id
 * or shard count differ from the expected ones), RS_EFULL (more keys than the target holds).
 */
#ifndef RECSTORE_KV_CHECKPOINT_H
#define RECSTORE_KV_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"
#include "recstore/kv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_KV_CKPT_FORMAT 1u /* the newest format version this build writes and reads */

/* The shard routing a checkpoint's keys were placed with (recstore/hash.h). */
#define RS_KV_CKPT_HASH_METHOD "rs_mix64"

typedef struct rs_kv_ckpt_info {
    uint32_t format;
    uint32_t index_type; /* rs_kv_index_type of the engine that was saved */
    uint32_t value_size;
    uint32_t shard_id, num_shards;
    uint32_t rows_per_block;
    uint64_t records; /* rows in the file */
    uint64_t blocks;
    uint64_t file_bytes;
    uint64_t created_unix_ns;
    char hash_method[17];
    double seconds; /* save: scan + write + fsync + rename; load: read + verify + insert */
    int direct_io;  /* load: the blocks were read with O_DIRECT (rs_kv_checkpoint_load_once) */
} rs_kv_ckpt_info;

/* "<dir>/shard_<id>.rsckpt" into out (cap bytes). RS_EINVAL if it does not fit. */
int rs_kv_checkpoint_path(const char *dir, uint32_t shard_id, char *out, size_t cap, rs_error *err);

/* Save kv's rows (fixed-row mode only) as shard shard_id of num_shards into dir (created with its
 * parents if missing). Written to a temporary name in dir, fsynced, renamed over the final name,
 * then dir is fsynced: a crash leaves the old checkpoint or the new one, never a mix. Safe while
 * other threads use kv, except rs_kv_clear/rs_kv_close. info (nullable) describes the result. */
int rs_kv_checkpoint_save(rs_kv *kv, const char *dir, uint32_t shard_id, uint32_t num_shards,
                          rs_kv_ckpt_info *info, rs_error *err);

/* Read only the header of the checkpoint file `file`, checking magic, version and checksum. */
int rs_kv_checkpoint_read_header(const char *file, rs_kv_ckpt_info *info, rs_error *err);

/* Read and check all of shard shard_id's checkpoint in dir (magic, version, header, every block
 * checksum, trailer, counts; value_size, shard id, shard count and hash method against the given
 * ones; records <= capacity) without inserting anything. */
int rs_kv_checkpoint_verify(const char *dir, uint32_t shard_id, uint32_t num_shards,
                            uint32_t value_size, uint64_t capacity, rs_kv_ckpt_info *info,
                            rs_error *err);

/* Load shard shard_id of num_shards from dir into `into` (its value_size must be the
 * checkpoint's). Every block is checked before its rows are inserted; on an error the rows of the
 * blocks before stay in `into`. rs_ps_shard therefore verifies the whole file first, then loads
 * with requests held off (docs/durability.md). */
int rs_kv_checkpoint_load(const char *dir, uint32_t shard_id, uint32_t num_shards, rs_kv *into,
                          rs_kv_ckpt_info *info, rs_error *err);
/* The same load for a file not read just before (no verify pass filled the page cache): the
 * blocks are read with direct I/O, several in flight, where the file system allows it (else
 * buffered, as rs_kv_checkpoint_load). rs_ps_shard uses it to load an empty shard in one pass. */
int rs_kv_checkpoint_load_once(const char *dir, uint32_t shard_id, uint32_t num_shards, rs_kv *into,
                               rs_kv_ckpt_info *info, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
