/*
 * ps_shard.c — the shard handler: validates one decoded PS request and executes it on the shard's
 * rs_kv engine. Every transport calls rs_ps_shard_handle from its worker threads.
 *
 * Validation (each failure is an error response with a readable reason, never a dropped
 * connection): known op; request shard == this shard; every key hashes to this shard
 * (rs_shard_of); num_keys <= max_keys_per_request; value_size 0 or the server's; rows of exactly
 * num_keys * value_size bytes for PUT/UPDATE and none for GET; a known COMMAND name.
 *
 * Invariants: the hot path writes only the caller's per-thread counter block (64-byte aligned, one
 * per thread_slot). "clear" must not run concurrently with writers (rs_kv_clear's contract), so
 * every request marks itself active in its own block and checks the `clearing` flag; clear sets
 * the flag and waits until no block is active. Keys and deltas may be unaligned views into a
 * network buffer: they are copied to aligned scratch before reaching the engine.
 *
 * Checkpoints: "save <dir>" / "load <dir>" run on a job thread of the shard (one at a time), so
 * the transport thread that received the command goes back to serving; "checkpoint_status" tells
 * how the job ended. A save scans the engine while requests continue (it is marked active like a
 * request, so clear waits for it). A load verifies the whole file, then takes the same exclusive
 * section as clear to replace the rows.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/clock.h"
#include "recstore/hash.h"
#include "recstore/kv_checkpoint.h"
#include "recstore/ps.h"

#define RS_PS_SHARD_SLOTS  64
#define RS_PS_SCRATCH_KEYS 1024

typedef struct counter_block {
    rs_ps_shard_stats st;
    uint64_t active; /* requests of this slot inside the engine (atomic) */
} __attribute__((aligned(64))) counter_block;

struct rs_ps_shard {
    counter_block counters[RS_PS_SHARD_SLOTS];
    rs_kv *kv;
    uint32_t shard_id, num_shards, value_size, max_keys, server_threads;
    uint32_t clearing; /* atomic flag */
    pthread_mutex_t clear_lock;
    /* the background checkpoint job ("save <dir>" / "load <dir>"): one at a time per shard;
     * job_lock guards every job_* field, the thread only runs rs_ps_shard_save/load */
    pthread_mutex_t job_lock;
    pthread_t job_thread;
    int job_joinable, job_save;
    uint32_t job_state; /* JOB_* */
    char job_dir[4096];
    char ckpt_root[4096]; /* realpath of the checkpoint root; "" = commands refused */
    char job_reply[1024];
};

enum { JOB_IDLE = 0, JOB_RUNNING = 1, JOB_DONE = 2, JOB_FAILED = 3 };

/* The root must exist (ps_server creates it); kept as its real path for the prefix checks. */
static int set_ckpt_root(rs_ps_shard *s, const char *root, rs_error *err) {
    char buf[PATH_MAX];
    if (!realpath(root, buf) || strlen(buf) >= sizeof s->ckpt_root)
        return rs_error_errno(err, RS_EINVAL, errno, "checkpoint_root %s", root);
    snprintf(s->ckpt_root, sizeof s->ckpt_root, "%s", buf);
    return 0;
}

int rs_ps_shard_open(const rs_ps_shard_config *cfg, rs_ps_shard **out, rs_error *err) {
    int rc;
    *out = NULL;
    if (cfg->num_shards == 0) return rs_error_set(err, RS_EINVAL, "num_shards must be >= 1");
    if (cfg->shard_id >= cfg->num_shards)
        return rs_error_set(err, RS_EINVAL, "shard id %u is out of range for %u shards",
                            cfg->shard_id, cfg->num_shards);
    if (cfg->kv.value_size == 0 || cfg->kv.value_size % 4)
        return rs_error_set(err, RS_EINVAL,
                            "value_size %u must be a positive multiple of 4 (float32 rows)",
                            cfg->kv.value_size);
    if (cfg->max_keys_per_request == 0)
        return rs_error_set(err, RS_EINVAL, "max_keys_per_request must be >= 1");
    rs_ps_shard *s;
    if (posix_memalign((void **)&s, 64, sizeof *s)) return rs_error_set(err, RS_ENOMEM, "shard");
    memset(s, 0, sizeof *s);
    s->shard_id = cfg->shard_id;
    s->num_shards = cfg->num_shards;
    s->value_size = cfg->kv.value_size;
    s->max_keys = cfg->max_keys_per_request;
    s->server_threads = cfg->server_threads;
    if (cfg->checkpoint_root && (rc = set_ckpt_root(s, cfg->checkpoint_root, err))) goto fail_free;
    if ((rc = pthread_mutex_init(&s->clear_lock, NULL))) {
        rc = rs_error_errno(err, RS_ENOMEM, rc, "shard mutex");
        goto fail_free;
    }
    if ((rc = pthread_mutex_init(&s->job_lock, NULL))) {
        pthread_mutex_destroy(&s->clear_lock);
        rc = rs_error_errno(err, RS_ENOMEM, rc, "shard mutex");
        goto fail_free;
    }
    if ((rc = rs_kv_open(&cfg->kv, &s->kv, err))) {
        rs_error_prefix(err, "shard %u", cfg->shard_id);
        goto fail_mutex;
    }
    *out = s;
    return 0;
fail_mutex:
    pthread_mutex_destroy(&s->job_lock);
    pthread_mutex_destroy(&s->clear_lock);
fail_free:
    free(s);
    return rc;
}

