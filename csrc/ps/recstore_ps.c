/*
 * recstore_ps.c — RecStore's ParameterService semantics on one recbench shard, independent of the
 * transport (gRPC recstoreps.ParameterService, baidu_std recstoreps_brpc.ParameterService).
 *
 *   GetParameter        keys -> one row block in request order, misses as dim-0 items
 *   PutParameter        row block -> rows stored (every item must have the shard's dim)
 *   UpdateParameter     gradient block -> optimizer step for a table registered on this shard,
 *                       every key carrying the table's tag in its top 8 bits (tag << 56):
 *                       SGD through the engine's atomic row add; AdaGrad and RowWiseAdaGrad
 *                       read, step and write the rows and their accumulator rows (tag + 1)
 *                       under the shard's optimizer lock
 *   InitEmbeddingTable  table name + JSON config -> tag (table_id x tensors per table: SGD 1,
 *                       AdaGrad 2; 0..255)
 *   Command             CLEAR_PS, LOAD_FAKE_DATA, DUMP_FAKE_DATA; SAVE_CHECKPOINT /
 *                       LOAD_CHECKPOINT (recbench's checkpoint files, inside the shard's
 *                       checkpoint_root); RELOAD_PS is refused (no RecStore model checkpoints)
 *
 * Where RecStore's own server aborts (zero keys, a malformed RELOAD_PS, an unknown command,
 * malformed blocks) this answers an error and keeps serving. Rows have the shard's fixed width
 * (value_size / 4 floats). Key ownership is not checked (RecStore's servers do not either: the
 * client routes by CityHash64 or simple_mod, recstore_wire.h).
 *
 * Invariants: engine calls run inside rs_ps_shard_enter/leave (the clear guard); per-thread
 * scratch (aligned keys, rows, found flags) is indexed by thread_slot, which transports give one
 * thread each, so the hot path takes no lock and allocates only when a thread first needs it.
 * The table registry is append-only under a rwlock (Init writes, Update reads).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recstore/recstore_wire.h"

#define RSPS_CHUNK      256 /* keys per engine call */
#define RSPS_SLOTS      64
#define RSPS_MAX_TABLES 256
#define RSPS_NAME_MAX   128

#define RSPS_TAG_SHIFT 56
#define RSPS_KEY_MASK  ((1ull << RSPS_TAG_SHIFT) - 1)
#define RSPS_DUP_SLOTS (2 * RSPS_CHUNK) /* open-addressing table finding repeated keys */

typedef struct rsps_table {
    char name[RSPS_NAME_MAX];
    int64_t dim, num, table_id, tag;
} rsps_table;

typedef struct rsps_scratch {
    uint64_t keys[RSPS_CHUNK];
    uint8_t found[RSPS_CHUNK];
    float *rows; /* RSPS_CHUNK * dim */
    /* AdaGrad optimizers only: accumulator keys and rows, gradients, first index of each key */
    uint64_t akeys[RSPS_CHUNK];
    float *acc, *grad;
    int16_t first[RSPS_CHUNK];
} rsps_scratch;

struct rs_rsps {
    rs_ps_shard *shard;
    uint32_t dim;
    rs_rsps_optimizer opt;
    rsps_scratch *scratch[RSPS_SLOTS];
    pthread_mutex_t opt_lock; /* AdaGrad's read-step-write of rows and accumulators */
    pthread_rwlock_t lock;
    rsps_table tables[RSPS_MAX_TABLES];
    unsigned ntables;
};

void rs_rsps_optimizer_default(rs_rsps_optimizer *o) {
    o->type = RS_RSPS_SGD;
    o->learning_rate = 0.01f;
    o->epsilon = 1e-10f;
}

int rs_rsps_optimizer_tensors(rs_rsps_optimizer_type t) {
    return t == RS_RSPS_SGD ? 1 : 2;
}

/* A positive finite float option value into *out, or an RS_EINVAL naming it. */
static int positive_option(const char *who, const char *key, const char *val, float *out,
                           rs_error *err) {
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || !end || *end || end == val || !isfinite(v) || v <= 0 || (float)v <= 0) {
        rs_error_set(err, RS_EINVAL, "%s option %s=%s: want a positive number", who, key, val);
        return RS_EINVAL;
    }
    *out = (float)v;
    return 1;
}

int rs_rsps_optimizer_option(rs_rsps_optimizer *o, const char *who, const char *key,
                             const char *val, rs_error *err) {
    static const struct {
        const char *name;
        rs_rsps_optimizer_type type;
    } names[] = {{"sgd", RS_RSPS_SGD},
                 {"adagrad", RS_RSPS_ADAGRAD},
                 {"rowwiseadagrad", RS_RSPS_ROWWISE_ADAGRAD}};
    if (strcmp(key, "optimizer") == 0) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcasecmp(val, names[i].name) == 0) {
                o->type = names[i].type;
                return 1;
            }
        rs_error_set(err, RS_EINVAL,
                     "%s option optimizer=%s: recbench implements RecStore's SGD, AdaGrad and "
                     "RowWiseAdaGrad (RecStore's optimizer sources define no AdamW step to match)",
                     who, val);
        return RS_EINVAL;
    }
    if (strcmp(key, "learning_rate") == 0)
        return positive_option(who, key, val, &o->learning_rate, err);
    if (strcmp(key, "epsilon") == 0) return positive_option(who, key, val, &o->epsilon, err);
    return 0;
}

