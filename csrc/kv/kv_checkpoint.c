/*
 * kv_checkpoint.c — save a KV engine's rows to one checkpoint file (recstore/kv_checkpoint.h);
 * kv_checkpoint_load.c reads them back. Little-endian throughout.
 *
 * Header, 4096 bytes at offset 0:
 *   0 magic "RSKVCKPT" | 8 u32 format version | 12 u32 header bytes (4096) | 16 u32 index type
 *   20 u32 value_size | 24 u64 record count | 32 u32 shard id | 36 u32 shard count
 *   40 char[16] hash method ("rs_mix64") | 56 u32 rows per block | 60 u32 0 | 64 u64 block count
 *   72 u64 created (unix ns) | 80 u64 file bytes | zero | 4092 u32 CRC-32C of bytes 0..4091
 * Blocks from offset 4096, every one but the last with exactly rows-per-block rows:
 *   0 u32 "RSBK" | 4 u32 rows n | 8 u64 block index | 16 u32 CRC-32C of keys and rows
 *   20 u32 0 | 24 u32 0 | 28 u32 CRC-32C of bytes 0..27 | 32 n keys (u64) | n rows of value_size
 * Trailer, the last 32 bytes:
 *   "RSCKPEND" | u64 block count | u64 record count | u32 0 | u32 CRC-32C of bytes 0..27
 *
 * The magic and the version sit at fixed offsets in every format version, so a reader refuses a
 * newer file by its version before reading anything else. The header is written last (its counts
 * are known only then) into a temporary file that is fsynced and renamed; the directory is fsynced
 * after the rename.
 *
 * Save walks the index with its scan op (entries cannot move meanwhile) and reads each row under
 * its seqlock exactly like a GET; a row disturbed by a writer is read again by key. It starts
 * write-back every 8 MiB (sync_file_range) so the disk streams during the scan.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "kv_checkpoint_format.h"
#include "kv_internal.h"
#include "recstore/bytes.h"
#include "recstore/clock.h"
#include "recstore/crc32c.h"
#include "recstore/kv_checkpoint.h"

int rs_kv_checkpoint_path(const char *dir, uint32_t shard_id, char *out, size_t cap,
                          rs_error *err) {
    if (!dir || !dir[0]) return rs_error_set(err, RS_EINVAL, "checkpoint directory is empty");
    int n = snprintf(out, cap, "%s/shard_%u.rsckpt", dir, shard_id);
    if (n < 0 || (size_t)n >= cap)
        return rs_error_set(err, RS_EINVAL, "checkpoint directory '%s' is too long", dir);
    return 0;
}

/* ---- save ------------------------------------------------------------------------------------ */

typedef struct saver {
    rs_kv *kv;
    int fd;
    const char *file; /* shown in errors (the temporary name) */
    uint32_t rpb;
    uint32_t n; /* rows in the current block */
    uint64_t *keys;
    uint8_t *rows;
    uint64_t blocks, records, offset;
    uint64_t flushed; /* write-back has been started up to here */
    rs_error *err;
} saver;