void rs_ps_shard_close(rs_ps_shard *s) {
    if (!s) return;
    if (s->job_joinable) pthread_join(s->job_thread, NULL); /* a checkpoint finishes first */
    rs_kv_close(s->kv);
    pthread_mutex_destroy(&s->job_lock);
    pthread_mutex_destroy(&s->clear_lock);
    free(s);
}

uint32_t rs_ps_shard_value_size(const rs_ps_shard *s) {
    return s->value_size;
}

uint32_t rs_ps_shard_id(const rs_ps_shard *s) {
    return s->shard_id;
}

rs_kv *rs_ps_shard_kv(rs_ps_shard *s) {
    return s->kv;
}

uint32_t rs_ps_shard_max_keys(const rs_ps_shard *s) {
    return s->max_keys;
}

size_t rs_ps_shard_reply_rows_bytes(const rs_ps_shard *s, const rs_ps_request *req) {
    if (req->op != RS_PS_GET || req->num_keys > s->max_keys) return 0;
    return (size_t)req->num_keys * s->value_size;
}

void rs_ps_shard_get_stats(const rs_ps_shard *s, rs_ps_shard_stats *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < RS_PS_SHARD_SLOTS; i++) {
        const rs_ps_shard_stats *c = &s->counters[i].st;
        out->handled_get += __atomic_load_n(&c->handled_get, __ATOMIC_RELAXED);
        out->handled_put += __atomic_load_n(&c->handled_put, __ATOMIC_RELAXED);
        out->handled_update += __atomic_load_n(&c->handled_update, __ATOMIC_RELAXED);
        out->handled_command += __atomic_load_n(&c->handled_command, __ATOMIC_RELAXED);
        out->handled_error += __atomic_load_n(&c->handled_error, __ATOMIC_RELAXED);
        out->keys_get += __atomic_load_n(&c->keys_get, __ATOMIC_RELAXED);
        out->keys_put += __atomic_load_n(&c->keys_put, __ATOMIC_RELAXED);
        out->keys_update += __atomic_load_n(&c->keys_update, __ATOMIC_RELAXED);
        out->keys_found += __atomic_load_n(&c->keys_found, __ATOMIC_RELAXED);
    }
}

/* Counters are written by one thread slot (plain adds through relaxed atomics so readers in
 * other threads see whole values). */
static inline void bump(uint64_t *c, uint64_t n) {
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static int fail(rs_ps_response *resp, counter_block *cb, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(rs_ps_response *resp, counter_block *cb, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(resp->error, sizeof resp->error, fmt, ap);
    va_end(ap);
    resp->status = status;
    resp->rows_len = 0;
    resp->num_found = 0;
    bump(&cb->st.handled_error, 1);
    return 0;
}

static void enter(rs_ps_shard *s, counter_block *cb) {
    for (;;) {
        __atomic_add_fetch(&cb->active, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&s->clearing, __ATOMIC_SEQ_CST)) return;
        __atomic_sub_fetch(&cb->active, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&s->clearing, __ATOMIC_ACQUIRE))
            sched_yield();
    }
}

static void leave(counter_block *cb) {
    __atomic_sub_fetch(&cb->active, 1, __ATOMIC_RELEASE);
}