int rs_rsps_create(rs_ps_shard *shard, const rs_rsps_optimizer *opt, rs_rsps **out, rs_error *err) {
    *out = NULL;
    rs_rsps *s = calloc(1, sizeof *s);
    if (!s) return rs_error_set(err, RS_ENOMEM, "recstore wire: out of memory");
    s->shard = shard;
    s->dim = rs_ps_shard_value_size(shard) / 4;
    if (opt)
        s->opt = *opt;
    else
        rs_rsps_optimizer_default(&s->opt);
    int rc = pthread_rwlock_init(&s->lock, NULL);
    if (rc) {
        free(s);
        return rs_error_errno(err, RS_ENOMEM, rc, "recstore wire: table lock");
    }
    if ((rc = pthread_mutex_init(&s->opt_lock, NULL))) {
        pthread_rwlock_destroy(&s->lock);
        free(s);
        return rs_error_errno(err, RS_ENOMEM, rc, "recstore wire: optimizer lock");
    }
    *out = s;
    return 0;
}

void rs_rsps_destroy(rs_rsps *s) {
    if (!s) return;
    for (int i = 0; i < RSPS_SLOTS; i++) {
        if (s->scratch[i]) {
            free(s->scratch[i]->rows);
            free(s->scratch[i]->acc);
            free(s->scratch[i]->grad);
        }
        free(s->scratch[i]);
    }
    pthread_mutex_destroy(&s->opt_lock);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

rs_ps_shard *rs_rsps_shard(rs_rsps *s) {
    return s->shard;
}

static rs_rsps_code result(rs_rsps_result *res, rs_rsps_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static rs_rsps_code result(rs_rsps_result *res, rs_rsps_code code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof res->msg, fmt, ap);
    va_end(ap);
    res->code = code;
    return code;
}

/* A client-sent name as printable text for messages and log lines (at most 64 bytes; other bytes
 * become '?'), so a hostile name cannot put control bytes into the server log. */
static const char *printable(char *dst, const char *src, size_t len) {
    size_t n = len > 64 ? 64 : len;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
    dst[n] = 0;
    return dst;
}

static rs_rsps_code ok(rs_rsps_result *res) {
    res->code = RS_RSPS_OK;
    res->msg[0] = 0;
    return RS_RSPS_OK;
}

static rsps_scratch *scratch_of(rs_rsps *s, unsigned slot) {
    rsps_scratch **p = &s->scratch[slot % RSPS_SLOTS];
    if (*p) return *p;
    rsps_scratch *sc = calloc(1, sizeof *sc);
    if (!sc) return NULL;
    size_t bytes = (size_t)RSPS_CHUNK * s->dim * 4;
    int adagrad = s->opt.type != RS_RSPS_SGD;
    if (posix_memalign((void **)&sc->rows, 64, bytes) ||
        (adagrad && (posix_memalign((void **)&sc->acc, 64, bytes) ||
                     posix_memalign((void **)&sc->grad, 64, bytes)))) {
        free(sc->rows);
        free(sc->acc);
        free(sc);
        return NULL;
    }
    *p = sc;
    return sc;
}

size_t rs_rsps_get_reply_max(const rs_rsps *s, size_t keys_len) {
    if (!keys_len || keys_len % 8 || keys_len / 8 > INT32_MAX / (16 + 4 * (size_t)s->dim)) return 0;
    return rs_rsblock_max_size((uint32_t)(keys_len / 8), s->dim);
}

rs_rsps_code rs_rsps_get(rs_rsps *s, const uint8_t *keys, size_t keys_len, uint8_t *out, size_t cap,
                         size_t *out_len, unsigned thread_slot, rs_rsps_result *res) {
    *out_len = 0;
    if (keys_len == 0) {
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_GET, 0, 0, 1);
        return result(res, RS_RSPS_INVALID,
                      "GetParameter with 0 keys (RecStore's own server aborts on this)");
    }
    if (keys_len % 8) {
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_GET, 0, 0, 1);
        return result(res, RS_RSPS_INVALID,
                      "GetParameter keys field of %zu bytes is not a multiple of 8 (raw "
                      "little-endian uint64 keys)",
                      keys_len);
    }
    size_t need = rs_rsps_get_reply_max(s, keys_len);
    if (!need) {
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_GET, 0, 0, 1);
        return result(res, RS_RSPS_INVALID,
                      "GetParameter of %zu keys: the reply would not fit one row block",
                      keys_len / 8);
    }
    if (cap < need)
        return result(res, RS_RSPS_INTERNAL, "transport gave %zu bytes for a %zu-byte block", cap,
                      need);
    rsps_scratch *sc = scratch_of(s, thread_slot);
    if (!sc) return result(res, RS_RSPS_INTERNAL, "out of memory for GET scratch");
    uint32_t n = (uint32_t)(keys_len / 8);
    rs_kv *kv = rs_ps_shard_kv(s->shard);
    rs_rsblock_writer w;
    rs_rsblock_writer_init(&w, out, n);
    size_t found_total = 0;
    rs_ps_shard_enter(s->shard, thread_slot);
    for (uint32_t i = 0; i < n; i += RSPS_CHUNK) {
        uint32_t m = n - i < RSPS_CHUNK ? n - i : RSPS_CHUNK;
        size_t nf = 0;
        memcpy(sc->keys, keys + 8 * (size_t)i, 8 * (size_t)m);
        /* rows straight into their items; the writer adds keys and dims around them */
        int rc = rs_kv_batch_get_strided(kv, sc->keys, m, rs_rsblock_writer_next_rows(&w),
                                         RS_RSBLOCK_ITEM_HEAD + 4 * (size_t)s->dim, sc->found, &nf);
        if (rc) {
            rs_ps_shard_leave(s->shard, thread_slot);
            rs_ps_shard_count(s->shard, thread_slot, RS_PS_GET, 0, 0, 1);
            return result(res, RS_RSPS_INTERNAL, "batch_get_strided failed: %s", rs_strerror(rc));
        }
        rs_rsblock_writer_add_gathered(&w, keys + 8 * (size_t)i, m, s->dim, sc->found);
        found_total += nf;
    }
    rs_ps_shard_leave(s->shard, thread_slot);
    rs_ps_shard_count(s->shard, thread_slot, RS_PS_GET, n, found_total, 0);
    *out_len = rs_rsblock_writer_len(&w);
    return ok(res);
}

