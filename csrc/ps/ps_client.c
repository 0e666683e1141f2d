/*
 * ps_client.c — the all-shards PS client (see recstore/ps_client.h).
 *
 * State: one transport connection per shard and a FIFO ring of prefetch_depth batch slots. A
 * batch is split by shard, and each shard's part into chunks of at most `chunk` keys: the
 * server's max_keys_per_request (read from its "stats" at open) and, where the transport's
 * request or response slot bounds it (rdma, shm), the keys whose bytes fit one slot. A connection
 * carries up to `window` requests at once (prefetch_depth, or more when the transport allows it,
 * RS_PS_CHUNK_WINDOW), so the chunks of a big batch are in flight together; the chunks nobody has
 * room for yet are sent as earlier ones complete, by wait() and by later submits (pump).
 *
 * Budget: the chunks a client has sent and not yet collected count, in bytes (keys + rows),
 * against its share of the process's budget (recstore/ps_budget.h); a chunk past the share waits
 * like one past the window, except that a client with nothing in flight always sends one. When the
 * oldest batch's next chunk waits while the client's bytes are held by later batches on other
 * shards, wait() collects those first (collect_all): the oldest batch is never held back by
 * later ones.
 *
 * Rows: with one shard, a batch whose chunks all go out during submit goes straight through (keys
 * and rows sent from the caller's memory, GET rows land in the caller's buffer). Otherwise the
 * part's keys and rows are copied into the slot (the caller's keys and input rows are read during
 * submit only) and, with several shards, GET rows land in per-shard buffers and are scattered back
 * to the caller's order by wait().
 *
 * Invariants: on every connection requests are sent in batch order (a batch's chunks on shard s
 * go out only after every older batch's chunks on s), so the next completion on s belongs to the
 * oldest batch that has a request outstanding there. A failure stops the sending of its batch's
 * remaining chunks; wait() always drains exactly the requests that were sent, so connections never
 * fall out of step with the ring — except after a timeout, a closed connection or a malformed
 * reply, when the transport may still hold the request: that connection is then marked broken and
 * every later request on it fails at once with the same error instead of waiting out one more
 * timeout per chunk (open a new client to try the shard again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ps_budget.h"
#include "recstore/ps_client.h"
#include "recstore/recstore_wire.h"
#include "recstore/transport.h"

/* Requests per connection a client asks for beyond prefetch_depth, for chunked batches. */
#define RS_PS_CHUNK_WINDOW 8u

typedef struct shard_part {
    uint64_t *keys;
    uint32_t *pos; /* index of each key in the caller's batch (multi-shard) */
    uint8_t *rows; /* PUT/UPDATE rows gathered, or GET rows received (multi-shard) */
    size_t n, cap_keys, cap_pos, cap_rows;
    const uint64_t *src_keys; /* what the chunks send: the caller's memory or keys/rows above */
    const uint8_t *src_rows;
    uint8_t *dst_rows; /* GET: where chunk rows land */
    uint32_t chunks, sent, done;
} shard_part;

typedef struct batch_slot {
    uint64_t tag, found;
    uint32_t resp_parts, resp_gathered; /* shard responses; ... RS_PS_RESP_GATHERED */
    rs_ps_op op;
    size_t n;
    uint32_t chunk; /* keys per request for this batch's op */
    void *rows_out;
    int fail_code, scatter;
    rs_error fail;
    shard_part *parts; /* num_shards entries */
} batch_slot;

struct rs_ps_client {
    const rs_ps_conn_ops *ops;
    int hash; /* -1: rs_mix64 (native wire); else rs_rs_hash_method (RecStore's wire) */
    uint32_t num_shards, value_size, depth, window;
    uint32_t chunk_get, chunk_put; /* keys per request: GET, PUT/UPDATE */
    void **conns;
    char **names;       /* "brpc://host:port" per shard */
    uint32_t *inflight; /* requests outstanding per connection */
    rs_error *broken;   /* per connection: the transport error that left it out of step (code 0:
                         * healthy); later requests on it fail with this error at once */
    batch_slot *slots;
    uint32_t head, count;
    uint64_t seq;
    uint64_t budget; /* the process's budget of bytes in flight (recstore/ps_budget.h) */
    uint64_t held;   /* bytes of this client's requests sent and not yet collected */
    uint64_t deferred;
    rs_ps_completion comp; /* scratch */
};