/* Exclusive section for clear and the swap of a checkpoint load: called outside enter()/leave();
 * concurrent exclusive sections serialise on clear_lock, and no thread inside one is ever counted
 * as active, so they cannot wait for each other. */
static void exclusive_begin(rs_ps_shard *s) {
    pthread_mutex_lock(&s->clear_lock);
    __atomic_store_n(&s->clearing, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < RS_PS_SHARD_SLOTS; i++) {
        while (__atomic_load_n(&s->counters[i].active, __ATOMIC_SEQ_CST) > 0)
            sched_yield();
    }
}

static void exclusive_end(rs_ps_shard *s) {
    __atomic_store_n(&s->clearing, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&s->clear_lock);
}

static int do_clear(rs_ps_shard *s, uint64_t *removed) {
    exclusive_begin(s);
    *removed = rs_kv_count(s->kv);
    int rc = rs_kv_clear(s->kv);
    exclusive_end(s);
    return rc;
}

void rs_ps_shard_enter(rs_ps_shard *s, unsigned thread_slot) {
    enter(s, &s->counters[thread_slot % RS_PS_SHARD_SLOTS]);
}

void rs_ps_shard_leave(rs_ps_shard *s, unsigned thread_slot) {
    leave(&s->counters[thread_slot % RS_PS_SHARD_SLOTS]);
}

void rs_ps_shard_count(rs_ps_shard *s, unsigned thread_slot, rs_ps_op op, uint64_t keys,
                       uint64_t found, int error) {
    rs_ps_shard_stats *st = &s->counters[thread_slot % RS_PS_SHARD_SLOTS].st;
    if (error) {
        bump(&st->handled_error, 1);
        return;
    }
    switch (op) {
    case RS_PS_GET:
        bump(&st->handled_get, 1);
        bump(&st->keys_get, keys);
        bump(&st->keys_found, found);
        break;
    case RS_PS_PUT:
        bump(&st->handled_put, 1);
        bump(&st->keys_put, keys);
        break;
    case RS_PS_UPDATE:
        bump(&st->handled_update, 1);
        bump(&st->keys_update, keys);
        break;
    case RS_PS_COMMAND: bump(&st->handled_command, 1); break;
    }
}

int rs_ps_shard_clear(rs_ps_shard *s, uint64_t *removed) {
    return do_clear(s, removed);
}

int rs_ps_shard_save(rs_ps_shard *s, const char *dir, char *reply, size_t cap, rs_error *err) {
    rs_kv_ckpt_info info;
    counter_block *cb = &s->counters[RS_PS_SHARD_SLOTS - 1];
    enter(s, cb); /* a concurrent clear or load waits for the scan */
    int rc = rs_kv_checkpoint_save(s->kv, dir, s->shard_id, s->num_shards, &info, err);
    leave(cb);
    if (rc) return rs_error_prefix(err, "shard %u: save: ", s->shard_id);
    char file[4096];
    rs_kv_checkpoint_path(dir, s->shard_id, file, sizeof file, NULL);
    snprintf(reply, cap, "saved %llu rows to %s (%llu bytes, %.3f s)",
             (unsigned long long)info.records, file, (unsigned long long)info.file_bytes,
             info.seconds);
    return 0;
}

/* An empty shard (a server started with --load_checkpoint, or cleared) is loaded in one pass with
 * requests held off: every block is checked before its rows go in, and a failure clears the rows
 * loaded so far, so the shard is empty again, as it was, and nobody saw them.
 * A shard holding rows has the whole file verified first, with requests served, so that a damaged,
 * truncated or mismatched checkpoint is refused with the shard as it was; then, with every request
 * held off, the shard is cleared and the file loaded again into it (from the page cache,
 * normally), checking every block once more. A second pass instead of a private staging engine:
 * no second copy of the shard in memory, and the shard keeps its own engine object (the RC
 * transport registered its value memory). Only a file changed or unreadable between the two
 * passes can leave the shard partly loaded; the error says so. */