/* Validate a block whose items must all have the shard's dim; *n is the item count. */
static rs_rsps_code check_block(rs_rsps *s, const char *what, const uint8_t *block, size_t len,
                                uint32_t *n, rs_rsps_result *res) {
    rs_error e = {0};
    if (!block || !len)
        return result(res, RS_RSPS_INVALID, "%s without a row block (0 bytes)", what);
    if (rs_rsblock_validate(block, len, n, &e) != 0)
        return result(res, RS_RSPS_INVALID, "%s: %s", what, e.msg);
    if (*n == 0) return result(res, RS_RSPS_INVALID, "%s with a row block of 0 items", what);
    for (uint32_t i = 0; i < *n; i++) {
        uint64_t key;
        int32_t dim;
        rs_rsblock_item(block, *n, i, &key, &dim);
        if ((uint32_t)dim != s->dim)
            return result(res, RS_RSPS_INVALID,
                          "%s: item %u (key %llu) has dim %d; this server stores rows of %u "
                          "floats (value_size %u)",
                          what, i, (unsigned long long)key, dim, s->dim, s->dim * 4);
    }
    return RS_RSPS_OK;
}

/* Gather items [i, i+m) of a validated block: aligned keys, and rows as sent (lr NULL) or as
 * the SGD step -(lr * g). */
static void gather(rs_rsps *s, rsps_scratch *sc, const uint8_t *block, uint32_t n, uint32_t i,
                   uint32_t m, const float *lr) {
    for (uint32_t j = 0; j < m; j++) {
        int32_t dim;
        const uint8_t *v = rs_rsblock_item(block, n, i + j, &sc->keys[j], &dim);
        float *row = sc->rows + (size_t)j * s->dim;
        memcpy(row, v, 4 * (size_t)s->dim);
        if (lr)
            for (uint32_t d = 0; d < s->dim; d++)
                row[d] = -(*lr * row[d]);
    }
}