/* The shard a key goes to: the native wire's rs_mix64, or RecStore's city_hash / simple_mod. */
static inline uint32_t route(const rs_ps_client *c, uint64_t key) {
    return c->hash < 0 ? rs_shard_of(key, c->num_shards)
                       : rs_recstore_shard_of(key, c->num_shards, (rs_rs_hash_method)c->hash);
}

/* cfg->hash_method for this transport: NULL/"" = the wire's own (rs_mix64 native, city_hash on
 * RecStore's wire); a RecStore method on the native wire (or rs_mix64 on RecStore's) is an error,
 * since the servers would disagree. */
static int pick_hash(const rs_ps_client_config *cfg, int *out, rs_error *err) {
    int recstore = strncmp(cfg->transport, "recstore+", 9) == 0;
    const char *h = cfg->hash_method && *cfg->hash_method ? cfg->hash_method : NULL;
    if (!recstore) {
        *out = -1;
        if (!h || strcmp(h, "rs_mix64") == 0) return 0;
        return rs_error_set(err, RS_EINVAL,
                            "hash_method '%s' is RecStore's; recbench's native wire (%s) shards "
                            "with rs_mix64 (use recstore+%s:// for RecStore's wire)",
                            h, cfg->transport, cfg->transport);
    }
    rs_rs_hash_method m = RS_RS_HASH_CITY;
    if (h && rs_rs_hash_method_parse(h, &m, err)) return RS_EINVAL;
    *out = (int)m;
    return 0;
}

uint32_t rs_ps_client_value_size(const rs_ps_client *c) {
    return c->value_size;
}

uint32_t rs_ps_client_chunk_keys(const rs_ps_client *c, rs_ps_op op) {
    return op == RS_PS_GET ? c->chunk_get : c->chunk_put;
}

uint32_t rs_ps_client_window(const rs_ps_client *c) {
    return c->window;
}

int rs_ps_client_rows_buffers(rs_ps_client *c, void **bufs, uint32_t max, size_t *cap, uint32_t *n,
                              rs_error *err) {
    if (c->num_shards != 1)
        return rs_error_set(err, RS_ENOTSUP,
                            "row buffers need a client of one shard (this one has %u: a batch's "
                            "rows come back per shard and are put in order by a copy)",
                            c->num_shards);
    if (!c->ops->rows_buffers)
        return rs_error_set(err, RS_ENOTSUP,
                            "transport %s has no row buffers (rdma and shm have, with the RC "
                            "option rows_buffers=N)",
                            c->ops->name);
    *n = c->ops->rows_buffers(c->conns[0], bufs, max, cap);
    if (*n == 0)
        return rs_error_set(err, RS_EINVAL,
                            "the %s connection has no row buffers: give the RC option "
                            "rows_buffers=N",
                            c->ops->name);
    return 0;
}

void rs_ps_client_budget_stats_get(const rs_ps_client *c, rs_ps_client_budget_stats *out) {
    out->budget = c->budget;
    out->held = c->held;
    out->deferred = c->deferred;
}

int rs_ps_client_wait_stats_get(const rs_ps_client *c, rs_ps_wait_stats *out) {
    if (!c->ops->wait_stats) return 0;
    for (uint32_t i = 0; i < c->num_shards; i++)
        if (c->conns[i]) c->ops->wait_stats(c->conns[i], out);
    return 1;
}

void rs_ps_client_close(rs_ps_client *c) {
    if (!c) return;
    if (c->count) rs_ps_budget_leave();
    for (uint32_t i = 0; c->conns && i < c->num_shards; i++)
        if (c->conns[i]) c->ops->close(c->conns[i]);
    for (uint32_t i = 0; c->names && i < c->num_shards; i++)
        free(c->names[i]);
    for (uint32_t s = 0; c->slots && s < c->depth; s++) {
        shard_part *p = c->slots[s].parts;
        for (uint32_t i = 0; p && i < c->num_shards; i++) {
            free(p[i].keys);
            free(p[i].pos);
            free(p[i].rows);
        }
        free(p);
    }
    free(c->slots);
    free(c->conns);
    free(c->names);
    free(c->inflight);
    free(c->broken);
    free(c);
}