static int load_empty(rs_ps_shard *s, const char *dir, char *reply, size_t cap, rs_error *err) {
    rs_kv_ckpt_info li;
    int rc = rs_kv_checkpoint_load_once(dir, s->shard_id, s->num_shards, s->kv, &li, err);
    if (rc) {
        if (rs_kv_clear(s->kv) != 0)
            return rs_error_prefix(err,
                                   "shard %u: load failed and the %llu rows it inserted could not "
                                   "be cleared: ",
                                   s->shard_id, (unsigned long long)rs_kv_count(s->kv));
        return rs_error_prefix(err,
                               "shard %u: load refused, shard unchanged (empty): ", s->shard_id);
    }
    char file[4096];
    rs_kv_checkpoint_path(dir, s->shard_id, file, sizeof file, NULL);
    snprintf(reply, cap,
             "loaded %llu rows from %s into the empty shard (read, verified and inserted in one "
             "pass in %.3f s, %s I/O)",
             (unsigned long long)rs_kv_count(s->kv), file, li.seconds,
             li.direct_io ? "direct" : "buffered");
    return 0;
}

int rs_ps_shard_load(rs_ps_shard *s, const char *dir, char *reply, size_t cap, rs_error *err) {
    rs_kv_ckpt_info vi, li;
    exclusive_begin(s);
    if (rs_kv_count(s->kv) == 0) {
        int rc = load_empty(s, dir, reply, cap, err);
        exclusive_end(s);
        return rc;
    }
    exclusive_end(s);
    int rc = rs_kv_checkpoint_verify(dir, s->shard_id, s->num_shards, s->value_size,
                                     rs_kv_capacity(s->kv), &vi, err);
    if (rc) return rs_error_prefix(err, "shard %u: load refused, shard unchanged: ", s->shard_id);
    uint64_t t0 = rs_now_ns();
    exclusive_begin(s);
    rc = rs_kv_clear(s->kv);
    if (rc == 0) rc = rs_kv_checkpoint_load(dir, s->shard_id, s->num_shards, s->kv, &li, err);
    uint64_t now_keys = rs_kv_count(s->kv);
    exclusive_end(s);
    if (rc)
        return rs_error_prefix(err,
                               "shard %u: load: the file verified, then failed while loading "
                               "(changed or unreadable since?); the shard holds %llu of its %llu "
                               "rows: ",
                               s->shard_id, (unsigned long long)now_keys,
                               (unsigned long long)vi.records);
    char file[4096];
    rs_kv_checkpoint_path(dir, s->shard_id, file, sizeof file, NULL);
    snprintf(reply, cap,
             "loaded %llu rows from %s (read and verified in %.3f s, swapped in %.3f s)",
             (unsigned long long)now_keys, file, vi.seconds, (double)(rs_now_ns() - t0) / 1e9);
    return 0;
}

int rs_ps_shard_checkpoint_dir(const rs_ps_shard *s, const char *d, size_t len, char *out,
                               size_t cap, char *why, size_t why_cap) {
    if (!s->ckpt_root[0]) {
        snprintf(why, why_cap,
                 "checkpoint commands are off on shard %u: start the server with "
                 "--checkpoint_root DIR",
                 s->shard_id);
        return RS_ENOTSUP;
    }
    size_t rl = strlen(s->ckpt_root);
    int abs = len && d[0] == '/';
    int bad = len == 0 || memchr(d, 0, len) || rl + 1 + len >= cap;
    for (size_t i = 0; !bad && i + 1 < len + 1; i++) /* a ".." component anywhere */
        if (d[i] == '.' && i + 1 < len && d[i + 1] == '.' && (i == 0 || d[i - 1] == '/') &&
            (i + 2 == len || d[i + 2] == '/'))
            bad = 1;
    if (!bad && abs && !(strncmp(d, s->ckpt_root, rl) == 0 && (len == rl || d[rl] == '/'))) bad = 1;
    if (bad) {
        snprintf(why, why_cap,
                 "command directory '%.*s' must be a path inside the checkpoint root %s "
                 "(relative to it, or absolute under it; no '..')",
                 (int)(len > 200 ? 200 : len), d, s->ckpt_root);
        return RS_EINVAL;
    }
    if (abs)
        snprintf(out, cap, "%.*s", (int)len, d);
    else
        snprintf(out, cap, "%s/%.*s", s->ckpt_root, (int)len, d);
    return 0;
}

static void *job_main(void *arg) {
    rs_ps_shard *s = arg;
    char reply[1024];
    rs_error err = {0};
    int rc = s->job_save ? rs_ps_shard_save(s, s->job_dir, reply, sizeof reply, &err)
                         : rs_ps_shard_load(s, s->job_dir, reply, sizeof reply, &err);
    pthread_mutex_lock(&s->job_lock);
    snprintf(s->job_reply, sizeof s->job_reply, "%s", rc ? err.msg : reply);
    __atomic_store_n(&s->job_state, rc ? JOB_FAILED : JOB_DONE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->job_lock);
    return NULL;
}