rs_rsps_code rs_rsps_put(rs_rsps *s, const uint8_t *block, size_t len, unsigned thread_slot,
                         rs_rsps_result *res) {
    uint32_t n = 0;
    if (check_block(s, "PutParameter", block, len, &n, res) != RS_RSPS_OK) {
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_PUT, 0, 0, 1);
        return res->code;
    }
    rsps_scratch *sc = scratch_of(s, thread_slot);
    if (!sc) return result(res, RS_RSPS_INTERNAL, "out of memory for PUT scratch");
    rs_kv *kv = rs_ps_shard_kv(s->shard);
    rs_ps_shard_enter(s->shard, thread_slot);
    for (uint32_t i = 0; i < n; i += RSPS_CHUNK) {
        uint32_t m = n - i < RSPS_CHUNK ? n - i : RSPS_CHUNK;
        size_t done = 0;
        rs_error e = {0};
        gather(s, sc, block, n, i, m, NULL);
        int rc = rs_kv_batch_put(kv, sc->keys, m, sc->rows, &done, &e);
        if (rc) {
            rs_ps_shard_leave(s->shard, thread_slot);
            rs_ps_shard_count(s->shard, thread_slot, RS_PS_PUT, 0, 0, 1);
            return result(res, rc == RS_EFULL ? RS_RSPS_CAPACITY : RS_RSPS_INTERNAL,
                          "PutParameter stored %zu of %u rows: %s", (size_t)i + done, n,
                          e.msg[0] ? e.msg : rs_strerror(rc));
        }
    }
    rs_ps_shard_leave(s->shard, thread_slot);
    rs_ps_shard_count(s->shard, thread_slot, RS_PS_PUT, n, 0, 0);
    return ok(res);
}

static const rsps_table *find_table(rs_rsps *s, const char *name, size_t len) {
    for (unsigned i = 0; i < s->ntables; i++)
        if (strlen(s->tables[i].name) == len && memcmp(s->tables[i].name, name, len) == 0)
            return &s->tables[i];
    return NULL;
}

static void log_refusal(rs_rsps *s, const char *event, const rs_rsps_result *res) {
    fprintf(stderr, "component=recstore_ps event=%s shard=%u reason=\"%s\"\n", event,
            rs_ps_shard_id(s->shard), res->msg);
}

/* Items [i, i+m) of a validated gradient block into sc: keys, their accumulator keys (tag + 1),
 * gradients, and first[j], the index of key j's first occurrence in the chunk (a key sent twice
 * is stepped twice on one row, in order, as RecStore's in-place update does). */
static void adagrad_gather(rs_rsps *s, rsps_scratch *sc, const uint8_t *block, uint32_t n,
                           uint32_t i, uint32_t m, uint64_t acc_tag) {
    int16_t slot[RSPS_DUP_SLOTS];
    memset(slot, -1, sizeof slot);
    for (uint32_t j = 0; j < m; j++) {
        int32_t dim;
        const uint8_t *v = rs_rsblock_item(block, n, i + j, &sc->keys[j], &dim);
        memcpy(sc->grad + (size_t)j * s->dim, v, 4 * (size_t)s->dim);
        sc->akeys[j] = (sc->keys[j] & RSPS_KEY_MASK) | (acc_tag << RSPS_TAG_SHIFT);
        uint32_t h = (uint32_t)((sc->keys[j] * 0x9e3779b97f4a7c15ull) >> 55) % RSPS_DUP_SLOTS;
        while (slot[h] >= 0 && sc->keys[slot[h]] != sc->keys[j])
            h = (h + 1) % RSPS_DUP_SLOTS;
        if (slot[h] < 0) slot[h] = (int16_t)j;
        sc->first[j] = slot[h];
    }
}

/* One AdaGrad step of row w (dim floats) with gradient g and accumulator a: a[d] += g[d]^2
 * (AdaGrad) or a[0] += mean(g^2) (RowWiseAdaGrad); w[d] -= lr / (sqrt(a) + eps) * g[d]. */
static void adagrad_step(const rs_rsps_optimizer *o, uint32_t dim, float *w, float *a,
                         const float *g) {
    if (o->type == RS_RSPS_ROWWISE_ADAGRAD) {
        float sq = 0.0f;
        for (uint32_t d = 0; d < dim; d++)
            sq += g[d] * g[d];
        a[0] += sq / (float)dim;
        float step = o->learning_rate / (sqrtf(a[0]) + o->epsilon);
        for (uint32_t d = 0; d < dim; d++)
            w[d] -= step * g[d];
        return;
    }
    for (uint32_t d = 0; d < dim; d++) {
        a[d] += g[d] * g[d];
        w[d] -= o->learning_rate / (sqrtf(a[d]) + o->epsilon) * g[d];
    }
}

/* Read-step-write of m rows and their accumulators (the caller holds opt_lock): a missing row or
 * accumulator starts from zeros (RecStore skips such a key, dropping its gradient; here it is
 * created, as SGD creates its rows). Rows of a key sent twice are written once, after both
 * steps. */