/* One synchronous COMMAND on one shard (no batch may be in flight). */
static int command_sync(rs_ps_client *c, uint32_t shard, const char *cmd, rs_ps_response *resp,
                        rs_error *err) {
    rs_ps_request req = {
        .op = RS_PS_COMMAND, .shard = shard, .command = cmd, .command_len = strlen(cmd)};
    int rc = c->ops->submit(c->conns[shard], &req, UINT64_MAX, NULL, 0, err);
    if (!rc) rc = c->ops->next(c->conns[shard], &c->comp, err);
    if (rc) return rs_error_prefix(err, "shard %u", shard); /* transport errors name the peer */
    *resp = c->comp.resp;
    if (resp->status != RS_PS_OK)
        return rs_error_set(err, RS_ESERVER, "shard %u (%s): %s: %s", shard, c->names[shard],
                            rs_ps_status_name(resp->status), resp->error);
    return 0;
}

static uint64_t min_nz(uint64_t a, uint64_t b) {
    return !a ? b : !b ? a : a < b ? a : b;
}

/* Fold one shard's bounds (its stats reply and its connection's limits) into the client's. */
static int learn_limits(rs_ps_client *c, uint32_t i, const rs_ps_response *stats, rs_error *err) {
    rs_ps_conn_limits lim = {0};
    if (c->ops->limits) c->ops->limits(c->conns[i], &lim);
    uint64_t keys = rs_ps_reply_u64(stats->reply, "max_keys_per_request");
    keys = min_nz(min_nz(keys, lim.max_keys), UINT32_MAX);
    uint64_t vs = c->value_size;
    uint64_t get = keys, put = keys;
    if (lim.max_request_payload) {
        get = min_nz(get, lim.max_request_payload / 8 ? lim.max_request_payload / 8 : 1);
        put = min_nz(put, lim.max_request_payload / (8 + vs));
    }
    if (lim.max_response_rows && vs) get = min_nz(get, lim.max_response_rows / vs);
    if ((lim.max_request_payload && put == 0) || (lim.max_response_rows && vs && get == 0))
        return rs_error_set(err, RS_EINVAL,
                            "shard %u (%s): one %u-byte row does not fit a request (%llu bytes) "
                            "or response (%llu bytes) slot of this transport",
                            i, c->names[i], c->value_size,
                            (unsigned long long)lim.max_request_payload,
                            (unsigned long long)lim.max_response_rows);
    c->chunk_get = (uint32_t)min_nz(c->chunk_get, get);
    c->chunk_put = (uint32_t)min_nz(c->chunk_put, put);
    if (lim.max_in_flight && lim.max_in_flight < c->window) c->window = lim.max_in_flight;
    return 0;
}

