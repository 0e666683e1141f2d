/*
 * ps_client.c — the all-shards PS client (see recstore/ps_client.h).
 *
 * State: one transport connection per shard (max_in_flight = prefetch_depth) and a FIFO ring of
 * prefetch_depth batch slots. With one shard a batch goes straight through: the caller's keys and
 * rows are sent as they are and GET rows land directly in the caller's buffer. With several
 * shards, a slot keeps per-shard key lists, the original positions of those keys, and per-shard
 * row buffers; submit() gathers and sends every shard's sub-request, wait() collects one
 * completion from each involved shard (each connection completes in submission order, so its next
 * completion belongs to the oldest batch) and scatters GET rows back to the caller's order.
 *
 * Invariant: a batch's sub-requests are either all submitted or its slot records the first
 * failure; wait() always drains exactly the sub-requests that were sent, so connections never
 * fall out of step with the ring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ps_client.h"
#include "recstore/transport.h"

typedef struct shard_part {
    uint64_t *keys;
    uint32_t *pos; /* index of each key in the caller's batch */
    uint8_t *rows; /* PUT/UPDATE rows gathered, or GET rows received */
    size_t n, cap_keys, cap_rows;
    int sent;
} shard_part;

typedef struct batch_slot {
    uint64_t tag;
    rs_ps_op op;
    size_t n;
    void *rows_out;
    int fail_code;
    rs_error fail;
    shard_part *parts; /* num_shards entries (multi-shard only) */
    int single_sent;
} batch_slot;

struct rs_ps_client {
    const rs_ps_conn_ops *ops;
    uint32_t num_shards, value_size, depth;
    void **conns;
    char **names; /* "brpc://host:port" per shard */
    batch_slot *slots;
    uint32_t head, count;
    uint64_t seq;
    rs_ps_completion comp; /* scratch */
};

uint32_t rs_ps_client_value_size(const rs_ps_client *c) {
    return c->value_size;
}

void rs_ps_client_close(rs_ps_client *c) {
    if (!c) return;
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
    rs_ps_client *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "client");
    c->ops = ops;
    c->num_shards = cfg->num_shards;
    c->depth = cfg->prefetch_depth ? cfg->prefetch_depth : 1;
    c->conns = calloc(c->num_shards, sizeof *c->conns);
    c->names = calloc(c->num_shards, sizeof *c->names);
    c->slots = calloc(c->depth, sizeof *c->slots);
    if (!c->conns || !c->names || !c->slots) {
        rc = rs_error_set(err, RS_ENOMEM, "client tables");
        goto fail;
    }
    if (c->num_shards > 1) {
        for (uint32_t s = 0; s < c->depth; s++) {
            c->slots[s].parts = calloc(c->num_shards, sizeof(shard_part));
            if (!c->slots[s].parts) {
                rc = rs_error_set(err, RS_ENOMEM, "client batch slots");
                goto fail;
            }
        }
    }
    rs_ps_client_opts co = {
        .timeout_ms = cfg->timeout_ms, .max_in_flight = c->depth, .extra = cfg->extra};
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
        if ((rc = command_sync(c, i, "ping", &resp, err))) goto fail;
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
    }
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