static int write_all(int fd, struct iovec *iov, int cnt, uint64_t off, const char *file,
                     rs_error *err) {
    while (cnt) {
        ssize_t w = pwritev(fd, iov, cnt, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return rs_error_errno(err, RS_EIO, errno, "%s: write at offset %llu", file,
                                  (unsigned long long)off);
        }
        off += (uint64_t)w;
        while (cnt && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int flush_block(saver *sv) {
    if (!sv->n) return 0;
    uint32_t vsz = sv->kv->value_size;
    size_t kbytes = (size_t)sv->n * 8, rbytes = (size_t)sv->n * vsz;
    uint8_t hdr[CKPT_BLOCK_HDR] = {0};
    rs_put32(hdr, CKPT_BLOCK_MAGIC);
    rs_put32(hdr + 4, sv->n);
    rs_put64(hdr + 8, sv->blocks);
    rs_put32(hdr + 16, rs_crc32c(rs_crc32c(0, sv->keys, kbytes), sv->rows, rbytes));
    rs_put32(hdr + 28, rs_crc32c(0, hdr, 28));
    struct iovec iov[3] = {{hdr, sizeof hdr}, {sv->keys, kbytes}, {sv->rows, rbytes}};
    int rc = write_all(sv->fd, iov, 3, sv->offset, sv->file, sv->err);
    if (rc) return rc;
    sv->offset += sizeof hdr + kbytes + rbytes;
    /* start write-back of what is written so far, so the disk works while the scan goes on and
     * the final fsync has little left (without it the kernel waits for its dirty thresholds) */
    if (sv->offset - sv->flushed >= CKPT_IO_WINDOW) {
        sync_file_range(sv->fd, (off_t)sv->flushed, (off_t)(sv->offset - sv->flushed),
                        SYNC_FILE_RANGE_WRITE);
        sv->flushed = sv->offset;
    }
    sv->blocks++;
    sv->records += sv->n;
    sv->n = 0;
    return 0;
}

/* One entry the scan found: its key into *key and its row into out; 0 if the key was deleted
 * meanwhile. The fast path is the seqlock copy a GET does; a row a writer disturbed, or an entry
 * that was removed or reused, is read again by its key. */
static int read_scanned(rs_kv *kv, const rs_kv_slot *s, uint64_t *key, uint8_t *out) {
    *key = __atomic_load_n(s->keyp, __ATOMIC_ACQUIRE);
    uint64_t w1 = __atomic_load_n(s->word, __ATOMIC_ACQUIRE);
    if (rs_kv_copy_fixed(&kv->vs, *key, s, w1, out) && kv->ops->validate(kv->ix, s)) return 1;
    return rs_kv_read_fixed_slow(kv->ops, kv->ix, &kv->vs, *key, out);
}

static int save_entry(void *ctx, const rs_kv_slot *s) {
    saver *sv = ctx;
    if (!read_scanned(sv->kv, s, &sv->keys[sv->n], sv->rows + (size_t)sv->n * sv->kv->value_size))
        return 0;
    sv->n++;
    return sv->n == sv->rpb ? flush_block(sv) : 0;
}

static void header_encode(uint8_t *h, const rs_kv_ckpt_info *in) {
    memset(h, 0, CKPT_HEADER_BYTES);
    memcpy(h, CKPT_MAGIC, 8);
    rs_put32(h + 8, in->format);
    rs_put32(h + 12, CKPT_HEADER_BYTES);
    rs_put32(h + 16, in->index_type);
    rs_put32(h + 20, in->value_size);
    rs_put64(h + 24, in->records);
    rs_put32(h + 32, in->shard_id);
    rs_put32(h + 36, in->num_shards);
    memcpy(h + 40, in->hash_method, strnlen(in->hash_method, 16));
    rs_put32(h + 56, in->rows_per_block);
    rs_put64(h + 64, in->blocks);
    rs_put64(h + 72, in->created_unix_ns);
    rs_put64(h + 80, in->file_bytes);
    rs_put32(h + CKPT_HEADER_BYTES - 4, rs_crc32c(0, h, CKPT_HEADER_BYTES - 4));
}

static int fsync_dir(const char *dir, rs_error *err) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return rs_error_errno(err, RS_EIO, errno, "checkpoint directory %s: open", dir);
    int rc = 0;
    if (fsync(dfd) != 0)
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint directory %s: fsync", dir);
    close(dfd);
    return rc;
}

int rs_kv_checkpoint_save(rs_kv *kv, const char *dir, uint32_t shard_id, uint32_t num_shards,
                          rs_kv_ckpt_info *info, rs_error *err) {
    static uint32_t tmp_seq;
    char final[4096], tmp[4200];
    int rc;
    if (!kv || !dir) return rs_error_set(err, RS_EINVAL, "kv and dir must not be NULL");
    if (!kv->value_size)
        return rs_error_set(err, RS_ENOTSUP,
                            "checkpoints hold fixed-size rows; this engine has variable-length "
                            "values (value_size 0)");
    if (!kv->ops->scan)
        return rs_error_set(err, RS_ENOTSUP, "%s cannot be scanned for a checkpoint",
                            rs_kv_index_type_name(kv->type));
    if (num_shards == 0 || shard_id >= num_shards)
        return rs_error_set(err, RS_EINVAL, "shard %u of %u is not a valid shard", shard_id,
                            num_shards);
    if ((rc = rs_kv_checkpoint_path(dir, shard_id, final, sizeof final, err))) return rc;
    if ((rc = rs_kv_make_dir(dir, err))) return rc;
    snprintf(tmp, sizeof tmp, "%s/.shard_%u.rsckpt.tmp.%d.%u", dir, shard_id, (int)getpid(),
             __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
    uint64_t t0 = rs_now_ns();
    saver sv = {.kv = kv,
                .file = tmp,
                .rpb = rs_ckpt_rows_per_block(kv->value_size),
                .offset = CKPT_HEADER_BYTES,
                .err = err};
    sv.keys = malloc((size_t)sv.rpb * 8);
    sv.rows = malloc((size_t)sv.rpb * kv->value_size);
    uint8_t *hdr = calloc(1, CKPT_HEADER_BYTES);
    if (!sv.keys || !sv.rows || !hdr) {
        rc = rs_error_set(err, RS_ENOMEM, "checkpoint buffers");
        goto out_free;
    }
    sv.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (sv.fd < 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint %s: create", tmp);
        goto out_free;
    }
    if ((rc = kv->ops->scan(kv->ix, save_entry, &sv)) || (rc = flush_block(&sv))) goto out_unlink;
    rs_kv_ckpt_info in = {.format = RS_KV_CKPT_FORMAT,
                          .index_type = (uint32_t)kv->type,
                          .value_size = kv->value_size,
                          .shard_id = shard_id,
                          .num_shards = num_shards,
                          .rows_per_block = sv.rpb,
                          .records = sv.records,
                          .blocks = sv.blocks,
                          .file_bytes = sv.offset + CKPT_TRAILER};
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    in.created_unix_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    snprintf(in.hash_method, sizeof in.hash_method, "%s", RS_KV_CKPT_HASH_METHOD);
    uint8_t trailer[CKPT_TRAILER] = {0};
    memcpy(trailer, CKPT_END_MAGIC, 8);
    rs_put64(trailer + 8, sv.blocks);
    rs_put64(trailer + 16, sv.records);
    rs_put32(trailer + 28, rs_crc32c(0, trailer, 28));
    header_encode(hdr, &in);
    struct iovec tv[1] = {{trailer, sizeof trailer}}, hv[1] = {{hdr, CKPT_HEADER_BYTES}};
    if ((rc = write_all(sv.fd, tv, 1, sv.offset, tmp, err)) ||
        (rc = write_all(sv.fd, hv, 1, 0, tmp, err)))
        goto out_unlink;
    if (fsync(sv.fd) != 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint %s: fsync", tmp);
        goto out_unlink;
    }
    if (close(sv.fd) != 0) {
        sv.fd = -1;
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint %s: close", tmp);
        goto out_unlink;
    }
    sv.fd = -1;
    if (rename(tmp, final) != 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint: rename %s to %s", tmp, final);
        goto out_unlink;
    }
    if ((rc = fsync_dir(dir, err))) goto out_free;
    in.seconds = (double)(rs_now_ns() - t0) / 1e9;
    if (info) *info = in;
    goto out_free;
out_unlink:
    if (sv.fd >= 0) close(sv.fd);
    unlink(tmp);
out_free:
    free(hdr);
    free(sv.keys);
    free(sv.rows);
    return rc;
}
