/*
 * kv_checkpoint_load.c — reading checkpoints back (recstore/kv_checkpoint.h): the header, a full
 * verification of every byte, and a load into an engine. The layout is in kv_checkpoint.c.
 *
 * The header fixes where every block starts (all blocks but the last are full), so blocks can be
 * read independently. Verify runs CKPT_READERS threads (the caller and helpers) that claim chunks
 * of CKPT_CHUNK blocks in turn, ask the kernel to read their chunk and the next one ahead, and
 * read and checksum them: one thread alone leaves the disk idle while it copies and checksums.
 * The error reported is the one of the lowest damaged block, as a sequential reader would report
 * it: a thread stops early only at chunks past a failure already found. Claiming chunks instead
 * of fixed halves keeps both threads busy to the end even when one of them is scheduled late.
 *
 * Load inserts the blocks in file order (rs_kv_batch_put, so the later copy of a key saved twice
 * wins) from a ring of CKPT_RING block buffers that a helper thread fills ahead; when the next
 * block is not claimed yet the inserter reads it itself, so it never waits for a helper that is
 * not running. A block is inserted only after its checksum matched; a failure stops the load with
 * the rows of the blocks before it in the engine.
 *
 * Verify and rs_kv_checkpoint_load read buffered: rs_ps_shard verifies first and loads second,
 * and the second pass then reads from the page cache the first one filled. An empty shard is
 * loaded in one pass (rs_kv_checkpoint_load_once, which rs_ps_shard undoes with a clear if a block
 * fails): that pass reads with O_DIRECT, CKPT_LOADERS helpers and the inserter each with a block
 * read in flight, so neither the kernel's page-cache fill and copy nor its read-ahead size limit
 * the rate, and the disk streams at what dd's direct read measures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_checkpoint_format.h"
#include "kv_internal.h"
#include "recstore/bytes.h"
#include "recstore/clock.h"
#include "recstore/crc32c.h"
#include "recstore/kv_checkpoint.h"

#define CKPT_READERS   2    /* threads reading and checksumming during verify */
#define CKPT_CHUNK     8    /* blocks a verify thread claims at a time, read ahead in these steps */
#define CKPT_RING      8    /* blocks read ahead of the inserter during load */
#define CKPT_LOADERS   2    /* helpers filling that ring (with the inserter: 3 reads in flight) */
#define CKPT_DIO_ALIGN 4096 /* offset, length and buffer alignment of a direct read */

/* An open checkpoint whose header has been checked. */
typedef struct ckfile {
    const char *path;
    int fd;
    int dfd; /* the file opened O_DIRECT for a one-pass load, or -1 */
    rs_kv_ckpt_info hi;
    uint64_t block_bytes; /* a full block: header, rows_per_block keys and rows */
    uint32_t last_rows;   /* rows in the last block */
} ckfile;

/* Read exactly n bytes at off; a short read is a truncation at the offset where data ended. */
static int read_at(int fd, void *buf, size_t n, uint64_t off, const char *file, const char *what,
                   rs_error *err) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return rs_error_errno(err, RS_EIO, errno, "%s: read of the %s at offset %llu", file,
                                  what, (unsigned long long)(off + got));
        }
        if (r == 0)
            return rs_error_set(err, RS_EPROTO,
                                "%s: truncated at offset %llu (the %s at offset %llu needs %zu "
                                "bytes)",
                                file, (unsigned long long)(off + got), what,
                                (unsigned long long)off, n);
        got += (size_t)r;
    }
    return 0;
}