static void slot_fail(batch_slot *b, int code, const rs_error *e) {
    if (b->fail_code) return;
    b->fail_code = code;
    b->fail = *e;
    b->fail.code = code;
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
    batch_slot *b = &c->slots[(c->head + c->count) % c->depth];
    b->tag = tag;
    b->op = op;
    b->n = n;
    b->rows_out = rows_out;
    b->fail_code = 0;
    b->single_sent = 0;
    uint64_t seq = ++c->seq;
    rs_error e = {0};

    if (c->num_shards == 1) {
        rs_ps_request req = {.op = op,
                             .shard = 0,
                             .value_size = (uint32_t)vs,
                             .num_keys = (uint32_t)n,
                             .keys = (const uint8_t *)keys,
                             .rows = op == RS_PS_GET ? NULL : rows_in,
                             .rows_len = op == RS_PS_GET ? 0 : n * vs};
        int rc = c->ops->submit(c->conns[0], &req, seq, rows_out, op == RS_PS_GET ? n * vs : 0, &e);
        if (rc) {
            rs_error_prefix(&e, "shard 0");
            slot_fail(b, rc, &e);
        } else {
            b->single_sent = 1;
        }
        c->count++;
        return 0;
    }

    /* split by shard */
    for (uint32_t s = 0; s < c->num_shards; s++) {
        b->parts[s].n = 0;
        b->parts[s].sent = 0;
    }
    /* count, then size the per-shard buffers once */
    for (size_t i = 0; i < n; i++)
        b->parts[rs_shard_of(keys[i], c->num_shards)].n++;
    for (uint32_t s = 0; s < c->num_shards; s++) {
        shard_part *p = &b->parts[s];
        size_t cap_keys = p->cap_keys;
        if (grow((void **)&p->keys, &cap_keys, p->n, 8) ||
            grow((void **)&p->pos, &p->cap_keys, p->n, 4) ||
            grow((void **)&p->rows, &p->cap_rows, p->n * vs, 1)) {
            c->count++;
            e.code = 0;
            rs_error_set(&e, RS_ENOMEM, "no memory to split a batch of %zu keys", n);
            slot_fail(b, RS_ENOMEM, &e);
            return 0;
        }
        p->n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        shard_part *p = &b->parts[rs_shard_of(keys[i], c->num_shards)];
        p->keys[p->n] = keys[i];
        p->pos[p->n] = (uint32_t)i;
        if (op != RS_PS_GET) memcpy(p->rows + p->n * vs, (const uint8_t *)rows_in + i * vs, vs);
        p->n++;
    }
    for (uint32_t s = 0; s < c->num_shards; s++) {
        shard_part *p = &b->parts[s];
        if (!p->n) continue;
        rs_ps_request req = {.op = op,
                             .shard = s,
                             .value_size = (uint32_t)vs,
                             .num_keys = (uint32_t)p->n,
                             .keys = (const uint8_t *)p->keys,
                             .rows = op == RS_PS_GET ? NULL : p->rows,
                             .rows_len = op == RS_PS_GET ? 0 : p->n * vs};
        int rc =
            c->ops->submit(c->conns[s], &req, seq, p->rows, op == RS_PS_GET ? p->n * vs : 0, &e);
        if (rc) {
            rs_error_prefix(&e, "shard %u", s);
            slot_fail(b, rc, &e);
            continue; /* later shards are still sent: wait() drains what was sent */
        }
        p->sent = 1;
    }
    c->count++;
    return 0;
}

/* Collect one completion from shard s for the oldest batch. */
static void collect(rs_ps_client *c, batch_slot *b, uint32_t s, uint64_t *found,
                    rs_ps_batch_result *res) {
    rs_error e = {0};
    int rc = c->ops->next(c->conns[s], &c->comp, &e);
    if (rc) {
        rs_error_prefix(&e, "shard %u", s);
        slot_fail(b, rc, &e);
        return;
    }
    const rs_ps_response *r = &c->comp.resp;
    if (r->status != RS_PS_OK) {
        rs_error_set(&e, RS_ESERVER, "shard %u (%s): %s: %s", s, c->names[s],
                     rs_ps_status_name(r->status), r->error);
        slot_fail(b, RS_ESERVER, &e);
        return;
    }
    *found += r->num_found;
    res->parts++;
    res->gathered += (r->flags & RS_PS_RESP_GATHERED) != 0;
}

int rs_ps_client_wait(rs_ps_client *c, rs_ps_batch_result *res, rs_error *err) {
    if (c->count == 0) return rs_error_set(err, RS_EINVAL, "wait() with no batch in flight");
    batch_slot *b = &c->slots[c->head];
    uint64_t found = 0;
    res->parts = res->gathered = 0;
    if (c->num_shards == 1) {
        if (b->single_sent) collect(c, b, 0, &found, res);
    } else {
        for (uint32_t s = 0; s < c->num_shards; s++)
            if (b->parts[s].sent) collect(c, b, s, &found, res);
        if (!b->fail_code && b->op == RS_PS_GET) {
            size_t vs = c->value_size;
            uint8_t *out = b->rows_out;
            for (uint32_t s = 0; s < c->num_shards; s++) {
                shard_part *p = &b->parts[s];
                for (size_t i = 0; i < p->n; i++)
                    memcpy(out + (size_t)p->pos[i] * vs, p->rows + i * vs, vs);
            }
        }
    }
    c->head = (c->head + 1) % c->depth;
    c->count--;
    res->tag = b->tag;
    res->num_found = found;
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
    rs_ps_response resp;
    int rc = command_sync(c, shard, command, &resp, err);
    if (rc) return rc;
    if (reply && cap) snprintf(reply, cap, "%s", resp.reply);
    return 0;
}