/* Start a checkpoint job on its own thread, so that no transport thread is held for its length
 * (a GET of another connection of the same transport thread would wait otherwise). */
static int job_start(rs_ps_shard *s, int save, const char *dir, char *reply, size_t cap) {
    pthread_mutex_lock(&s->job_lock);
    if (s->job_state == JOB_RUNNING) {
        snprintf(reply, cap, "a checkpoint %s of %s is already running on shard %u",
                 s->job_save ? "save" : "load", s->job_dir, s->shard_id);
        pthread_mutex_unlock(&s->job_lock);
        return RS_EBUSY;
    }
    if (s->job_joinable) pthread_join(s->job_thread, NULL);
    s->job_joinable = 0;
    s->job_save = save;
    snprintf(s->job_dir, sizeof s->job_dir, "%s", dir);
    s->job_reply[0] = 0;
    s->job_state = JOB_RUNNING;
    int rc = pthread_create(&s->job_thread, NULL, job_main, s);
    if (rc) {
        s->job_state = JOB_IDLE;
        snprintf(reply, cap, "cannot start the checkpoint thread: %s", strerror(rc));
    } else {
        s->job_joinable = 1;
        snprintf(reply, cap, "started %s %s", save ? "save" : "load", dir);
    }
    pthread_mutex_unlock(&s->job_lock);
    return rc ? RS_ENOMEM : 0;
}

/* "checkpoint_status": idle | running: save DIR | done: <reply> | failed: <error>. */
static void job_status(rs_ps_shard *s, char *reply, size_t cap) {
    pthread_mutex_lock(&s->job_lock);
    switch (s->job_state) {
    case JOB_RUNNING:
        snprintf(reply, cap, "running: %s %s", s->job_save ? "save" : "load", s->job_dir);
        break;
    case JOB_DONE: snprintf(reply, cap, "done: %s", s->job_reply); break;
    case JOB_FAILED: snprintf(reply, cap, "failed: %s", s->job_reply); break;
    default: snprintf(reply, cap, "idle"); break;
    }
    pthread_mutex_unlock(&s->job_lock);
}

uint64_t rs_ps_reply_u64(const char *reply, const char *key) {
    size_t n = strlen(key);
    for (const char *m = reply; (m = strstr(m, key)) != NULL; m += n)
        if ((m == reply || m[-1] == ' ') && m[n] == '=') return strtoull(m + n + 1, NULL, 10);
    return 0;
}