/* The file size the header's counts imply, or 0 if they overflow. */
static uint64_t layout_bytes(const rs_kv_ckpt_info *o, uint64_t *block_bytes, uint32_t *last) {
    uint64_t row = 8ull + o->value_size, full = CKPT_BLOCK_HDR + o->rows_per_block * row, body;
    *block_bytes = full;
    *last = o->blocks ? (uint32_t)(o->records - (o->blocks - 1) * o->rows_per_block) : 0;
    if (!o->blocks) return CKPT_HEADER_BYTES + CKPT_TRAILER;
    if (__builtin_mul_overflow(o->blocks - 1, full, &body) ||
        __builtin_add_overflow(body, CKPT_BLOCK_HDR + *last * row, &body) ||
        __builtin_add_overflow(body, CKPT_HEADER_BYTES + CKPT_TRAILER, &body))
        return 0;
    return body;
}

static int header_decode(const uint8_t *h, const char *file, ckfile *c, rs_error *err) {
    rs_kv_ckpt_info *o = &c->hi;
    if (memcmp(h, CKPT_MAGIC, 8) != 0)
        return rs_error_set(err, RS_EPROTO,
                            "%s: not a recbench checkpoint (no RSKVCKPT magic at offset 0)", file);
    uint32_t fmt = rs_get32(h + 8);
    if (fmt > RS_KV_CKPT_FORMAT)
        return rs_error_set(err, RS_ENOTSUP,
                            "%s: checkpoint format version %u is newer than this build reads "
                            "(up to %u); load it with a newer recbench",
                            file, fmt, RS_KV_CKPT_FORMAT);
    if (fmt == 0) return rs_error_set(err, RS_EPROTO, "%s: format version 0 at offset 8", file);
    uint32_t want = rs_get32(h + CKPT_HEADER_BYTES - 4),
             got = rs_crc32c(0, h, CKPT_HEADER_BYTES - 4);
    if (want != got)
        return rs_error_set(err, RS_EPROTO,
                            "%s: header checksum mismatch (offset 0..%u: stored 0x%08x, computed "
                            "0x%08x): the file is damaged",
                            file, CKPT_HEADER_BYTES - 1, want, got);
    memset(o, 0, sizeof *o);
    o->format = fmt;
    o->index_type = rs_get32(h + 16);
    o->value_size = rs_get32(h + 20);
    o->records = rs_get64(h + 24);
    o->shard_id = rs_get32(h + 32);
    o->num_shards = rs_get32(h + 36);
    memcpy(o->hash_method, h + 40, 16);
    o->hash_method[16] = 0;
    o->rows_per_block = rs_get32(h + 56);
    o->blocks = rs_get64(h + 64);
    o->created_unix_ns = rs_get64(h + 72);
    o->file_bytes = rs_get64(h + 80);
    /* every block but the last is full (as the writer makes them), so the counts fix the size */
    int bad = rs_get32(h + 12) != CKPT_HEADER_BYTES || o->value_size == 0 ||
              o->value_size > RS_KV_MAX_VALUE || o->rows_per_block == 0 ||
              o->rows_per_block > (1u << 24) ||
              o->blocks != (o->records + o->rows_per_block - 1) / o->rows_per_block;
    if (!bad) {
        uint64_t size = layout_bytes(o, &c->block_bytes, &c->last_rows);
        bad = size == 0 || size != o->file_bytes;
    }
    if (bad)
        return rs_error_set(err, RS_EPROTO,
                            "%s: inconsistent header (value_size %u, %u rows per block, %llu rows "
                            "in %llu blocks, %llu bytes)",
                            file, o->value_size, o->rows_per_block, (unsigned long long)o->records,
                            (unsigned long long)o->blocks, (unsigned long long)o->file_bytes);
    return 0;
}