static int adagrad_chunk(rs_rsps *s, rs_kv *kv, rsps_scratch *sc, uint32_t m, rs_error *e) {
    size_t row = s->dim, done = 0;
    rs_kv_batch_get_flat(kv, sc->keys, m, sc->rows, NULL, NULL);
    rs_kv_batch_get_flat(kv, sc->akeys, m, sc->acc, NULL, NULL);
    uint32_t u = 0; /* unique keys, compacted to the front in first-occurrence order */
    for (uint32_t j = 0; j < m; j++) {
        uint32_t f = (uint32_t)sc->first[j];
        adagrad_step(&s->opt, s->dim, sc->rows + f * row, sc->acc + f * row, sc->grad + j * row);
    }
    for (uint32_t j = 0; j < m; j++) {
        if ((uint32_t)sc->first[j] != j) continue;
        if (u != j) {
            sc->keys[u] = sc->keys[j];
            sc->akeys[u] = sc->akeys[j];
            memcpy(sc->rows + u * row, sc->rows + j * row, 4 * row);
            memcpy(sc->acc + u * row, sc->acc + j * row, 4 * row);
        }
        u++;
    }
    int rc = rs_kv_batch_put(kv, sc->akeys, u, sc->acc, &done, e);
    if (rc == 0) rc = rs_kv_batch_put(kv, sc->keys, u, sc->rows, &done, e);
    return rc;
}

rs_rsps_code rs_rsps_update(rs_rsps *s, const char *table, size_t table_len, const uint8_t *block,
                            size_t len, unsigned thread_slot, rs_rsps_result *res) {
    uint32_t n = 0;
    int64_t tag = -1;
    char tn[65];
    pthread_rwlock_rdlock(&s->lock);
    const rsps_table *t = find_table(s, table, table_len);
    if (t) tag = t->tag;
    pthread_rwlock_unlock(&s->lock);
    if (tag < 0) {
        result(res, RS_RSPS_PRECONDITION,
               "UpdateParameter for table '%s', which InitEmbeddingTable has not registered on "
               "shard %u",
               printable(tn, table, table_len), rs_ps_shard_id(s->shard));
        goto refused;
    }
    if (check_block(s, "UpdateParameter", block, len, &n, res) != RS_RSPS_OK) goto refused;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t key;
        int32_t dim;
        rs_rsblock_item(block, n, i, &key, &dim);
        if ((int64_t)(key >> RSPS_TAG_SHIFT) != tag) {
            result(res, RS_RSPS_INVALID,
                   "UpdateParameter for table '%s' (tag %lld): key %llu (item %u) carries tag "
                   "%llu in its top 8 bits",
                   printable(tn, table, table_len), (long long)tag, (unsigned long long)key, i,
                   (unsigned long long)(key >> RSPS_TAG_SHIFT));
            goto refused;
        }
    }
    rsps_scratch *sc = scratch_of(s, thread_slot);
    if (!sc) {
        result(res, RS_RSPS_INTERNAL, "out of memory for UPDATE scratch");
        goto refused;
    }
    rs_kv *kv = rs_ps_shard_kv(s->shard);
    int adagrad = s->opt.type != RS_RSPS_SGD;
    rs_ps_shard_enter(s->shard, thread_slot);
    if (adagrad) pthread_mutex_lock(&s->opt_lock);
    for (uint32_t i = 0; i < n; i += RSPS_CHUNK) {
        uint32_t m = n - i < RSPS_CHUNK ? n - i : RSPS_CHUNK;
        rs_error e = {0};
        int rc;
        if (adagrad) {
            adagrad_gather(s, sc, block, n, i, m, (uint64_t)tag + 1);
            rc = adagrad_chunk(s, kv, sc, m, &e);
        } else {
            /* SGD: w -= lr * g, i.e. add -(lr * g); a missing key starts from 0, so it becomes
             * -lr * g, exactly RecStore's rule */
            gather(s, sc, block, n, i, m, &s->opt.learning_rate);
            rc = rs_kv_update_add_f32(kv, sc->keys, m, sc->rows, &e);
        }
        if (rc) {
            if (adagrad) pthread_mutex_unlock(&s->opt_lock);
            rs_ps_shard_leave(s->shard, thread_slot);
            result(res, rc == RS_EFULL ? RS_RSPS_CAPACITY : RS_RSPS_INTERNAL,
                   "UpdateParameter applied %u of %u rows: %s", i, n,
                   e.msg[0] ? e.msg : rs_strerror(rc));
            goto refused;
        }
    }
    if (adagrad) pthread_mutex_unlock(&s->opt_lock);
    rs_ps_shard_leave(s->shard, thread_slot);
    rs_ps_shard_count(s->shard, thread_slot, RS_PS_UPDATE, n, 0, 0);
    return ok(res);
refused:
    rs_ps_shard_count(s->shard, thread_slot, RS_PS_UPDATE, 0, 0, 1);
    log_refusal(s, "update_refused", res);
    return res->code;
}

/* ---- InitEmbeddingTable's JSON: one flat object of numbers (other values are skipped) ----- */

typedef struct json_cur {
    const char *p, *end;
} json_cur;

static void json_ws(json_cur *c) {
    while (c->p < c->end && isspace((unsigned char)*c->p))
        c->p++;
}

/* A string (no escapes needed for RecStore's keys; escapes are skipped over). */
static int json_string(json_cur *c, const char **s, size_t *n) {
    if (c->p >= c->end || *c->p != '"') return -1;
    const char *start = ++c->p;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\') c->p++;
        c->p++;
    }
    if (c->p >= c->end) return -1;
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return 0;
}