static int handle_command(rs_ps_shard *s, const rs_ps_request *req, rs_ps_response *resp,
                          counter_block *cb) {
    const char *c = req->command ? req->command : "";
    size_t n = req->command_len;
#define IS(name) (n == sizeof(name) - 1 && memcmp(c, name, n) == 0)
    if (IS("ping")) {
        snprintf(resp->reply, sizeof resp->reply, "pong");
    } else if (IS("ready")) {
        snprintf(resp->reply, sizeof resp->reply, "ready");
    } else if (IS("stats")) {
        rs_ps_shard_stats st;
        enter(s, cb);
        rs_ps_shard_get_stats(s, &st);
        snprintf(resp->reply, sizeof resp->reply,
                 "shard=%u num_shards=%u value_size=%u index_type=%s capacity=%llu keys=%llu "
                 "max_keys_per_request=%u server_threads=%u handled_get=%llu handled_put=%llu "
                 "handled_update=%llu "
                 "handled_command=%llu handled_error=%llu keys_get=%llu keys_put=%llu "
                 "keys_update=%llu keys_found=%llu",
                 s->shard_id, s->num_shards, s->value_size,
                 rs_kv_index_type_name(rs_kv_get_index_type(s->kv)),
                 (unsigned long long)rs_kv_capacity(s->kv), (unsigned long long)rs_kv_count(s->kv),
                 s->max_keys, s->server_threads, (unsigned long long)st.handled_get,
                 (unsigned long long)st.handled_put, (unsigned long long)st.handled_update,
                 (unsigned long long)st.handled_command, (unsigned long long)st.handled_error,
                 (unsigned long long)st.keys_get, (unsigned long long)st.keys_put,
                 (unsigned long long)st.keys_update, (unsigned long long)st.keys_found);
        leave(cb);
    } else if (IS("clear")) {
        uint64_t removed = 0;
        int rc = do_clear(s, &removed);
        if (rc) return fail(resp, cb, RS_PS_INTERNAL, "clear failed: %s", rs_strerror(rc));
        snprintf(resp->reply, sizeof resp->reply, "cleared %llu", (unsigned long long)removed);
    } else if ((n > 5 && (memcmp(c, "save ", 5) == 0 || memcmp(c, "load ", 5) == 0)) ||
               IS("save") || IS("load")) {
        char dir[4096], why[512];
        int save = c[0] == 's';
        if (n <= 5)
            return fail(resp, cb, RS_PS_INVALID_PAYLOAD,
                        "command '%s' needs a directory: '%s <dir>' (inside the server's "
                        "--checkpoint_root)",
                        save ? "save" : "load", save ? "save" : "load");
        size_t skip = 4;
        while (skip < n && c[skip] == ' ')
            skip++;
        if (rs_ps_shard_checkpoint_dir(s, c + skip, n - skip, dir, sizeof dir, why, sizeof why))
            return fail(resp, cb, RS_PS_INVALID_PAYLOAD, "%s", why);
        if (job_start(s, save, dir, resp->reply, sizeof resp->reply))
            return fail(resp, cb, RS_PS_CHECKPOINT, "%s", resp->reply);
    } else if (IS("checkpoint_status")) {
        job_status(s, resp->reply, sizeof resp->reply);
    } else if (IS("verify")) { /* the full consistency check needs writers held off */
        rs_error err = {0};
        exclusive_begin(s);
        int rc = rs_kv_verify(s->kv, resp->reply, sizeof resp->reply, &err);
        exclusive_end(s);
        if (rc)
            return fail(resp, cb, RS_PS_INTERNAL, "shard %u: verify failed: %s", s->shard_id,
                        err.msg);
    } else {
        return fail(resp, cb, RS_PS_INVALID_PAYLOAD,
                    "unknown command '%.*s' (expected ping, ready, stats, clear, verify, save "
                    "<dir>, load <dir> or checkpoint_status)",
                    (int)(n > 64 ? 64 : n), c);
    }
#undef IS
    bump(&cb->st.handled_command, 1);
    return 0;
}