/* Open `file`, check its header and that its size is the one the header announces. */
static int ck_open(const char *file, ckfile *c, rs_error *err) {
    memset(c, 0, sizeof *c);
    c->path = file;
    c->fd = -1;
    c->dfd = -1;
    uint8_t *h = malloc(CKPT_HEADER_BYTES);
    if (!h) return rs_error_set(err, RS_ENOMEM, "checkpoint header");
    int rc, fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = rs_error_errno(err, errno == ENOENT ? RS_ENOTFOUND : RS_EIO, errno,
                            "checkpoint %s: open", file);
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "checkpoint %s: stat", file);
        goto out;
    }
    /* magic and version are read first, so that a newer format is named even if shorter */
    if ((rc = read_at(fd, h, st.st_size < 12 ? (size_t)st.st_size : 12, 0, file, "header", err)))
        goto out;
    if (st.st_size >= 12 && memcmp(h, CKPT_MAGIC, 8) == 0 && rs_get32(h + 8) > RS_KV_CKPT_FORMAT) {
        rc = header_decode(h, file, c, err);
        goto out;
    }
    if ((rc = read_at(fd, h, CKPT_HEADER_BYTES, 0, file, "header", err)) ||
        (rc = header_decode(h, file, c, err)))
        goto out;
    if ((uint64_t)st.st_size != c->hi.file_bytes) {
        rc = rs_error_set(err, RS_EPROTO,
                          (uint64_t)st.st_size < c->hi.file_bytes
                              ? "%s: truncated at offset %llu (the header announces %llu bytes)"
                              : "%s: %llu bytes, but the header announces %llu",
                          file, (unsigned long long)st.st_size,
                          (unsigned long long)c->hi.file_bytes);
        goto out;
    }
    c->fd = fd;
    fd = -1;
out:
    if (fd >= 0) close(fd);
    free(h);
    return rc;
}

int rs_kv_checkpoint_read_header(const char *file, rs_kv_ckpt_info *info, rs_error *err) {
    ckfile c;
    int rc = ck_open(file, &c, err);
    if (c.fd >= 0) close(c.fd);
    if (rc == 0 && info) *info = c.hi;
    return rc;
}

static uint64_t block_offset(const ckfile *c, uint64_t b) {
    return CKPT_HEADER_BYTES + b * c->block_bytes;
}

/* Where block b's bytes begin in a buffer filled by block_fetch: a direct read starts at the
 * block's offset rounded down to CKPT_DIO_ALIGN. */
static size_t block_skew(const ckfile *c, uint64_t b) {
    return c->dfd >= 0 ? (size_t)(block_offset(c, b) % CKPT_DIO_ALIGN) : 0;
}

/* Read n bytes of block b at off into buf + block_skew: with direct I/O, the aligned pages that
 * hold them (the last read may end at the end of the file, short of a whole page); a direct read
 * that comes back short of n is finished through the buffered descriptor, so a file system that
 * splits direct reads oddly costs speed, never correctness. */