/* Skip a value that is not a number: string, true/false/null, or a balanced {...} / [...]. */
static int json_skip(json_cur *c) {
    const char *s;
    size_t n;
    if (c->p >= c->end) return -1;
    if (*c->p == '"') return json_string(c, &s, &n);
    if (*c->p == '{' || *c->p == '[') {
        int depth = 0;
        while (c->p < c->end) {
            if (*c->p == '"') {
                if (json_string(c, &s, &n)) return -1;
                continue;
            }
            if (*c->p == '{' || *c->p == '[') depth++;
            if (*c->p == '}' || *c->p == ']') depth--;
            c->p++;
            if (depth == 0) return 0;
        }
        return -1;
    }
    while (c->p < c->end && isalpha((unsigned char)*c->p))
        c->p++;
    return 0;
}

static int parse_table_json(const uint8_t *json, size_t len, int64_t *dim, int64_t *num,
                            int64_t *table_id, char *why, size_t why_cap) {
    json_cur c = {(const char *)json, (const char *)json + len};
    *dim = *num = *table_id = 0;
    json_ws(&c);
    if (c.p >= c.end || *c.p != '{') {
        snprintf(why, why_cap, "config_payload is not a JSON object");
        return -1;
    }
    c.p++;
    for (;;) {
        json_ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        const char *k;
        size_t kn;
        char kb[65];
        if (json_string(&c, &k, &kn)) {
            snprintf(why, why_cap, "config_payload: expected a key at byte %zu",
                     (size_t)(c.p - (const char *)json));
            return -1;
        }
        json_ws(&c);
        if (c.p >= c.end || *c.p != ':') {
            snprintf(why, why_cap, "config_payload: expected ':' after key '%s'",
                     printable(kb, k, kn));
            return -1;
        }
        c.p++;
        json_ws(&c);
        int64_t *dst = NULL;
        if (kn == 13 && memcmp(k, "embedding_dim", 13) == 0) dst = dim;
        if (kn == 14 && memcmp(k, "num_embeddings", 14) == 0) dst = num;
        if (kn == 8 && memcmp(k, "table_id", 8) == 0) dst = table_id;
        if (dst) {
            char buf[32];
            size_t bn = 0;
            while (c.p < c.end && bn < sizeof buf - 1 &&
                   (isdigit((unsigned char)*c.p) || *c.p == '-'))
                buf[bn++] = *c.p++;
            buf[bn] = 0;
            char *e = NULL;
            errno = 0;
            long long v = strtoll(buf, &e, 10);
            if (!bn || errno || *e) {
                snprintf(why, why_cap, "config_payload: '%s' is not an integer",
                         printable(kb, k, kn));
                return -1;
            }
            *dst = v;
        } else if (json_skip(&c)) {
            snprintf(why, why_cap, "config_payload: bad value for key '%s'", printable(kb, k, kn));
            return -1;
        }
        json_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        snprintf(why, why_cap, "config_payload: expected ',' or '}' at byte %zu",
                 (size_t)(c.p - (const char *)json));
        return -1;
    }
    json_ws(&c);
    if (c.p != c.end) {
        snprintf(why, why_cap, "config_payload: trailing bytes after the JSON object");
        return -1;
    }
    return 0;
}