int rs_ps_shard_handle(rs_ps_shard *s, const rs_ps_request *req, rs_ps_response *resp,
                       void *rows_out, size_t rows_cap, unsigned thread_slot) {
    unsigned slot = thread_slot % RS_PS_SHARD_SLOTS;
    counter_block *cb = &s->counters[slot];
    uint64_t key_buf[RS_PS_SCRATCH_KEYS];
    uint64_t *keys = NULL;
    void *heap = NULL;
    int ret = 0;

    resp->status = RS_PS_OK;
    resp->value_size = s->value_size;
    resp->num_found = 0;
    resp->rows = NULL;
    resp->rows_len = 0;
    resp->error[0] = 0;
    resp->reply[0] = 0;

    if (req->op < RS_PS_GET || req->op > RS_PS_COMMAND)
        return fail(resp, cb, RS_PS_UNKNOWN_METHOD, "unknown operation %d", (int)req->op);
    if (req->shard != s->shard_id)
        return fail(resp, cb, RS_PS_WRONG_SHARD, "request for shard %u reached shard %u of %u",
                    req->shard, s->shard_id, s->num_shards);
    if (req->op == RS_PS_COMMAND) return handle_command(s, req, resp, cb);
    if (req->value_size && req->value_size != s->value_size)
        return fail(resp, cb, RS_PS_VALUE_SIZE_MISMATCH,
                    "request value_size %u differs from the server's %u", req->value_size,
                    s->value_size);
    if (req->num_keys > s->max_keys)
        return fail(resp, cb, RS_PS_BATCH_TOO_LARGE,
                    "%u keys in one request; this server accepts at most %u "
                    "(max_keys_per_request)",
                    req->num_keys, s->max_keys);
    if (req->num_keys && !req->keys)
        return fail(resp, cb, RS_PS_INVALID_PAYLOAD, "%u keys announced but no key bytes",
                    req->num_keys);
    size_t want_rows = (size_t)req->num_keys * s->value_size;
    if (req->op == RS_PS_GET) {
        if (req->rows_len)
            return fail(resp, cb, RS_PS_INVALID_PAYLOAD, "Get carries %zu bytes of rows",
                        req->rows_len);
        if (rows_cap < want_rows)
            return fail(resp, cb, RS_PS_INTERNAL, "transport gave %zu bytes for %zu bytes of rows",
                        rows_cap, want_rows);
    } else if (req->rows_len != want_rows) {
        return fail(resp, cb, RS_PS_INVALID_PAYLOAD,
                    "%s of %u keys carries %zu bytes of rows; expected %u x %u = %zu",
                    rs_ps_op_method(req->op), req->num_keys, req->rows_len, req->num_keys,
                    s->value_size, want_rows);
    }
    if (req->num_keys == 0) {
        bump(req->op == RS_PS_GET   ? &cb->st.handled_get
             : req->op == RS_PS_PUT ? &cb->st.handled_put
                                    : &cb->st.handled_update,
             1);
        return 0;
    }

    /* aligned key copy; keys may sit at any offset of a network buffer */
    if (req->num_keys <= RS_PS_SCRATCH_KEYS) {
        keys = key_buf;
    } else {
        heap = malloc((size_t)req->num_keys * 8);
        if (!heap)
            return fail(resp, cb, RS_PS_INTERNAL, "out of memory for %u keys", req->num_keys);
        keys = heap;
    }
    memcpy(keys, req->keys, (size_t)req->num_keys * 8);
    if (s->num_shards > 1) {
        for (uint32_t i = 0; i < req->num_keys; i++) {
            uint32_t sh = rs_shard_of(keys[i], s->num_shards);
            if (sh != s->shard_id) {
                fail(resp, cb, RS_PS_WRONG_SHARD,
                     "key %llu (index %u) belongs to shard %u, not shard %u of %u",
                     (unsigned long long)keys[i], i, sh, s->shard_id, s->num_shards);
                goto out;
            }
        }
    }

    rs_error err = {0};
    enter(s, cb);
    switch (req->op) {
    case RS_PS_GET: {
        size_t found = 0;
        int rc = rs_kv_batch_get_flat(s->kv, keys, req->num_keys, rows_out, NULL, &found);
        leave(cb);
        if (rc) {
            fail(resp, cb, RS_PS_INTERNAL, "batch_get_flat failed: %s", rs_strerror(rc));
            break;
        }
        resp->rows = rows_out;
        resp->rows_len = want_rows;
        resp->num_found = (uint32_t)found;
        bump(&cb->st.handled_get, 1);
        bump(&cb->st.keys_get, req->num_keys);
        bump(&cb->st.keys_found, found);
        break;
    }
    case RS_PS_PUT: {
        size_t done = 0;
        int rc = rs_kv_batch_put(s->kv, keys, req->num_keys, req->rows, &done, &err);
        leave(cb);
        if (rc) {
            fail(resp, cb, rc == RS_EFULL ? RS_PS_CAPACITY : RS_PS_INTERNAL,
                 "put stored %zu of %u rows: %s", done, req->num_keys,
                 err.msg[0] ? err.msg : rs_strerror(rc));
            break;
        }
        bump(&cb->st.handled_put, 1);
        bump(&cb->st.keys_put, req->num_keys);
        break;
    }
    case RS_PS_UPDATE: {
        const float *deltas = (const float *)req->rows;
        void *dheap = NULL;
        if ((uintptr_t)req->rows % sizeof(float)) {
            dheap = malloc(req->rows_len);
            if (!dheap) {
                leave(cb);
                fail(resp, cb, RS_PS_INTERNAL, "out of memory for %zu bytes of deltas",
                     req->rows_len);
                break;
            }
            memcpy(dheap, req->rows, req->rows_len);
            deltas = dheap;
        }
        int rc = rs_kv_update_add_f32(s->kv, keys, req->num_keys, deltas, &err);
        leave(cb);
        free(dheap);
        if (rc) {
            fail(resp, cb, rc == RS_EFULL ? RS_PS_CAPACITY : RS_PS_INTERNAL, "update failed: %s",
                 err.msg[0] ? err.msg : rs_strerror(rc));
            break;
        }
        bump(&cb->st.handled_update, 1);
        bump(&cb->st.keys_update, req->num_keys);
        break;
    }
    default: leave(cb); break;
    }
out:
    free(heap);
    return ret;
}