int rs_ps_client_open(const rs_ps_client_config *cfg, rs_ps_client **out, rs_error *err) {
    int rc;
    *out = NULL;
    const rs_ps_conn_ops *ops = NULL;
    if ((rc = rs_ps_transport_find(cfg->transport, NULL, &ops, err))) return rc;
    if (cfg->num_shards == 0 || !cfg->hosts || !cfg->ports)
        return rs_error_set(err, RS_EINVAL, "the client needs at least one server endpoint");
    if (cfg->value_size % 4)
        return rs_error_set(err, RS_EINVAL, "value_size %u is not a multiple of 4 (float32 rows)",
                            cfg->value_size);
    int hash;
    if ((rc = pick_hash(cfg, &hash, err))) return rc;
    rs_ps_client *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "client");
    c->ops = ops;
    c->hash = hash;
    c->num_shards = cfg->num_shards;
    c->depth = cfg->prefetch_depth ? cfg->prefetch_depth : 1;
    c->window = c->depth > RS_PS_CHUNK_WINDOW ? c->depth : RS_PS_CHUNK_WINDOW;
    c->budget = cfg->max_inflight_bytes ? cfg->max_inflight_bytes
                                        : rs_ps_budget_default(ops->budget_per_cpu);
    c->conns = calloc(c->num_shards, sizeof *c->conns);
    c->names = calloc(c->num_shards, sizeof *c->names);
    c->inflight = calloc(c->num_shards, sizeof *c->inflight);
    c->broken = calloc(c->num_shards, sizeof *c->broken);
    c->slots = calloc(c->depth, sizeof *c->slots);
    if (!c->conns || !c->names || !c->inflight || !c->broken || !c->slots) {
        rc = rs_error_set(err, RS_ENOMEM, "client tables");
        goto fail;
    }
    for (uint32_t s = 0; s < c->depth; s++) {
        c->slots[s].parts = calloc(c->num_shards, sizeof(shard_part));
        if (!c->slots[s].parts) {
            rc = rs_error_set(err, RS_ENOMEM, "client batch slots");
            goto fail;
        }
    }
    rs_ps_client_opts co = {.timeout_ms = cfg->timeout_ms,
                            .max_in_flight = c->depth,
                            .want_in_flight = c->window,
                            .extra = cfg->extra,
                            .auth = cfg->auth};
    for (uint32_t i = 0; i < c->num_shards; i++) {
        size_t len = strlen(ops->name) + strlen(cfg->hosts[i]) + 16;
        c->names[i] = malloc(len);
        if (!c->names[i]) {
            rc = rs_error_set(err, RS_ENOMEM, "client names");
            goto fail;
        }
        snprintf(c->names[i], len, "%s://%s:%u", ops->name, cfg->hosts[i], cfg->ports[i]);
        if ((rc = ops->connect(cfg->hosts[i], cfg->ports[i], &co, &c->conns[i], err))) {
            c->conns[i] = NULL;
            rs_error_prefix(err, "shard %u", i);
            goto fail;
        }
    }
    for (uint32_t i = 0; i < c->num_shards; i++) {
        rs_ps_response resp;
        if (c->hash >= 0) { /* RecStore's wire has no stats command; it chunks in the wire */
            rc = command_sync(c, i, "ping", &resp, err);
        } else { /* stats carries max_keys_per_request; a server without it answers ping */
            rc = command_sync(c, i, "stats", &resp, err);
            if (rc == RS_ESERVER) rc = command_sync(c, i, "ping", &resp, err);
        }
        if (rc) goto fail;
        if (!resp.value_size) { /* RecStore's wire does not tell the row size */
            if (!cfg->value_size) {
                rc = rs_error_set(err, RS_EINVAL,
                                  "shard %u (%s) does not report its row size: give value_size", i,
                                  c->names[i]);
                goto fail;
            }
            resp.value_size = cfg->value_size;
        }
        if (cfg->value_size && resp.value_size != cfg->value_size) {
            rc = rs_error_set(err, RS_EINVAL,
                              "shard %u (%s) stores %u-byte rows but the client asked for %u", i,
                              c->names[i], resp.value_size, cfg->value_size);
            goto fail;
        }
        if (i > 0 && resp.value_size != c->value_size) {
            rc = rs_error_set(err, RS_EINVAL,
                              "shard %u (%s) stores %u-byte rows but shard 0 stores %u", i,
                              c->names[i], resp.value_size, c->value_size);
            goto fail;
        }
        c->value_size = resp.value_size;
        if ((rc = learn_limits(c, i, &resp, err))) goto fail;
    }
    if (!c->chunk_get) c->chunk_get = UINT32_MAX;
    if (!c->chunk_put) c->chunk_put = UINT32_MAX;
    *out = c;
    return 0;
fail:
    rs_ps_client_close(c);
    return rc;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (*cap >= need) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Record the batch's first failure and send none of its remaining chunks. */
static void slot_fail(rs_ps_client *c, batch_slot *b, int code, const rs_error *e) {
    for (uint32_t s = 0; s < c->num_shards; s++)
        b->parts[s].chunks = b->parts[s].sent;
    if (b->fail_code) return;
    b->fail_code = code;
    b->fail = *e;
    b->fail.code = code;
}

/* Keys in chunk i of part p. */
static size_t chunk_len(const batch_slot *b, const shard_part *p, uint32_t i) {
    size_t off = (size_t)i * b->chunk;
    return p->n - off < b->chunk ? p->n - off : b->chunk;
}

/* What chunk i of part p counts against the process's budget: its keys and rows. */
static uint64_t chunk_bytes(const rs_ps_client *c, const batch_slot *b, const shard_part *p,
                            uint32_t i) {
    return (uint64_t)chunk_len(b, p, i) * (8 + c->value_size);
}