rs_rsps_code rs_rsps_init_table(rs_rsps *s, const char *table, size_t table_len,
                                const uint8_t *json, size_t json_len, int have_json, int32_t *tag,
                                rs_rsps_result *res) {
    int64_t dim, num, table_id;
    char why[200];
    *tag = -1;
    char tn[65], other[65];
    const char *name = printable(tn, table ? table : "", table ? table_len : 0);
    if (!table_len || table_len >= RSPS_NAME_MAX || memchr(table, 0, table_len))
        return result(res, RS_RSPS_INVALID,
                      "InitEmbeddingTable: table name of %zu bytes (want "
                      "1..127 bytes, no NUL)",
                      table_len);
    if (!have_json || !json_len)
        return result(res, RS_RSPS_INVALID, "InitEmbeddingTable '%s' without config_payload", name);
    if (parse_table_json(json, json_len, &dim, &num, &table_id, why, sizeof why))
        return result(res, RS_RSPS_INVALID, "InitEmbeddingTable '%s': %s", name, why);
    int64_t k = rs_rsps_optimizer_tensors(s->opt.type);
    if (table_id < 0 || table_id * k + k - 1 > 255)
        return result(res, RS_RSPS_INVALID,
                      "InitEmbeddingTable '%s': table_id %lld gives tags outside 0..255 (%lld "
                      "tensors per table with this optimizer)",
                      name, (long long)table_id, (long long)k);
    if (dim != (int64_t)s->dim)
        return result(res, RS_RSPS_INVALID,
                      "InitEmbeddingTable '%s': embedding_dim %lld, but this server stores rows "
                      "of %u floats (value_size %u)",
                      name, (long long)dim, s->dim, s->dim * 4);
    if (num < 0)
        return result(res, RS_RSPS_INVALID, "InitEmbeddingTable '%s': num_embeddings %lld < 0",
                      name, (long long)num);
    rs_rsps_code code = RS_RSPS_OK;
    pthread_rwlock_wrlock(&s->lock);
    const rsps_table *t = find_table(s, table, table_len);
    if (t) {
        if (t->dim != dim || t->num != num || t->table_id != table_id)
            code = result(res, RS_RSPS_INVALID,
                          "InitEmbeddingTable '%s': already registered with embedding_dim "
                          "%lld, num_embeddings %lld, table_id %lld",
                          name, (long long)t->dim, (long long)t->num, (long long)t->table_id);
    } else {
        for (unsigned i = 0; i < s->ntables && code == RS_RSPS_OK; i++)
            if (s->tables[i].table_id == table_id)
                code = result(res, RS_RSPS_INVALID,
                              "InitEmbeddingTable '%s': table_id %lld is table '%s''s tag", name,
                              (long long)table_id,
                              printable(other, s->tables[i].name, strlen(s->tables[i].name)));
        if (code == RS_RSPS_OK && s->ntables == RSPS_MAX_TABLES)
            code = result(res, RS_RSPS_INVALID, "InitEmbeddingTable '%s': %d tables exist", name,
                          RSPS_MAX_TABLES);
        if (code == RS_RSPS_OK) {
            rsps_table *nt = &s->tables[s->ntables++];
            memcpy(nt->name, table, table_len);
            nt->name[table_len] = 0;
            nt->dim = dim;
            nt->num = num;
            nt->table_id = table_id;
            nt->tag = table_id * k;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (code != RS_RSPS_OK) return code;
    *tag = (int32_t)(table_id * k);
    return ok(res);
}

/* ---- Command ---------------------------------------------------------------------------- */

static int fake_size(const rs_rsps_command_args *a, const char *name, int64_t *n,
                     rs_rsps_result *res) {
    if (a->n_arg1 != 1 || a->arg1[0].len != 8) {
        result(res, RS_RSPS_INVALID,
               "%s wants arg1 = one 8-byte little-endian int64 (got %u values%s)", name, a->n_arg1,
               a->n_arg1 == 1 ? " of another length" : "");
        return -1;
    }
    memcpy(n, a->arg1[0].data, 8);
    return 0;
}

/* RecStore's arg2[0]: a JSON object with an object "identity" and a non-empty string
 * "checkpoint_id" (the server adds shard_id; recbench's file already records it). */
static int checkpoint_meta_ok(const uint8_t *json, size_t len, char *why, size_t why_cap) {
    json_cur c = {(const char *)json, (const char *)json + len};
    int identity = 0, id = 0;
    json_ws(&c);
    if (c.p >= c.end || *c.p != '{') {
        snprintf(why, why_cap, "metadata (arg2) is not a JSON object");
        return -1;
    }
    c.p++;
    for (;;) {
        json_ws(&c);
        if (c.p < c.end && *c.p == '}') break;
        const char *k, *v;
        size_t kn, vn;
        if (json_string(&c, &k, &kn)) goto bad;
        json_ws(&c);
        if (c.p >= c.end || *c.p++ != ':') goto bad;
        json_ws(&c);
        if (kn == 8 && memcmp(k, "identity", 8) == 0 && c.p < c.end && *c.p == '{') identity = 1;
        if (kn == 13 && memcmp(k, "checkpoint_id", 13) == 0 && c.p < c.end && *c.p == '"') {
            if (json_string(&c, &v, &vn)) goto bad;
            id = vn > 0;
        } else if (json_skip(&c)) {
            goto bad;
        }
        json_ws(&c);
        if (c.p < c.end && *c.p == ',') c.p++;
    }
    if (identity && id) return 0;
    snprintf(why, why_cap,
             "metadata (arg2) needs an object \"identity\" and a non-empty string "
             "\"checkpoint_id\"");
    return -1;
bad:
    snprintf(why, why_cap, "metadata (arg2) is not valid JSON near byte %zu",
             (size_t)(c.p - (const char *)json));
    return -1;
}

/* SAVE_CHECKPOINT / LOAD_CHECKPOINT: arg1 = [directory] inside the shard's checkpoint root,
 * arg2 = [metadata JSON]; run synchronously, as RecStore's server does (its client waits 600 s).
 * Returns 0 or -1 with res filled. */
static int checkpoint_command(rs_rsps *s, const rs_rsps_command_args *a, rs_rsps_result *res) {
    int save = a->command == RS_RSPS_SAVE_CHECKPOINT;
    const char *name = save ? "SAVE_CHECKPOINT" : "LOAD_CHECKPOINT";
    char dir[4096], why[512], reply[512];
    /* a server without a checkpoint root does not do checkpoints at all, whatever the args */
    if (rs_ps_shard_checkpoint_dir(s->shard, "", 0, dir, sizeof dir, why, sizeof why) ==
        RS_ENOTSUP) {
        result(res, RS_RSPS_UNSUPPORTED, "%s: %s", name, why);
        return -1;
    }
    if (a->n_arg1 != 1 || a->n_arg2 < 1) {
        result(res, RS_RSPS_INVALID,
               "%s wants arg1 = [directory] and arg2 = [metadata JSON] (got %u and %u values)",
               name, a->n_arg1, a->n_arg2);
        return -1;
    }
    if (checkpoint_meta_ok(a->arg2[0].data, a->arg2[0].len, why, sizeof why)) {
        result(res, RS_RSPS_INVALID, "%s: %s", name, why);
        return -1;
    }
    int rc = rs_ps_shard_checkpoint_dir(s->shard, (const char *)a->arg1[0].data, a->arg1[0].len,
                                        dir, sizeof dir, why, sizeof why);
    if (rc) {
        result(res, rc == RS_ENOTSUP ? RS_RSPS_UNSUPPORTED : RS_RSPS_INVALID, "%s: %s", name, why);
        return -1;
    }
    rs_error err = {0};
    rc = save ? rs_ps_shard_save(s->shard, dir, reply, sizeof reply, &err)
              : rs_ps_shard_load(s->shard, dir, reply, sizeof reply, &err);
    if (rc) {
        result(res, RS_RSPS_PRECONDITION, "%s: %s", name, err.msg);
        return -1;
    }
    return 0;
}

rs_rsps_code rs_rsps_command(rs_rsps *s, const rs_rsps_command_args *a, const char **reply,
                             size_t *reply_len, size_t *fake_len, unsigned thread_slot,
                             rs_rsps_result *res) {
    int64_t n = 0;
    *reply = "";
    *reply_len = 0;
    *fake_len = 0;
    switch (a->command) {
    case RS_RSPS_CLEAR_PS: {
        uint64_t removed = 0;
        int rc = rs_ps_shard_clear(s->shard, &removed);
        if (rc) return result(res, RS_RSPS_INTERNAL, "CLEAR_PS failed: %s", rs_strerror(rc));
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_COMMAND, 0, 0, 0);
        return ok(res);
    }
    case RS_RSPS_RELOAD_PS:
        if (a->n_arg1 != 1 || a->n_arg2 < 1)
            return result(res, RS_RSPS_INVALID,
                          "RELOAD_PS wants arg1 = [model config path] and arg2 = [one or more "
                          "checkpoint paths] (got %u and %u values)",
                          a->n_arg1, a->n_arg2);
        return result(res, RS_RSPS_UNSUPPORTED,
                      "RELOAD_PS: recbench's parameter server has no checkpoints to load (shard "
                      "%u keeps its rows; RecStore's own server treats this as a no-op)",
                      rs_ps_shard_id(s->shard));
    case RS_RSPS_LOAD_FAKE_DATA:
        if (fake_size(a, "LOAD_FAKE_DATA", &n, res)) return res->code;
        if (n < 0 || n > (int64_t)RS_RSPS_FAKE_DATA_MAX)
            return result(res, RS_RSPS_INVALID, "LOAD_FAKE_DATA size %lld is outside 0..%u",
                          (long long)n, RS_RSPS_FAKE_DATA_MAX);
        *fake_len = (size_t)n;
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_COMMAND, 0, 0, 0);
        return ok(res);
    case RS_RSPS_DUMP_FAKE_DATA:
        if (fake_size(a, "DUMP_FAKE_DATA", &n, res)) return res->code;
        if (n <= 0 || n > (64ll << 20) || n % 4)
            return result(res, RS_RSPS_INVALID,
                          "DUMP_FAKE_DATA size %lld must be in 1..64 MiB and a multiple of 4",
                          (long long)n);
        *reply = "ok";
        *reply_len = 2;
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_COMMAND, 0, 0, 0);
        return ok(res);
    case RS_RSPS_SAVE_CHECKPOINT:
    case RS_RSPS_LOAD_CHECKPOINT: {
        if (checkpoint_command(s, a, res)) return res->code;
        *reply = "ok";
        *reply_len = 2;
        rs_ps_shard_count(s->shard, thread_slot, RS_PS_COMMAND, 0, 0, 0);
        return ok(res);
    }
    default:
        return result(res, RS_RSPS_INVALID,
                      "unknown PSCommand %lld (known: CLEAR_PS=0, RELOAD_PS=1, LOAD_FAKE_DATA=2, "
                      "DUMP_FAKE_DATA=3, SAVE_CHECKPOINT=4, LOAD_CHECKPOINT=5)",
                      (long long)a->command);
    }
}