static int block_fetch(const ckfile *c, uint64_t b, uint8_t *buf, size_t n, rs_error *err) {
    uint64_t off = block_offset(c, b);
    if (c->dfd < 0) return read_at(c->fd, buf, n, off, c->path, "block", err);
    uint64_t a = off - off % CKPT_DIO_ALIGN;
    size_t need = (size_t)(off - a) + n, want = (need + CKPT_DIO_ALIGN - 1) & ~(CKPT_DIO_ALIGN - 1);
    size_t got = 0;
    while (got < need) {
        ssize_t r = pread(c->dfd, buf + got, want - got, (off_t)(a + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (size_t)r % CKPT_DIO_ALIGN) {
            if (r > 0) got += (size_t)r;
            break;
        }
        got += (size_t)r;
    }
    if (got >= need) return 0;
    return read_at(c->fd, buf + got, need - got, a + got, c->path, "block", err);
}

/* Read block b into buf (block_buf_bytes) and check its header and checksum; *blk is where the
 * block begins in buf. */
static int block_read(const ckfile *c, uint64_t b, uint8_t *buf, const uint8_t **blk,
                      rs_error *err) {
    uint64_t off = block_offset(c, b);
    uint32_t want_n = b + 1 < c->hi.blocks ? c->hi.rows_per_block : c->last_rows;
    size_t payload = (size_t)want_n * (8u + c->hi.value_size);
    int rc = block_fetch(c, b, buf, CKPT_BLOCK_HDR + payload, err);
    if (rc) return rc;
    buf += block_skew(c, b);
    *blk = buf;
    uint32_t n = rs_get32(buf + 4);
    if (rs_get32(buf) != CKPT_BLOCK_MAGIC || rs_get32(buf + 28) != rs_crc32c(0, buf, 28) ||
        rs_get64(buf + 8) != b || n != want_n)
        return rs_error_set(err, RS_EPROTO,
                            "%s: block %llu at offset %llu: damaged block header (checksum, "
                            "magic, index or row count %u)",
                            c->path, (unsigned long long)b, (unsigned long long)off, n);
    uint32_t want = rs_get32(buf + 16), got = rs_crc32c(0, buf + CKPT_BLOCK_HDR, payload);
    if (want != got)
        return rs_error_set(err, RS_EPROTO,
                            "%s: block %llu at offset %llu (payload bytes %llu..%llu): checksum "
                            "mismatch (stored 0x%08x, computed 0x%08x)",
                            c->path, (unsigned long long)b, (unsigned long long)off,
                            (unsigned long long)(off + CKPT_BLOCK_HDR),
                            (unsigned long long)(off + CKPT_BLOCK_HDR + payload - 1), want, got);
    return 0;
}

/* A buffer for one block: page-aligned, with room for the alignment skew of a direct read. */
static uint8_t *block_buf_new(const ckfile *c) {
    void *p = NULL;
    size_t n = (size_t)c->block_bytes + 2 * CKPT_DIO_ALIGN;
    return posix_memalign(&p, CKPT_DIO_ALIGN, n) == 0 ? p : NULL;
}

/* Ask the kernel to read blocks [lo, hi) now (POSIX_FADV_WILLNEED: its own read-ahead issues
 * small reads one after another, at a fraction of what the disk streams). Linux reads at most
 * read_ahead_kb per call, so the range is asked for in steps of 4 blocks (about 4 MiB). */
static void read_ahead(const ckfile *c, uint64_t lo, uint64_t hi) {
    if (c->dfd >= 0)
        return; /* direct reads bypass the page cache; the readers keep the disk busy */
    if (hi > c->hi.blocks) hi = c->hi.blocks;
    for (uint64_t b = lo; b < hi; b += 4) {
        uint64_t e = b + 4 < hi ? b + 4 : hi;
        uint64_t end = e == c->hi.blocks ? c->hi.file_bytes : block_offset(c, e);
        posix_fadvise(c->fd, (off_t)block_offset(c, b), (off_t)(end - block_offset(c, b)),
                      POSIX_FADV_WILLNEED);
    }
}

static int trailer_check(const ckfile *c, rs_error *err) {
    uint8_t tr[CKPT_TRAILER];
    uint64_t off = c->hi.file_bytes - CKPT_TRAILER;
    int rc = read_at(c->fd, tr, CKPT_TRAILER, off, c->path, "trailer", err);
    if (rc) return rc;
    if (memcmp(tr, CKPT_END_MAGIC, 8) != 0 || rs_get32(tr + 28) != rs_crc32c(0, tr, 28) ||
        rs_get64(tr + 8) != c->hi.blocks || rs_get64(tr + 16) != c->hi.records)
        return rs_error_set(err, RS_EPROTO,
                            "%s: damaged trailer at offset %llu (or its counts disagree with the "
                            "header's %llu rows in %llu blocks)",
                            c->path, (unsigned long long)off, (unsigned long long)c->hi.records,
                            (unsigned long long)c->hi.blocks);
    return 0;
}

/* ---- verify: CKPT_READERS threads claiming chunks of blocks ------------------------------- */

typedef struct vshared {
    const ckfile *c;
    uint64_t next;     /* the next unclaimed chunk */
    uint64_t low_fail; /* the lowest block found damaged so far */
} vshared;

typedef struct vworker {
    vshared *sh;
    uint64_t failed; /* this worker's damaged block, UINT64_MAX if none */
    int rc;
    rs_error err;
} vworker;

static void *verify_worker(void *arg) {
    vworker *w = arg;
    vshared *sh = w->sh;
    const ckfile *c = sh->c;
    uint64_t nchunks = (c->hi.blocks + CKPT_CHUNK - 1) / CKPT_CHUNK;
    w->failed = UINT64_MAX;
    uint8_t *buf = block_buf_new(c);
    const uint8_t *blk;
    if (!buf) {
        w->rc = rs_error_set(&w->err, RS_ENOMEM, "checkpoint block buffer (%llu bytes)",
                             (unsigned long long)c->block_bytes);
        w->failed = 0;
        return NULL;
    }
    for (;;) {
        uint64_t k = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED);
        if (k >= nchunks) break;
        uint64_t lo = k * CKPT_CHUNK, hi = lo + CKPT_CHUNK;
        if (hi > c->hi.blocks) hi = c->hi.blocks;
        if (lo > __atomic_load_n(&sh->low_fail, __ATOMIC_RELAXED)) break; /* a lower one failed */
        read_ahead(c, lo, hi + CKPT_CHUNK); /* this chunk and the one after it */
        for (uint64_t b = lo; b < hi && !w->rc; b++) {
            if ((w->rc = block_read(c, b, buf, &blk, &w->err)) == 0) continue;
            w->failed = b;
            uint64_t cur = __atomic_load_n(&sh->low_fail, __ATOMIC_RELAXED);
            while (b < cur && !__atomic_compare_exchange_n(&sh->low_fail, &cur, b, 0,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            }
        }
        if (w->rc) break;
    }
    free(buf);
    return NULL;
}

static int verify_blocks(const ckfile *c, rs_error *err) {
    vshared sh = {.c = c, .low_fail = UINT64_MAX};
    vworker w[CKPT_READERS];
    pthread_t tid[CKPT_READERS];
    int started[CKPT_READERS] = {0};
    memset(w, 0, sizeof w);
    for (int t = 0; t < CKPT_READERS; t++)
        w[t].sh = &sh;
    /* the helpers and the caller claim chunks until none is left; if a helper cannot start,
     * the others take its share */
    for (int t = 1; t < CKPT_READERS; t++)
        started[t] = pthread_create(&tid[t], NULL, verify_worker, &w[t]) == 0;
    verify_worker(&w[0]);
    for (int t = 1; t < CKPT_READERS; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    vworker *first = NULL;
    for (int t = 0; t < CKPT_READERS; t++)
        if (w[t].rc && (!first || w[t].failed < first->failed)) first = &w[t];
    if (!first) return 0;
    if (err) *err = first->err;
    return first->rc;
}

/* ---- load: blocks read into a ring by a helper and the inserter, inserted in order ---------- */

enum { SLOT_FREE = 0, SLOT_READING, SLOT_READY, SLOT_FAILED };

typedef struct lring {
    const ckfile *c;
    uint8_t *buf[CKPT_RING];
    const uint8_t *blk[CKPT_RING]; /* where the block begins in buf */
    int state[CKPT_RING];          /* of block `consumed + i`'s slot; under mu */
    uint64_t next;                 /* the next block nobody has claimed to read */
    uint64_t consumed; /* blocks inserted; block b may be read once b < consumed + CKPT_RING */
    int stop;          /* the inserter is done (finished or failed) */
    int rc;            /* the first read failure, at block fail_block */
    uint64_t fail_block;
    rs_error err;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} lring;

/* Under r->mu: claim block `next` for reading if its slot is free; returns the block or
 * UINT64_MAX. */
static uint64_t ring_claim(lring *r) {
    uint64_t b = r->next;
    if (r->stop || b >= r->c->hi.blocks || b >= r->consumed + CKPT_RING || b > r->fail_block)
        return UINT64_MAX;
    r->state[b % CKPT_RING] = SLOT_READING;
    r->next = b + 1;
    return b;
}

/* Called with r->mu held, returns with it held: read and check block b into its slot. */
static void ring_read(lring *r, uint64_t b) {
    pthread_mutex_unlock(&r->mu);
    rs_error e = {0};
    if (b % CKPT_CHUNK == 0) read_ahead(r->c, b + CKPT_CHUNK, b + 2 * CKPT_CHUNK);
    int rc = block_read(r->c, b, r->buf[b % CKPT_RING], &r->blk[b % CKPT_RING], &e);
    pthread_mutex_lock(&r->mu);
    r->state[b % CKPT_RING] = rc ? SLOT_FAILED : SLOT_READY;
    if (rc && b < r->fail_block) {
        r->fail_block = b;
        r->rc = rc;
        r->err = e;
    }
    pthread_cond_broadcast(&r->cv);
}

static void *ring_helper(void *arg) {
    lring *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        uint64_t b = ring_claim(r);
        if (b == UINT64_MAX) {
            if (r->next >= r->c->hi.blocks || r->next > r->fail_block) break;
            pthread_cond_wait(&r->cv, &r->mu); /* the ring is full */
            continue;
        }
        ring_read(r, b);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static int load_blocks(const ckfile *c, rs_kv *into, rs_error *err) {
    lring r = {.c = c, .fail_block = UINT64_MAX};
    int rc = 0, nbuf = 0, helpers = 0;
    for (; nbuf < CKPT_RING; nbuf++)
        if (!(r.buf[nbuf] = block_buf_new(c))) break;
    if (nbuf < CKPT_RING) {
        rc = rs_error_set(err, RS_ENOMEM, "checkpoint block buffers (%d x %llu bytes)", CKPT_RING,
                          (unsigned long long)c->block_bytes);
        goto out_free;
    }
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    read_ahead(c, 0, 2 * CKPT_CHUNK);
    pthread_t tid[CKPT_LOADERS];
    while (helpers < CKPT_LOADERS && pthread_create(&tid[helpers], NULL, ring_helper, &r) == 0)
        helpers++; /* with fewer (or none), the inserter reads more blocks itself */
    pthread_mutex_lock(&r.mu);
    for (uint64_t b = 0; b < c->hi.blocks; b++) {
        int *st = &r.state[b % CKPT_RING];
        /* the inserter reads the block itself when nobody has claimed it yet, so it never waits
         * for a helper that is not running */
        while (*st != SLOT_READY && *st != SLOT_FAILED) {
            uint64_t mine = *st == SLOT_FREE && r.next == b ? ring_claim(&r) : UINT64_MAX;
            if (mine != UINT64_MAX)
                ring_read(&r, mine);
            else
                pthread_cond_wait(&r.cv, &r.mu);
        }
        if (*st == SLOT_FAILED) break; /* the error is in r.err */
        pthread_mutex_unlock(&r.mu);
        const uint8_t *blk = r.blk[b % CKPT_RING];
        uint32_t n = rs_get32(blk + 4);
        const uint8_t *keys = blk + CKPT_BLOCK_HDR; /* 8-aligned after the 32-byte header */
        rc = rs_kv_batch_put(into, (const uint64_t *)keys, n, keys + (size_t)n * 8, NULL, err);
        if (rc) rs_error_prefix(err, "%s: block %llu: ", c->path, (unsigned long long)b);
        pthread_mutex_lock(&r.mu);
        if (rc) break;
        *st = SLOT_FREE;
        r.consumed = b + 1;
        pthread_cond_broadcast(&r.cv);
    }
    r.stop = 1;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    for (int i = 0; i < helpers; i++)
        pthread_join(tid[i], NULL);
    if (!rc && r.rc) {
        rc = r.rc;
        if (err) *err = r.err;
    }
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
out_free:
    for (int i = 0; i < nbuf; i++)
        free(r.buf[i]);
    return rc;
}

/* ---- the two entry points ------------------------------------------------------------------ */

/* Open shard shard_id's checkpoint in dir and check it against the expected shape; then verify
 * every block (into == NULL) or load them into `into`. */
static int read_impl(const char *dir, uint32_t shard_id, uint32_t num_shards, uint32_t value_size,
                     uint64_t capacity, rs_kv *into, int direct, rs_kv_ckpt_info *info,
                     rs_error *err) {
    char file[4096];
    ckfile c = {.fd = -1};
    int rc;
    if (!dir) return rs_error_set(err, RS_EINVAL, "dir must not be NULL");
    if ((rc = rs_kv_checkpoint_path(dir, shard_id, file, sizeof file, err))) return rc;
    uint64_t t0 = rs_now_ns();
    if ((rc = ck_open(file, &c, err))) goto out;
    const rs_kv_ckpt_info *hi = &c.hi;
    if (strcmp(hi->hash_method, RS_KV_CKPT_HASH_METHOD) != 0)
        rc = rs_error_set(err, RS_ENOTSUP,
                          "%s: keys were placed with shard hash '%s'; this server routes with "
                          "'%s'",
                          file, hi->hash_method, RS_KV_CKPT_HASH_METHOD);
    else if (hi->value_size != value_size)
        rc = rs_error_set(err, RS_EINVAL,
                          "%s: checkpoint has value_size %u, this shard has value_size %u", file,
                          hi->value_size, value_size);
    else if (hi->num_shards != num_shards)
        rc = rs_error_set(err, RS_EINVAL,
                          "%s: checkpoint was taken with %u shards (shard count), this "
                          "deployment has %u",
                          file, hi->num_shards, num_shards);
    else if (hi->shard_id != shard_id)
        rc = rs_error_set(err, RS_EINVAL, "%s: checkpoint holds shard id %u, this is shard id %u",
                          file, hi->shard_id, shard_id);
    else if (hi->records > capacity)
        rc = rs_error_set(err, RS_EFULL, "%s: %llu rows do not fit a capacity of %llu keys", file,
                          (unsigned long long)hi->records, (unsigned long long)capacity);
    if (rc) goto out;
    /* the trailer first: a file cut and padded back to its size is refused before any insert */
    if ((rc = trailer_check(&c, err))) goto out;
    /* direct reads keep every row 8-aligned in its buffer only if blocks are 8-byte multiples;
     * a file system without O_DIRECT (or such a file) is read buffered */
    if (direct && c.block_bytes % 8 == 0) c.dfd = open(file, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (c.hi.blocks) rc = into ? load_blocks(&c, into, err) : verify_blocks(&c, err);
    if (rc) goto out;
    c.hi.seconds = (double)(rs_now_ns() - t0) / 1e9;
    c.hi.direct_io = c.dfd >= 0;
    if (info) *info = c.hi;
out:
    if (c.fd >= 0) close(c.fd);
    if (c.dfd >= 0) close(c.dfd);
    return rc;
}

int rs_kv_checkpoint_verify(const char *dir, uint32_t shard_id, uint32_t num_shards,
                            uint32_t value_size, uint64_t capacity, rs_kv_ckpt_info *info,
                            rs_error *err) {
    return read_impl(dir, shard_id, num_shards, value_size, capacity, NULL, 0, info, err);
}

int rs_kv_checkpoint_load(const char *dir, uint32_t shard_id, uint32_t num_shards, rs_kv *into,
                          rs_kv_ckpt_info *info, rs_error *err) {
    if (!into) return rs_error_set(err, RS_EINVAL, "into must not be NULL");
    return read_impl(dir, shard_id, num_shards, into->value_size, into->capacity, into, 0, info,
                     err);
}

int rs_kv_checkpoint_load_once(const char *dir, uint32_t shard_id, uint32_t num_shards, rs_kv *into,
                               rs_kv_ckpt_info *info, rs_error *err) {
    if (!into) return rs_error_set(err, RS_EINVAL, "into must not be NULL");
    return read_impl(dir, shard_id, num_shards, into->value_size, into->capacity, into, 1, info,
                     err);
}