/* Send the next chunk on s (bytes: its chunk_bytes). */
static void send_chunk(rs_ps_client *c, batch_slot *b, uint32_t s, uint64_t bytes) {
    shard_part *p = &b->parts[s];
    size_t vs = c->value_size, off = (size_t)p->sent * b->chunk;
    size_t k = chunk_len(b, p, p->sent);
    int get = b->op == RS_PS_GET;
    rs_ps_request req = {.op = b->op,
                         .shard = s,
                         .value_size = (uint32_t)vs,
                         .num_keys = (uint32_t)k,
                         .keys = (const uint8_t *)(p->src_keys + off),
                         .rows = get ? NULL : p->src_rows + off * vs,
                         .rows_len = get ? 0 : k * vs};
    c->held += bytes;
    if (c->broken[s].code) {
        c->held -= bytes;
        slot_fail(c, b, c->broken[s].code, &c->broken[s]);
        return;
    }
    rs_error e = {0};
    int rc = c->ops->submit(c->conns[s], &req, c->seq, get ? p->dst_rows + off * vs : NULL,
                            get ? k * vs : 0, &e);
    if (rc) {
        c->held -= bytes;
        rs_error_prefix(&e, "shard %u", s);
        slot_fail(c, b, rc, &e);
        return;
    }
    p->sent++;
    c->inflight[s]++;
}

/* Fill connection s's window with the oldest unsent chunks on s, as far as the client's share of
 * the process's budget lets them go (always one when the client has nothing in flight); the rest
 * wait for the client's own earlier requests to be collected. */
static void pump(rs_ps_client *c, uint32_t s) {
    uint32_t j = 0;
    while (c->inflight[s] < c->window && j < c->count) {
        batch_slot *b = &c->slots[(c->head + j) % c->depth];
        shard_part *p = &b->parts[s];
        if (p->sent < p->chunks) {
            uint64_t bytes = chunk_bytes(c, b, p, p->sent);
            uint64_t share = rs_ps_budget_share(c->budget);
            if (c->held && (c->held > share || bytes > share - c->held)) {
                c->deferred++;
                return;
            }
            send_chunk(c, b, s, bytes);
        } else {
            j++;
        }
    }
}

static uint32_t chunks_of(size_t n, uint32_t chunk) {
    return (uint32_t)((n + chunk - 1) / chunk);
}

int rs_ps_client_submit(rs_ps_client *c, rs_ps_op op, const uint64_t *keys, size_t n,
                        const void *rows_in, void *rows_out, uint64_t tag, rs_error *err) {
    if (c->count == c->depth)
        return rs_error_set(err, RS_EBUSY, "%u batches already in flight (prefetch_depth)",
                            c->depth);
    if (op != RS_PS_GET && op != RS_PS_PUT && op != RS_PS_UPDATE)
        return rs_error_set(err, RS_EINVAL, "submit takes Get, Put or Update, not %s",
                            rs_ps_op_method(op));
    if (n > UINT32_MAX) return rs_error_set(err, RS_EINVAL, "%zu keys in one batch", n);
    if (n && !keys) return rs_error_set(err, RS_EINVAL, "NULL keys");
    if (op == RS_PS_GET && n && !rows_out) return rs_error_set(err, RS_EINVAL, "NULL rows_out");
    if (op != RS_PS_GET && n && !rows_in) return rs_error_set(err, RS_EINVAL, "NULL rows");
    size_t vs = c->value_size;
    int get = op == RS_PS_GET;
    batch_slot *b = &c->slots[(c->head + c->count) % c->depth];
    b->tag = tag;
    b->op = op;
    b->n = n;
    b->found = 0;
    b->resp_parts = b->resp_gathered = 0;
    b->chunk = get ? c->chunk_get : c->chunk_put;
    b->rows_out = rows_out;
    b->fail_code = 0;
    b->scatter = 0;
    c->seq++;
    if (c->count == 0) rs_ps_budget_enter(); /* counted active from here to its last wait */
    for (uint32_t s = 0; s < c->num_shards; s++) {
        shard_part *p = &b->parts[s];
        p->n = 0;
        p->chunks = p->sent = p->done = 0;
    }
    rs_error e = {0};

    if (c->num_shards == 1) {
        shard_part *p = &b->parts[0];
        p->n = n;
        p->chunks = n ? chunks_of(n, b->chunk) : 1; /* an empty batch is one empty request */
        p->src_keys = keys;
        p->src_rows = rows_in;
        p->dst_rows = rows_out;
        c->count++;
        pump(c, 0);
        if (p->sent < p->chunks) {
            /* some chunks go out after this call returns (window, budget): keep their keys and
             * rows; the chunks read them at the same offsets */
            if (grow((void **)&p->keys, &p->cap_keys, n, 8) ||
                (!get && grow((void **)&p->rows, &p->cap_rows, n * vs, 1))) {
                rs_error_set(&e, RS_ENOMEM, "no memory to queue a batch of %zu keys", n);
                slot_fail(c, b, RS_ENOMEM, &e);
                return 0;
            }
            memcpy(p->keys, keys, n * 8);
            p->src_keys = p->keys;
            if (!get) {
                memcpy(p->rows, rows_in, n * vs);
                p->src_rows = p->rows;
            }
        }
        return 0;
    }

    /* split by shard: count, then size the per-shard buffers once */
    for (size_t i = 0; i < n; i++)
        b->parts[route(c, keys[i])].n++;
    for (uint32_t s = 0; s < c->num_shards; s++) {
        shard_part *p = &b->parts[s];
        if (grow((void **)&p->keys, &p->cap_keys, p->n, 8) ||
            grow((void **)&p->pos, &p->cap_pos, p->n, 4) ||
            grow((void **)&p->rows, &p->cap_rows, p->n * vs, 1)) {
            for (uint32_t t = 0; t < c->num_shards; t++)
                b->parts[t].n = 0;
            rs_error_set(&e, RS_ENOMEM, "no memory to split a batch of %zu keys", n);
            slot_fail(c, b, RS_ENOMEM, &e);
            c->count++;
            return 0;
        }
        p->chunks = chunks_of(p->n, b->chunk);
        p->src_keys = p->keys;
        p->src_rows = p->rows;
        p->dst_rows = p->rows;
        p->n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        shard_part *p = &b->parts[route(c, keys[i])];
        p->keys[p->n] = keys[i];
        p->pos[p->n] = (uint32_t)i;
        if (!get) memcpy(p->rows + p->n * vs, (const uint8_t *)rows_in + i * vs, vs);
        p->n++;
    }
    b->scatter = get;
    c->count++;
    for (uint32_t s = 0; s < c->num_shards; s++)
        pump(c, s);
    return 0;
}

/* Collect one completion from shard s for batch b, the oldest with a request outstanding on s. */
static void collect(rs_ps_client *c, batch_slot *b, uint32_t s);

/* Collect every request this client has in flight, for whichever batches they belong to (the
 * next completion on a shard is the oldest batch's with a request outstanding there). */
static void collect_all(rs_ps_client *c) {
    for (uint32_t s = 0; s < c->num_shards; s++)
        for (uint32_t j = 0; c->inflight[s] && j < c->count; j++) {
            batch_slot *b = &c->slots[(c->head + j) % c->depth];
            while (b->parts[s].done < b->parts[s].sent)
                collect(c, b, s);
        }
}

static void collect(rs_ps_client *c, batch_slot *b, uint32_t s) {
    c->inflight[s]--;
    c->held -= chunk_bytes(c, b, &b->parts[s], b->parts[s].done);
    b->parts[s].done++;
    if (c->broken[s].code) { /* its requests will not complete: fail them without waiting */
        slot_fail(c, b, c->broken[s].code, &c->broken[s]);
        return;
    }
    rs_error e = {0};
    int rc = c->ops->next(c->conns[s], &c->comp, &e);
    if (rc) {
        rs_error_prefix(&e, "shard %u", s);
        e.code = rc;
        /* a timeout, a closed connection or bytes that make no sense: the transport may still
         * hold this request (RC keeps a timed-out slot), so the connection is out of step with
         * the ring from here on. Other errors (a gRPC call status) end just this request. */
        if (rc == RS_ETIMEDOUT || rc == RS_ECONN || rc == RS_EPROTO) c->broken[s] = e;
        slot_fail(c, b, rc, &e);
        return;
    }
    const rs_ps_response *r = &c->comp.resp;
    if (r->status != RS_PS_OK) {
        rs_error_set(&e, RS_ESERVER, "shard %u (%s): %s: %s", s, c->names[s],
                     rs_ps_status_name(r->status), r->error);
        slot_fail(c, b, RS_ESERVER, &e);
        return;
    }
    b->found += r->num_found;
    b->resp_parts++;
    b->resp_gathered += (r->flags & RS_PS_RESP_GATHERED) != 0;
}

int rs_ps_client_wait(rs_ps_client *c, rs_ps_batch_result *res, rs_error *err) {
    if (c->count == 0) return rs_error_set(err, RS_EINVAL, "wait() with no batch in flight");
    batch_slot *b = &c->slots[c->head];
    /* round-robin over the shards, one completion each, refilling each window as it drains */
    for (int pending = 1; pending;) {
        pending = 0;
        for (uint32_t s = 0; s < c->num_shards; s++) {
            shard_part *p = &b->parts[s];
            if (p->done < p->sent) {
                collect(c, b, s);
                pump(c, s);
            } else if (p->sent < p->chunks) {
                pump(c, s);
                if (p->sent == p->done && p->sent < p->chunks) {
                    /* nothing of the oldest batch is out on s and its next chunk is past the
                     * client's share: the bytes held are later batches' on other shards */
                    collect_all(c);
                    pump(c, s);
                }
            }
            if (p->done < p->sent || p->sent < p->chunks) pending = 1;
        }
    }
    if (!b->fail_code && b->scatter) {
        size_t vs = c->value_size;
        uint8_t *out = b->rows_out;
        for (uint32_t s = 0; s < c->num_shards; s++) {
            shard_part *p = &b->parts[s];
            for (size_t i = 0; i < p->n; i++)
                memcpy(out + (size_t)p->pos[i] * vs, p->rows + i * vs, vs);
        }
    }
    c->head = (c->head + 1) % c->depth;
    if (--c->count == 0) rs_ps_budget_leave();
    res->tag = b->tag;
    res->num_found = b->found;
    res->parts = b->resp_parts;
    res->gathered = b->resp_gathered;
    if (b->fail_code) {
        if (err) *err = b->fail;
        return b->fail_code;
    }
    return 0;
}

static int sync_batch(rs_ps_client *c, rs_ps_op op, const uint64_t *keys, size_t n,
                      const void *rows_in, void *rows_out, uint64_t *found, rs_error *err) {
    if (c->count)
        return rs_error_set(err, RS_EBUSY, "%u batches in flight: wait for them first", c->count);
    int rc = rs_ps_client_submit(c, op, keys, n, rows_in, rows_out, 0, err);
    if (rc) return rc;
    rs_ps_batch_result res;
    rc = rs_ps_client_wait(c, &res, err);
    if (found) *found = res.num_found;
    return rc;
}

int rs_ps_client_get(rs_ps_client *c, const uint64_t *keys, size_t n, void *rows_out,
                     uint64_t *num_found, rs_error *err) {
    return sync_batch(c, RS_PS_GET, keys, n, NULL, rows_out, num_found, err);
}

int rs_ps_client_put(rs_ps_client *c, const uint64_t *keys, size_t n, const void *rows,
                     rs_error *err) {
    return sync_batch(c, RS_PS_PUT, keys, n, rows, NULL, NULL, err);
}

int rs_ps_client_update(rs_ps_client *c, const uint64_t *keys, size_t n, const float *deltas,
                        rs_error *err) {
    return sync_batch(c, RS_PS_UPDATE, keys, n, deltas, NULL, NULL, err);
}

int rs_ps_client_command(rs_ps_client *c, uint32_t shard, const char *command, char *reply,
                         size_t cap, rs_error *err) {
    if (shard >= c->num_shards)
        return rs_error_set(err, RS_EINVAL, "shard %u out of range (%u shards)", shard,
                            c->num_shards);
    if (c->count)
        return rs_error_set(err, RS_EBUSY, "%u batches in flight: wait for them first", c->count);
    if (c->broken[shard].code) {
        if (err) *err = c->broken[shard];
        return c->broken[shard].code;
    }
    rs_ps_response resp;
    int rc = command_sync(c, shard, command, &resp, err);
    if (rc) return rc;
    if (reply && cap) snprintf(reply, cap, "%s", resp.reply);
    return 0;
}
