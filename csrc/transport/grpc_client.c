/*
 * grpc_client.c — the client side of the gRPC transport (rs_grpc_conn_ops): one connection to one
 * shard's recstore.PSService, pipelined.
 *
 * A connection owns a gRPC channel (its own subchannel pool, so every connection is its own TCP
 * connection even to the same server), one completion queue, and the four methods registered on
 * the channel. submit() encodes the PSRequest with the shared codec into one slice and starts the
 * whole unary call as one batch (send metadata + message + close, receive metadata + message +
 * status), so it never waits for the network; with `max_in_flight` requests outstanding (submitted
 * and not yet returned by next()) it refuses with RS_EBUSY. next() returns calls strictly in
 * submission order: finished calls that are not the oldest stay parked in the ring until their
 * turn. GET rows are copied from the response into the caller's rows_out by next(), straight from
 * gRPC's slices when the reply has the usual shape (reply_rows_direct), with streaming stores
 * while the process has many GET rows in flight (option client_copy, copy.h: a GET's rows_out
 * counts from submit until its entry is put back).
 *
 * The same connection speaks RecStore's wire when made through rs_grpc_rs_conn_ops
 * ("recstore+grpc"): requests become recstoreps.ParameterService calls (recstore_msg.c) of at most
 * RS_RSMSG_MAX_KEYS_PER_REQUEST keys each, all started at submit; the ring then holds one entry
 * per call, the last of a request marked, and next() merges a request's calls into one completion
 * (rows placed at each chunk's offset, found keys summed, the first error kept).
 *
 * Streams (transport option stream=1, the default; native wire only): at connect the connection
 * opens `streams` /recstore.PSService/Stream calls (option streams=N, default 1; never more than
 * max_in_flight) and sends a ping on each; the streams whose ping is answered carry the requests as
 * messages, each PSRequest naming its method (field 8), instead of one unary call each. gRPC allows
 * one SEND_MESSAGE and one RECV_MESSAGE in flight per call, so on a single stream the next message
 * could leave only when this thread had seen the previous one leave: with more client threads
 * than cores, a descheduled thread held its queued requests back and fell behind the others
 * (docs/grpc.md). With several streams, a request goes at once on the idle stream carrying the
 * fewest requests, and waits only when every stream is sending. Without streams=N the count
 * follows the process: the connection opens one stream, sends on it alone while the threads of
 * this process that use gRPC connections are no more than the CPUs it may run on, and past that
 * opens another stream (up to RS_GRPC_AUTO_STREAMS, never more than max_in_flight) whenever a
 * request finds every stream sending. (A lone client's several streams were once served by
 * several server workers, a hand-off per request; the server now keeps a connection's streams on
 * its worker. With 16 threads one stream each then served the threads more alike at 7-13 % fewer
 * keys/s: docs/grpc.md.) The extra streams need no ping: the first one's told that the server has
 * Stream. streams=N opens N at connect and uses them all. The ring keeps its meaning:
 * entries are in submission order; the server answers each stream in order, so a reply on stream
 * k belongs to the oldest entry sent on k still waiting, and next() returns entries in submission
 * order whatever stream answered first. A stream has no gRPC deadline, so next() enforces the
 * request timeout itself: an entry past it cancels its stream (all of them if it was not sent)
 * with DEADLINE_EXCEEDED. A stream that fails or ends fails the entries sent on it with its status
 * (errors read as for unary calls); the others go on, and once none is left the connection goes on
 * with unary calls. A server without Stream (UNIMPLEMENTED at the pings) is served unary from the
 * start.
 *
 * Invariants: only the thread using the connection touches it (a connection is per client
 * thread); `pending` entries are allocated once and reused, never moved while gRPC holds pointers
 * into them; `on_wire` counts calls whose batch has not completed; every error names the peer
 * ("grpc 127.0.0.1:15000") and the cause (connection refused, deadline, server status text).
 */
#if RS_HAVE_GRPC

#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "recstore/auth.h"
#include "recstore/cpu.h"
#include "recstore/ps_budget.h"
#include "recstore/recstore_msg.h"
#include "transport/grpc_transport.h"

#define RS_GRPC_DEFAULT_IN_FLIGHT 8
/* Streams a connection without streams=N may open once the process has more gRPC client threads
 * than CPUs (4 gave the measured fairness at 16 client threads, docs/grpc.md). */
#define RS_GRPC_AUTO_STREAMS 4

typedef struct rs_grpc_pending {
    uint64_t tag;
    int method; /* op - 1 */
    int done;   /* batch completed */
    grpc_call *call;
    grpc_byte_buffer *send_bb;
    grpc_byte_buffer *recv_bb;
    grpc_metadata_array initial_md, trailing_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string; /* gpr_malloc'd by gRPC, or NULL */
    void *rows_out;
    size_t rows_cap;
    size_t counted; /* rows_cap counted in rs_copy_rows_pending until the entry is put back */
    gpr_timespec deadline;
    void *reg;     /* the registered method of the call */
    int rs_method; /* RecStore wire: rs_rsmsg_method of the call, else -1 */
    size_t rs_keys;
    uint32_t rs_value_size;
    int last;      /* RecStore wire: the last call of its request */
    int on_stream; /* a message of one of the connection's streams, not a call of its own */
    int sk;        /* on_stream: the stream its message was handed to, -1 while unsent */
} rs_grpc_pending;

/* One of the connection's Stream calls; the addresses of the tag_* bytes tag its batches. */
typedef struct rs_grpc_stream_call {
    grpc_call *call;
    int usable;            /* requests go on it (opened, ping answered, not broken) */
    int sending, recving;  /* a SEND_MESSAGE / RECV_MESSAGE batch is in flight */
    unsigned waiting;      /* entries sent on it and not answered */
    int cancelled;         /* grpc_call_cancel* was called */
    grpc_byte_buffer *out; /* the message being sent (owned until its batch completes) */
    grpc_byte_buffer *in;  /* RECV_MESSAGE's result */
    grpc_metadata_array initial_md, trailing_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string; /* gpr_malloc'd by gRPC, or NULL */
    char tag_init, tag_send, tag_recv, tag_status;
} rs_grpc_stream_call;

typedef struct rs_grpc_conn {
    char addr[300]; /* "host:port", names the peer in errors */
    grpc_channel *channel;
    grpc_completion_queue *cq;
    void *reg[RS_GRPC_NUM_METHODS];
    int recstore; /* RecStore's wire (recstoreps.ParameterService) */
    void *rs_reg[RS_RSMSG_NUM_METHODS];
    size_t requests; /* requests outstanding (RecStore: calls may be more) */
    uint32_t timeout_ms;
    uint32_t max_in_flight;
    /* submitted calls not yet returned by next(), in submission order; ring_cap = max_in_flight */
    rs_grpc_pending **ring;
    size_t ring_cap, head, count;
    uint32_t on_wire;
    rs_grpc_pending **free_list;
    size_t free_count, free_cap;
    rs_grpc_scratch scratch;
    grpc_metadata auth_md; /* "authorization: Bearer <token>" on every call; auth_n = 0 or 1 */
    size_t auth_n;
    void *stream_reg;
    rs_grpc_stream_call *st; /* st_cap of them (the streams asked for), NULL on unary calls */
    unsigned st_cap, nst;    /* nst: streams opened */
    int st_auto;             /* no streams=N: the count follows the process (see the top) */
    rs_copy_mode copy;       /* client_copy: how GET rows reach rows_out */
} rs_grpc_conn;

/* ---- the process's gRPC client threads ---------------------------------------------------- */

/* A thread counts from its first submit on any connection until it exits; the count is compared
 * with the CPUs the process may run on (rs_cpu_count). */
static pthread_once_t census_once = PTHREAD_ONCE_INIT;
static pthread_key_t census_key;
static unsigned census_cpus = UINT_MAX; /* UINT_MAX: unknown, never crowded */
static unsigned census_threads;
static __thread int census_counted;

static void census_leave(void *unused) {
    (void)unused;
    __atomic_sub_fetch(&census_threads, 1, __ATOMIC_RELAXED);
}

static void census_init(void) {
    if (pthread_key_create(&census_key, census_leave) != 0) return;
    census_cpus = rs_cpu_count();
}

/* Count the calling thread (once), and say whether the process's gRPC client threads now
 * outnumber its CPUs. */
static int threads_crowded(void) {
    pthread_once(&census_once, census_init);
    if (census_cpus == UINT_MAX) return 0;
    if (!census_counted && pthread_setspecific(census_key, &census_counted) == 0) {
        census_counted = 1;
        __atomic_add_fetch(&census_threads, 1, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&census_threads, __ATOMIC_RELAXED) > census_cpus;
}

static gpr_timespec deadline_in_ms(uint32_t ms) {
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* ---- pending entries ----------------------------------------------------------------------- */

static rs_grpc_pending *pending_get(rs_grpc_conn *c) {
    if (c->free_count) return c->free_list[--c->free_count];
    rs_grpc_pending *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    grpc_metadata_array_init(&p->initial_md);
    grpc_metadata_array_init(&p->trailing_md);
    p->details = grpc_empty_slice();
    return p;
}

/* Release what a finished call holds; the entry goes back to the free list. */
static void pending_put(rs_grpc_conn *c, rs_grpc_pending *p) {
    if (p->call) grpc_call_unref(p->call);
    if (p->send_bb) grpc_byte_buffer_destroy(p->send_bb);
    if (p->recv_bb) grpc_byte_buffer_destroy(p->recv_bb);
    grpc_metadata_array_destroy(&p->initial_md);
    grpc_metadata_array_destroy(&p->trailing_md);
    grpc_metadata_array_init(&p->initial_md);
    grpc_metadata_array_init(&p->trailing_md);
    grpc_slice_unref(p->details);
    p->details = grpc_empty_slice();
    if (p->error_string) gpr_free((void *)p->error_string);
    p->error_string = NULL;
    if (p->counted) rs_copy_rows_pending(-(int64_t)p->counted);
    p->counted = 0;
    p->call = NULL;
    p->send_bb = p->recv_bb = NULL;
    p->done = 0;
    p->on_stream = 0;
    p->sk = -1;
    if (c->free_count == c->free_cap) {
        size_t cap = c->free_cap ? c->free_cap * 2 : 16;
        rs_grpc_pending **fl = realloc(c->free_list, cap * sizeof *fl);
        if (!fl) {
            grpc_metadata_array_destroy(&p->initial_md);
            grpc_metadata_array_destroy(&p->trailing_md);
            free(p);
            return;
        }
        c->free_list = fl;
        c->free_cap = cap;
    }
    c->free_list[c->free_count++] = p;
}

/* ---- the streams --------------------------------------------------------------------------- */

static rs_grpc_pending *ring_at(rs_grpc_conn *c, size_t i) {
    return c->ring[(c->head + i) % c->ring_cap];
}

/* The oldest entry waiting on stream k (k >= 0), or the oldest not yet sent (k = -1). */
static rs_grpc_pending *stream_oldest(rs_grpc_conn *c, int k) {
    for (size_t i = 0; i < c->count; i++) {
        rs_grpc_pending *p = ring_at(c, i);
        if (p->on_stream && !p->done && p->sk == k) return p;
    }
    return NULL;
}

static int streams_usable(const rs_grpc_conn *c) {
    for (unsigned k = 0; k < c->nst; k++)
        if (c->st[k].usable) return 1;
    return 0;
}

/* Stop using stream k; its batches complete, and its status batch fails what was sent on it. */
static void stream_break(rs_grpc_conn *c, unsigned k, grpc_status_code code, const char *why) {
    rs_grpc_stream_call *st = &c->st[k];
    st->usable = 0;
    if (st->cancelled) return;
    st->cancelled = 1;
    grpc_call_cancel_with_status(st->call, code, why, NULL);
}

static void streams_break(rs_grpc_conn *c, grpc_status_code code, const char *why) {
    for (unsigned k = 0; k < c->nst; k++)
        if (c->st[k].call) stream_break(c, k, code, why);
}

static int stream_batch(rs_grpc_conn *c, rs_grpc_stream_call *st, const grpc_op *ops, size_t n,
                        void *tag) {
    if (grpc_call_start_batch(st->call, ops, n, tag, NULL) != GRPC_CALL_OK) return -1;
    c->on_wire++;
    return 0;
}

static int stream_start(rs_grpc_conn *c, rs_grpc_stream_call *st);

/* The stream the next request goes on: the usable one with no send in flight that carries the
 * fewest entries; -1 if none. Counting its streams by the process (st_auto), a connection uses
 * only its first usable stream while the process's gRPC client threads fit its CPUs; past that,
 * finding none idle, it opens one more (up to st_cap). */
static int stream_pick(rs_grpc_conn *c) {
    int best = -1, crowded = !c->st_auto || threads_crowded();
    for (unsigned k = 0; k < c->nst; k++) {
        const rs_grpc_stream_call *st = &c->st[k];
        if (!st->usable) continue;
        if (!crowded) return st->sending ? -1 : (int)k;
        if (!st->sending && (best < 0 || st->waiting < c->st[best].waiting)) best = (int)k;
    }
    if (best < 0 && c->st_auto && crowded && c->nst < c->st_cap && streams_usable(c)) {
        rs_grpc_stream_call *st = &c->st[c->nst++]; /* counted even if it fails: close() frees it */
        if (stream_start(c, st) == 0) best = (int)(st - c->st);
    }
    return best;
}

/* Send unsent entries on idle streams, oldest first; keep a receive posted on every stream that
 * has entries waiting. */
static void stream_kick(rs_grpc_conn *c) {
    grpc_op op;
    rs_grpc_pending *p;
    int k;
    while ((p = stream_oldest(c, -1)) != NULL && (k = stream_pick(c)) >= 0) {
        rs_grpc_stream_call *st = &c->st[k];
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = p->send_bb;
        if (stream_batch(c, st, &op, 1, &st->tag_send) != 0) {
            stream_break(c, (unsigned)k, GRPC_STATUS_INTERNAL, "cannot send on the stream");
            continue;
        }
        st->out = p->send_bb; /* the stream owns it until the batch completes */
        p->send_bb = NULL;
        p->sk = k;
        st->sending = 1;
        st->waiting++;
    }
    for (unsigned j = 0; j < c->nst; j++) {
        rs_grpc_stream_call *st = &c->st[j];
        if (!st->usable || st->recving || !st->waiting) continue;
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &st->in;
        if (stream_batch(c, st, &op, 1, &st->tag_recv) != 0) {
            stream_break(c, j, GRPC_STATUS_INTERNAL, "cannot receive on the stream");
            continue;
        }
        st->recving = 1;
    }
}

/* Fail p with stream st's status (or UNAVAILABLE if the stream ended cleanly). */
static void stream_fail(rs_grpc_pending *p, const rs_grpc_stream_call *st) {
    p->done = 1;
    p->status = st->status != GRPC_STATUS_OK ? st->status : GRPC_STATUS_UNAVAILABLE;
    grpc_slice_unref(p->details);
    p->details = st->status != GRPC_STATUS_OK
                     ? grpc_slice_ref(st->details)
                     : grpc_slice_from_static_string("the server ended the stream");
}

static void stream_event(rs_grpc_conn *c, unsigned k, char *tag, int ok) {
    rs_grpc_stream_call *st = &c->st[k];
    if (tag == &st->tag_init) {
        if (!ok) stream_break(c, k, GRPC_STATUS_UNAVAILABLE, "stream not opened");
    } else if (tag == &st->tag_send) {
        st->sending = 0;
        grpc_byte_buffer_destroy(st->out);
        st->out = NULL;
        if (!ok) stream_break(c, k, GRPC_STATUS_UNAVAILABLE, "send failed");
    } else if (tag == &st->tag_recv) {
        st->recving = 0;
        rs_grpc_pending *p = stream_oldest(c, (int)k);
        if (ok && st->in && p) {
            p->recv_bb = st->in;
            p->status = GRPC_STATUS_OK;
            p->done = 1;
            st->in = NULL;
            st->waiting--;
        } else { /* the stream ended (no message), failed, or answered what was not asked */
            int stray = ok && st->in && !p;
            if (st->in) grpc_byte_buffer_destroy(st->in);
            st->in = NULL;
            stream_break(c, k, GRPC_STATUS_INTERNAL,
                         stray ? "the server answered a request it was not sent"
                               : "the stream ended");
        }
    } else { /* tag_status: the call is over; what was sent on it fails with its status */
        st->usable = 0;
        st->cancelled = 1;
        for (rs_grpc_pending *p; (p = stream_oldest(c, (int)k)) != NULL;)
            stream_fail(p, st);
        st->waiting = 0;
        /* no stream left: what was never sent fails too (later requests go unary) */
        if (!streams_usable(c))
            for (rs_grpc_pending *p; (p = stream_oldest(c, -1)) != NULL;)
                stream_fail(p, st);
    }
    stream_kick(c);
}

/* Wait for one batch completion on the CQ (any call). RS_ETIMEDOUT if `until` passes first. */
static int drive_one(rs_grpc_conn *c, gpr_timespec until) {
    grpc_event ev = grpc_completion_queue_next(c->cq, until, NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) return RS_ETIMEDOUT;
    if (ev.type != GRPC_OP_COMPLETE) return RS_ECLOSED;
    char *t = ev.tag;
    if (c->st && t >= (char *)c->st && t < (char *)(c->st + c->st_cap)) {
        c->on_wire--;
        stream_event(c, (unsigned)((t - (char *)c->st) / (ptrdiff_t)sizeof c->st[0]), t,
                     ev.success);
        return 0;
    }
    rs_grpc_pending *p = ev.tag;
    p->done = 1;
    if (!ev.success && p->status == GRPC_STATUS_OK)
        p->status = GRPC_STATUS_INTERNAL; /* the batch failed as a whole */
    c->on_wire--;
    return 0;
}

/* Wait for p's completion. A unary call: gRPC enforces its deadline and this only guards against
 * a lost one; a stream message has no gRPC deadline, so its timeout cancels the stream here. */
static void wait_done(rs_grpc_conn *c, rs_grpc_pending *p) {
    gpr_timespec guard = p->on_stream
                             ? p->deadline
                             : gpr_time_add(p->deadline, gpr_time_from_millis(5000, GPR_TIMESPAN));
    int cancelled = 0;
    while (!p->done) {
        if (drive_one(c, cancelled ? gpr_inf_future(GPR_CLOCK_MONOTONIC) : guard) == RS_ETIMEDOUT) {
            if (p->on_stream && p->sk >= 0)
                stream_break(c, (unsigned)p->sk, GRPC_STATUS_DEADLINE_EXCEEDED,
                             "no reply within the timeout");
            else if (p->on_stream) /* every stream is stuck sending */
                streams_break(c, GRPC_STATUS_DEADLINE_EXCEEDED, "no reply within the timeout");
            else
                grpc_call_cancel_with_status(p->call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                             "no completion after the deadline", NULL);
            cancelled = 1;
        }
    }
}

/* ---- errors -------------------------------------------------------------------------------- */

static int call_error(rs_grpc_conn *c, const rs_grpc_pending *p, rs_error *err) {
    int rc = rs_grpc_status_code(p->status);
    char details[256];
    size_t dl = GRPC_SLICE_LENGTH(p->details);
    if (dl >= sizeof details) dl = sizeof details - 1;
    memcpy(details, GRPC_SLICE_START_PTR(p->details), dl);
    details[dl] = 0;
    const char *method = p->rs_method >= 0
                             ? rs_rsmsg_method_name((rs_rsmsg_method)p->rs_method)
                             : rs_grpc_method_paths[p->method] + sizeof("/recstore.PSService/") - 1;
    const char *cause;
    switch (p->status) {
    case GRPC_STATUS_UNAVAILABLE:
        cause = strstr(details, "refused") || strstr(details, "Connection refused")
                    ? "connection refused"
                    : "server unavailable or connection lost";
        break;
    case GRPC_STATUS_DEADLINE_EXCEEDED: cause = "deadline exceeded"; break;
    case GRPC_STATUS_CANCELLED:
        cause = "call cancelled (server stopping or connection lost)";
        break;
    default: cause = "server status"; break;
    }
    if (p->status == GRPC_STATUS_DEADLINE_EXCEEDED)
        return rs_error_set(err, rc, "grpc %s: %s: %s (timeout %u ms)", c->addr, method, cause,
                            c->timeout_ms);
    return rs_error_set(err, rc, "grpc %s: %s: %s (%s: %s)", c->addr, method, cause,
                        rs_grpc_status_name(p->status), details[0] ? details : "no details");
}

/* ---- replies ------------------------------------------------------------------------------ */

/* Copy bytes [from, from + n) of a slice buffer to dst; with streaming stores when `stream`
 * (rs_copy_rows_streams, copy.h; the caller fences once with rs_copy_rows_end). */
static void slices_copy(const grpc_slice_buffer *sb, size_t from, size_t n, uint8_t *dst,
                        int stream) {
    for (size_t i = 0; i < sb->count && n; i++) {
        size_t len = GRPC_SLICE_LENGTH(sb->slices[i]);
        if (from >= len) {
            from -= len;
            continue;
        }
        size_t take = len - from < n ? len - from : n;
        rs_copy_rows_piece(dst, GRPC_SLICE_START_PTR(sb->slices[i]) + from, take, stream);
        dst += take;
        n -= take;
        from = 0;
    }
}

/*
 * A GET reply arrives in several slices; gathering it only to copy its rows out again would touch
 * every row twice. Replies put the rows field last (rs_ps_response_encode_header), so when the
 * message ends with field 4 holding exactly `rows_len` bytes, the rows are copied from the slices
 * straight into rows_out and only the bytes before that field are decoded, by the shared codec.
 * The check is exact: the head must decode as a complete PSResponse without rows and be followed
 * by the key 0x22 (field 4, length-delimited) and the canonical varint of rows_len, which then
 * spans precisely to the end of the message — the same split a full parse would make. Returns 1
 * when out is filled (rows in rows_out), 0 when the message has another shape (the caller
 * decodes it whole), RS_ENOMEM.
 */
static int reply_rows_direct(grpc_byte_buffer *bb, void *rows_out, size_t rows_len,
                             rs_copy_mode mode, rs_grpc_scratch *scratch, rs_ps_response *out) {
    if (!bb || bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE) return 0;
    const grpc_slice_buffer *sb = &bb->data.raw.slice_buffer;
    if (sb->count < 2 || !rows_out || !rows_len || sb->length <= rows_len) return 0;
    uint8_t key[11];
    size_t k = 0;
    key[k++] = 0x22;
    for (uint64_t v = rows_len;; v >>= 7) {
        key[k++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) break;
    }
    size_t head = sb->length - rows_len; /* header fields + key + length of the rows field */
    if (head < k || head > 8192) return 0;
    if (scratch->cap < head) {
        uint8_t *b = realloc(scratch->buf, 8192);
        if (!b) return RS_ENOMEM;
        scratch->buf = b;
        scratch->cap = 8192;
    }
    slices_copy(sb, 0, head, scratch->buf, 0);
    if (memcmp(scratch->buf + head - k, key, k) != 0) return 0;
    if (rs_ps_response_decode(scratch->buf, head - k, NULL, 0, out, NULL) != 0 || out->rows_len)
        return 0;
    int stream = rs_copy_rows_streams(mode);
    slices_copy(sb, head, rows_len, rows_out, stream);
    rs_copy_rows_end(stream);
    out->rows = rows_out;
    out->rows_len = rows_len;
    return 1;
}

/* A forward-only reader over a slice buffer: the bytes left in the current slice, read in place. */
typedef struct slice_reader {
    const grpc_slice_buffer *sb;
    size_t idx;       /* current slice */
    const uint8_t *p; /* next byte in it */
    size_t left;      /* bytes left in it */
} slice_reader;

static void reader_init(slice_reader *r, const grpc_slice_buffer *sb) {
    r->sb = sb;
    r->idx = 0;
    r->p = sb->count ? GRPC_SLICE_START_PTR(sb->slices[0]) : NULL;
    r->left = sb->count ? GRPC_SLICE_LENGTH(sb->slices[0]) : 0;
}

/* Copy the next n bytes to dst (NULL: skip them), across slices. The caller has checked that the
 * buffer holds them. */
static void reader_read(slice_reader *r, uint8_t *dst, size_t n) {
    while (n) {
        if (!r->left) {
            if (++r->idx >= r->sb->count) return;
            r->p = GRPC_SLICE_START_PTR(r->sb->slices[r->idx]);
            r->left = GRPC_SLICE_LENGTH(r->sb->slices[r->idx]);
            continue;
        }
        size_t take = n < r->left ? n : r->left;
        if (dst) {
            memcpy(dst, r->p, take);
            dst += take;
        }
        r->p += take;
        r->left -= take;
        n -= take;
    }
}

/*
 * RecStore's GetParameterResponse read straight from gRPC's slices into the caller's rows (as
 * reply_rows_direct does for the native wire), in one pass: the message must be exactly field 1
 * holding one block of m items. The block is checked as rs_rsblock_validate checks it (count,
 * every offset, every item's span against its dim, the end) while each item's floats are copied
 * from its slice to its row (cut or zero-padded; a dim-0 item is a zero row). The usual reply
 * (every key found at the row's dim) is checked branch-free, as rs_rsblock_read_rows does: the
 * offsets against that layout, then each item's dim while its row is copied. Returns 1 when rows
 * and resp are filled, 0 when the message has another shape or the block does not add up (the
 * caller then decodes it whole, which names the offending offset).
 */
static int rs_get_direct(grpc_byte_buffer *bb, size_t m, size_t vs, uint8_t *rows,
                         rs_grpc_scratch *scratch, rs_ps_response *resp) {
    if (!bb || bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE || !rows ||
        !m || m > RS_RSMSG_MAX_KEYS_PER_REQUEST)
        return 0;
    const grpc_slice_buffer *sb = &bb->data.raw.slice_buffer;
    uint8_t head[16];
    size_t total = sb->length;
    if (total < 8) return 0;
    slices_copy(sb, 0, total < sizeof head ? total : sizeof head, head, 0);
    if (head[0] != 0x0a) return 0;
    uint64_t blen = 0;
    size_t h = 1;
    for (unsigned shift = 0; h < sizeof head && shift < 35; shift += 7) {
        blen |= (uint64_t)(head[h] & 0x7f) << shift;
        if (!(head[h++] & 0x80)) break;
    }
    size_t table = 4 + 4 * m;
    if (h + blen != total || blen < table || blen > INT32_MAX) return 0;
    if (scratch->cap < table) {
        uint8_t *b = realloc(scratch->buf, 8192);
        if (!b) return 0;
        scratch->buf = b;
        scratch->cap = 8192;
    }
    slice_reader rd;
    reader_init(&rd, sb);
    reader_read(&rd, NULL, h);
    reader_read(&rd, scratch->buf, table);
    int32_t n, prev = 0;
    memcpy(&n, scratch->buf, 4);
    if ((size_t)n != m) return 0;
    const size_t dim = vs / 4, area = blen - table;
    uint32_t found = 0;
    if (area == m * (RS_RSBLOCK_ITEM_HEAD + vs)) { /* the usual reply: every key found at dim */
        const uint32_t step = (uint32_t)(RS_RSBLOCK_ITEM_HEAD + vs);
        uint32_t bad = 0, want = step;
        for (size_t i = 0; i < m; i++, want += step) { /* branch-free: one OR per offset */
            uint32_t e;
            memcpy(&e, scratch->buf + 4 + 4 * i, 4);
            bad |= e ^ want;
        }
        for (size_t i = 0; i < m && !bad; i++) {
            uint8_t ih[RS_RSBLOCK_ITEM_HEAD];
            uint32_t d;
            if (rd.left >= step) { /* the whole item lies in this slice */
                memcpy(&d, rd.p + 8, 4);
                memcpy(rows + i * vs, rd.p + RS_RSBLOCK_ITEM_HEAD, vs);
                rd.p += step;
                rd.left -= step;
            } else {
                reader_read(&rd, ih, RS_RSBLOCK_ITEM_HEAD);
                memcpy(&d, ih + 8, 4);
                reader_read(&rd, rows + i * vs, vs);
            }
            bad |= d ^ (uint32_t)dim;
        }
        if (bad) return 0; /* the caller's full decode names what does not add up */
        found = (uint32_t)m;
        goto done;
    }
    for (size_t i = 0; i < m; i++) {
        int32_t end, d;
        memcpy(&end, scratch->buf + 4 + 4 * i, 4);
        int64_t span = (int64_t)end - prev;
        if (span < RS_RSBLOCK_ITEM_HEAD || (uint64_t)(uint32_t)end > area) return 0;
        if (rd.left >= RS_RSBLOCK_ITEM_HEAD) { /* the item's head lies in this slice */
            memcpy(&d, rd.p + 8, 4);
            rd.p += RS_RSBLOCK_ITEM_HEAD;
            rd.left -= RS_RSBLOCK_ITEM_HEAD;
        } else {
            uint8_t ih[RS_RSBLOCK_ITEM_HEAD];
            reader_read(&rd, ih, RS_RSBLOCK_ITEM_HEAD);
            memcpy(&d, ih + 8, 4);
        }
        if (d < 0 || RS_RSBLOCK_ITEM_HEAD + 4 * (int64_t)d != span) return 0;
        size_t take = (size_t)d < dim ? (size_t)d : dim;
        uint8_t *row = rows + i * vs;
        if (rd.left >= 4 * take) { /* the floats lie in this slice */
            memcpy(row, rd.p, 4 * take);
            rd.p += 4 * take;
            rd.left -= 4 * take;
        } else {
            reader_read(&rd, row, 4 * take);
        }
        if (take < (size_t)d) reader_read(&rd, NULL, 4 * ((size_t)d - take));
        if (take < dim) memset(row + 4 * take, 0, 4 * (dim - take));
        found += d > 0;
        prev = end;
    }
    if ((size_t)prev != area) return 0;
done:
    memset(resp, 0, offsetof(rs_ps_response, error));
    resp->error[0] = resp->reply[0] = 0;
    resp->value_size = (uint32_t)vs;
    resp->num_found = found;
    return 1;
}

/* ---- ops ----------------------------------------------------------------------------------- */

static void rs_grpc_conn_close(void *conn);
static int rs_grpc_conn_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                               size_t rows_cap, rs_error *err);
static int rs_grpc_conn_next(void *conn, rs_ps_completion *out, rs_error *err);

/* Start one call of `method` carrying `msg` (owned by the call on success). */
static int start_call(rs_grpc_conn *c, rs_grpc_pending *p, grpc_byte_buffer *msg, rs_error *err) {
    p->deadline = deadline_in_ms(c->timeout_ms);
    p->status = GRPC_STATUS_OK;
    p->call = grpc_channel_create_registered_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                                  p->reg, p->deadline, NULL);
    if (!p->call) return rs_error_set(err, RS_ENOMEM, "grpc %s: cannot create a call", c->addr);
    p->send_bb = msg;
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].data.send_initial_metadata.count = c->auth_n;
    ops[n++].data.send_initial_metadata.metadata = c->auth_n ? &c->auth_md : NULL;
    if (msg) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = msg;
    }
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &p->initial_md;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &p->recv_bb;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &p->trailing_md;
    ops[n].data.recv_status_on_client.status = &p->status;
    ops[n].data.recv_status_on_client.status_details = &p->details;
    ops[n++].data.recv_status_on_client.error_string = &p->error_string;
    grpc_call_error ce = grpc_call_start_batch(p->call, ops, n, p, NULL);
    if (ce != GRPC_CALL_OK)
        return rs_error_set(err, RS_EIO, "grpc %s: cannot start a call: %s", c->addr,
                            grpc_call_error_to_string(ce));
    c->on_wire++;
    return 0;
}

/* After the channel failed to connect: a call on it fails at once with the transport's reason. */
static int connect_failure(rs_grpc_conn *c, rs_error *err) {
    rs_grpc_pending *p = pending_get(c);
    if (!p) return rs_error_set(err, RS_ECONN, "grpc %s: cannot connect", c->addr);
    p->method = RS_PS_COMMAND - 1;
    p->reg = c->reg[p->method];
    p->rs_method = -1;
    int rc = start_call(c, p, NULL, err);
    if (rc == 0) {
        wait_done(c, p);
        if (p->status == GRPC_STATUS_OK) {
            rc = rs_error_set(err, RS_ECONN, "grpc %s: cannot connect", c->addr);
        } else {
            char details[300];
            size_t dl = GRPC_SLICE_LENGTH(p->details);
            if (dl >= sizeof details) dl = sizeof details - 1;
            memcpy(details, GRPC_SLICE_START_PTR(p->details), dl);
            details[dl] = 0;
            rc = rs_error_set(err, RS_ECONN, "grpc %s: cannot connect: %s (%s)", c->addr,
                              strstr(details, "refused") ? "connection refused" : "unreachable",
                              details);
        }
    }
    pending_put(c, p);
    return rc;
}

/* Open stream k (a Stream call with its status batch); usable once opened. */
static int stream_start(rs_grpc_conn *c, rs_grpc_stream_call *st) {
    st->call = grpc_channel_create_registered_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                                   c->stream_reg,
                                                   gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (!st->call) return -1;
    grpc_metadata_array_init(&st->initial_md);
    grpc_metadata_array_init(&st->trailing_md);
    st->details = grpc_empty_slice();
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = c->auth_n;
    ops[0].data.send_initial_metadata.metadata = c->auth_n ? &c->auth_md : NULL;
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &st->initial_md;
    if (stream_batch(c, st, ops, 2, &st->tag_init) != 0) {
        st->cancelled = 1; /* nothing in flight: close() only drops the call */
        return -1;
    }
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &st->trailing_md;
    ops[0].data.recv_status_on_client.status = &st->status;
    ops[0].data.recv_status_on_client.status_details = &st->details;
    ops[0].data.recv_status_on_client.error_string = &st->error_string;
    if (stream_batch(c, st, ops, 1, &st->tag_status) != 0) {
        st->cancelled = 1;
        grpc_call_cancel(st->call, NULL);
        return -1;
    }
    st->usable = 1;
    return 0;
}

/* Room for `cap` Stream calls; open `n` of them and ping on each; requests use the streams whose
 * ping is answered. A server without Stream (UNIMPLEMENTED), or any failure here, leaves the
 * connection on unary calls. */
static void streams_open(rs_grpc_conn *c, unsigned n, unsigned cap) {
    if (!(c->st = calloc(cap, sizeof *c->st))) return;
    c->st_cap = cap;
    c->stream_reg = grpc_channel_register_call(c->channel, RS_GRPC_STREAM_PATH, NULL, NULL);
    for (c->nst = 0; c->nst < n; c->nst++)
        if (stream_start(c, &c->st[c->nst]) != 0) {
            c->nst++; /* close() releases what it holds */
            streams_break(c, GRPC_STATUS_INTERNAL, "cannot open the stream");
            return;
        }
    /* one ping per stream: each goes at once on an idle stream, so stream k carries ping k */
    rs_ps_request ping = {.op = RS_PS_COMMAND, .command = "ping", .command_len = 4};
    rs_error e = {0};
    for (unsigned k = 0; k < n; k++)
        if (rs_grpc_conn_submit(c, &ping, k, NULL, 0, &e) != 0) {
            streams_break(c, GRPC_STATUS_INTERNAL, "cannot send the ping");
            break;
        }
    while (c->count) {
        rs_ps_completion done;
        int rc = rs_grpc_conn_next(c, &done, &e);
        if ((rc != 0 || done.resp.status != RS_PS_OK) && done.tag < c->nst)
            stream_break(c, (unsigned)done.tag, GRPC_STATUS_CANCELLED,
                         "the ping on the stream failed");
    }
}

static int connect_wire(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                        int recstore, void **out, rs_error *err) {
    int rc;
    rs_grpc_options o;
    *out = NULL;
    if ((rc = rs_grpc_options_parse(opts ? opts->extra : NULL, 0, &o, err)) != 0) return rc;
    if ((rc = rs_grpc_options_apply_process(&o, 0, err)) != 0) return rc;
    grpc_init();
    rs_grpc_conn *c = calloc(1, sizeof *c);
    if (!c) {
        grpc_shutdown();
        return rs_error_set(err, RS_ENOMEM, "grpc client: out of memory");
    }
    c->timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : RS_PS_DEFAULT_TIMEOUT_MS;
    if (opts && opts->auth && opts->auth->len) {
        char v[8 + RS_AUTH_TOKEN_MAX];
        memcpy(v, "Bearer ", 7);
        memcpy(v + 7, opts->auth->bytes, opts->auth->len);
        c->auth_md.key = grpc_slice_from_static_string("authorization");
        c->auth_md.value = grpc_slice_from_copied_buffer(v, 7 + opts->auth->len);
        memset(v, 0, sizeof v);
        c->auth_n = 1;
    }
    c->max_in_flight =
        opts && opts->max_in_flight ? opts->max_in_flight : RS_GRPC_DEFAULT_IN_FLIGHT;
    if (opts && opts->want_in_flight > c->max_in_flight)
        c->max_in_flight = opts->want_in_flight; /* room for the chunks of big batches */
    if ((rc = rs_grpc_format_addr(host, port, c->addr, sizeof c->addr, err)) != 0) goto fail;
    c->ring_cap = c->max_in_flight;
    c->ring = calloc(c->ring_cap, sizeof *c->ring);
    if (!c->ring) {
        rc = rs_error_set(err, RS_ENOMEM, "grpc %s: out of memory", c->addr);
        goto fail;
    }
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = (int)o.max_reply_bytes},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = -1},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_HTTP2_MAX_FRAME_SIZE,
         .value.integer = (int)o.max_frame_size},
    };
    grpc_channel_args cargs = {.num_args = sizeof args / sizeof args[0], .args = args};
    grpc_channel_credentials *creds = NULL;
    if ((rc = rs_grpc_channel_creds(&o, &creds, err))) goto fail;
    c->channel = grpc_channel_create(c->addr, creds, &cargs);
    grpc_channel_credentials_release(creds);
    c->cq = grpc_completion_queue_create_for_next(NULL);
    if (!c->channel || !c->cq) {
        rc = rs_error_set(err, RS_ENOMEM, "grpc %s: cannot create a channel", c->addr);
        goto fail;
    }
    for (int m = 0; m < RS_GRPC_NUM_METHODS; m++)
        c->reg[m] = grpc_channel_register_call(c->channel, rs_grpc_method_paths[m], NULL, NULL);
    c->recstore = recstore;
    for (int m = 0; recstore && m < RS_RSMSG_NUM_METHODS; m++) {
        char path[96];
        snprintf(path, sizeof path, "/recstoreps.ParameterService/%s",
                 rs_rsmsg_method_name((rs_rsmsg_method)m));
        c->rs_reg[m] = grpc_channel_register_call(c->channel, path, NULL, NULL);
    }

    /* connect now, so a refused or unreachable server is reported by connect() */
    gpr_timespec until = deadline_in_ms(c->timeout_ms);
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(c->channel, 1);
    while (st != GRPC_CHANNEL_READY) {
        if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
            rc = connect_failure(c, err);
            goto fail;
        }
        int watch_tag;
        grpc_channel_watch_connectivity_state(c->channel, st, until, c->cq, &watch_tag);
        grpc_event ev =
            grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
            rc = rs_error_set(err, RS_ETIMEDOUT,
                              "grpc %s: cannot connect: not ready within the %u ms deadline",
                              c->addr, c->timeout_ms);
            goto fail;
        }
        st = grpc_channel_check_connectivity_state(c->channel, 0);
    }
    /* gRPC core made the connection: find it (and the process's others to this port, which got
     * the same option) among the descriptors */
    if ((rc = rs_tcp_cc_apply_port(port, 0, &o.tcp_cc, "grpc client", NULL, NULL, 0, err)) < 0)
        goto fail;
    c->copy = o.client_copy;
    if (o.stream && !recstore) {
        /* more streams than requests in flight would never carry a request */
        unsigned n = o.streams ? o.streams : RS_GRPC_AUTO_STREAMS;
        if (n > c->max_in_flight) n = c->max_in_flight;
        c->st_auto = !o.streams;
        streams_open(c, c->st_auto ? 1 : n, n);
    }
    *out = c;
    return 0;
fail:
    rs_grpc_conn_close(c);
    return rc;
}

static int rs_grpc_conn_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                                void **out, rs_error *err) {
    return connect_wire(host, port, opts, 0, out, err);
}

static int rs_grpc_rs_conn_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                                   void **out, rs_error *err) {
    return connect_wire(host, port, opts, 1, out, err);
}

/* Append p to the ring of calls, growing it (RecStore requests take one entry per call). */
static int ring_push(rs_grpc_conn *c, rs_grpc_pending *p) {
    if (c->count == c->ring_cap) {
        size_t cap = c->ring_cap * 2;
        rs_grpc_pending **r = malloc(cap * sizeof *r);
        if (!r) return -1;
        for (size_t i = 0; i < c->count; i++)
            r[i] = ring_at(c, i);
        free(c->ring);
        c->ring = r;
        c->ring_cap = cap;
        c->head = 0;
    }
    c->ring[(c->head + c->count) % c->ring_cap] = p;
    c->count++;
    return 0;
}

/* RecStore's wire: one call per chunk of at most RS_RSMSG_MAX_KEYS_PER_REQUEST keys. */
static int rs_submit(rs_grpc_conn *c, const rs_ps_request *req, uint64_t tag, void *rows_out,
                     size_t vs, rs_error *err) {
    size_t n = req->op == RS_PS_COMMAND ? 1 : req->num_keys;
    if (req->op != RS_PS_COMMAND && n == 0)
        return rs_error_set(err, RS_EINVAL, "grpc %s: RecStore's wire has no request of 0 keys",
                            c->addr);
    for (size_t from = 0; from < n; from += RS_RSMSG_MAX_KEYS_PER_REQUEST) {
        size_t m =
            n - from < RS_RSMSG_MAX_KEYS_PER_REQUEST ? n - from : RS_RSMSG_MAX_KEYS_PER_REQUEST;
        rs_rsmsg_client_req cr;
        int rc = rs_rsmsg_client_size(req, from, m, "default", 0, &cr, err);
        if (rc) return rc; /* only for the first chunk: commands are one call */
        grpc_slice s = cr.msg_len ? grpc_slice_malloc(cr.msg_len) : grpc_empty_slice();
        rs_rsmsg_client_encode(req, from, m, "default", 0, GRPC_SLICE_START_PTR(s), NULL);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        rs_grpc_pending *p = pending_get(c);
        if (!bb || !p) {
            if (bb) grpc_byte_buffer_destroy(bb);
            if (p) pending_put(c, p);
            rc = rs_error_set(err, RS_ENOMEM, "grpc %s: out of memory", c->addr);
        } else {
            p->tag = tag;
            p->method = (int)req->op - 1;
            p->reg = c->rs_reg[cr.method];
            p->rs_method = (int)cr.method;
            p->rs_keys = m;
            p->rs_value_size = (uint32_t)vs;
            p->rows_out = rows_out ? (uint8_t *)rows_out : NULL;
            p->rows_cap = from; /* RecStore: the chunk's first key index (rows go there) */
            p->last = from + m >= n;
            rc = start_call(c, p, bb, err);
            if (rc == 0 && ring_push(c, p) != 0) {
                rc = rs_error_set(err, RS_ENOMEM, "grpc %s: out of memory", c->addr);
                p->last = 1; /* the call is on the wire: next() must still drain it */
                grpc_call_cancel(p->call, NULL);
                c->ring[(c->head + c->count) % c->ring_cap] = p; /* cannot fail: ring not full */
                c->count++;
            } else if (rc != 0) {
                pending_put(c, p);
            }
        }
        if (rc) {
            if (from == 0) return rc;
            /* earlier chunks are on the wire: mark the last one sent as the request's end */
            c->ring[(c->head + c->count - 1) % c->ring_cap]->last = 1;
            c->ring[(c->head + c->count - 1) % c->ring_cap]->status = GRPC_STATUS_INTERNAL;
            break;
        }
    }
    c->requests++;
    return 0;
}

/* RecStore's wire: finish the oldest request, merging its calls. */
static int rs_next(rs_grpc_conn *c, rs_ps_completion *out, rs_error *err) {
    int rc = 0;
    uint32_t found = 0;
    rs_ps_response r;
    memset(&out->resp, 0, offsetof(rs_ps_response, error));
    out->resp.error[0] = out->resp.reply[0] = 0;
    for (;;) {
        rs_grpc_pending *p = c->ring[c->head];
        wait_done(c, p);
        c->head = (c->head + 1) % c->ring_cap;
        c->count--;
        out->tag = p->tag;
        int last = p->last;
        if (rc == 0 && p->status != GRPC_STATUS_OK) {
            rc = call_error(c, p, err);
            snprintf(out->resp.error, sizeof out->resp.error, "%.255s", err ? err->msg : "");
        } else if (rc == 0) {
            rs_grpc_span msg;
            rs_error e = {0};
            size_t vs = p->rs_value_size;
            uint8_t *rows = p->rows_out;
            int drc = 0;
            if (p->rs_method == RS_RSMSG_GET &&
                rs_get_direct(p->recv_bb, p->rs_keys, vs, rows ? rows + p->rows_cap * vs : NULL,
                              &c->scratch, &r))
                drc = 0;
            else if ((drc = rs_grpc_message_span(p->recv_bb, &c->scratch, &msg, &e)) == 0)
                drc = rs_rsmsg_client_decode((rs_rsmsg_method)p->rs_method, msg.data, msg.len, NULL,
                                             0, p->rs_keys, (uint32_t)vs,
                                             rows ? rows + p->rows_cap * vs : NULL, &r, &e);
            if (drc) {
                rc = rs_error_set(err, RS_EPROTO, "grpc %s: bad %s reply: %s", c->addr,
                                  rs_rsmsg_method_name((rs_rsmsg_method)p->rs_method),
                                  e.msg[0] ? e.msg : rs_strerror(drc));
            } else {
                found += r.num_found;
                if (r.status != RS_PS_OK && out->resp.status == RS_PS_OK) {
                    out->resp.status = r.status;
                    snprintf(out->resp.error, sizeof out->resp.error, "%s", r.error);
                }
                snprintf(out->resp.reply, sizeof out->resp.reply, "%s", r.reply);
                out->resp.value_size = r.value_size;
            }
        }
        pending_put(c, p);
        if (last) break;
    }
    c->requests--;
    out->resp.num_found = found;
    out->resp.rows = NULL;
    return rc;
}

static int rs_grpc_conn_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                               size_t rows_cap, rs_error *err) {
    rs_grpc_conn *c = conn;
    if (req->op < RS_PS_GET || req->op > RS_PS_COMMAND)
        return rs_error_set(err, RS_EINVAL, "grpc %s: unknown op %d", c->addr, (int)req->op);
    if (c->requests >= c->max_in_flight)
        return rs_error_set(err, RS_EBUSY, "grpc %s: %u requests outstanding (max_in_flight)",
                            c->addr, c->max_in_flight);
    if (c->recstore) {
        size_t vs = !req->num_keys         ? 0
                    : req->op == RS_PS_GET ? rows_cap / req->num_keys
                                           : req->rows_len / req->num_keys;
        if (req->op == RS_PS_GET && req->num_keys && !vs)
            return rs_error_set(err, RS_EINVAL, "grpc %s: Get without room for its rows", c->addr);
        return rs_submit(c, req, tag, rows_out, vs, err);
    }
    int on_stream = streams_usable(c);
    size_t len = rs_ps_request_encoded_size(req, 0);
    if (on_stream) len += RS_PS_METHOD_FIELD_BYTES;
    grpc_slice s = grpc_slice_malloc(len);
    uint8_t *m = GRPC_SLICE_START_PTR(s);
    size_t wrote = rs_ps_request_encode(req, 0, m);
    if (on_stream) wrote += rs_ps_request_encode_method(req->op, m + wrote);
    if (wrote < len) s = grpc_slice_sub_no_ref(s, 0, wrote);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    rs_grpc_pending *p = pending_get(c);
    if (!bb || !p) {
        if (bb) grpc_byte_buffer_destroy(bb);
        return rs_error_set(err, RS_ENOMEM, "grpc %s: out of memory", c->addr);
    }
    p->tag = tag;
    p->method = (int)req->op - 1;
    p->reg = c->reg[p->method];
    p->rs_method = -1;
    p->rows_out = rows_out;
    p->rows_cap = rows_cap;
    if (req->op == RS_PS_GET && rows_out && rows_cap) {
        p->counted = rows_cap;
        rs_copy_rows_pending((int64_t)rows_cap);
    }
    if (on_stream) {
        p->on_stream = 1;
        p->sk = -1;
        p->send_bb = bb;
        p->status = GRPC_STATUS_OK;
        p->deadline = deadline_in_ms(c->timeout_ms);
    } else {
        int rc = start_call(c, p, bb, err);
        if (rc != 0) {
            pending_put(c, p);
            return rc;
        }
    }
    c->ring[(c->head + c->count) % c->ring_cap] = p;
    c->count++;
    c->requests++;
    if (on_stream) stream_kick(c);
    return 0;
}

static int rs_grpc_conn_next(void *conn, rs_ps_completion *out, rs_error *err) {
    rs_grpc_conn *c = conn;
    if (c->count == 0)
        return rs_error_set(err, RS_EINVAL, "grpc %s: next() with no request outstanding", c->addr);
    if (c->recstore) return rs_next(c, out, err);
    rs_grpc_pending *p = c->ring[c->head];
    wait_done(c, p);
    c->head = (c->head + 1) % c->ring_cap;
    c->count--;
    c->requests--;
    out->tag = p->tag;
    int rc = 0;
    if (p->status != GRPC_STATUS_OK) {
        memset(&out->resp, 0, offsetof(rs_ps_response, error));
        out->resp.error[0] = 0;
        out->resp.reply[0] = 0;
        rc = call_error(c, p, err);
        snprintf(out->resp.error, sizeof out->resp.error, "%.255s", err ? err->msg : "");
        goto done;
    }
    rc = reply_rows_direct(p->recv_bb, p->rows_out, p->rows_cap, c->copy, &c->scratch, &out->resp);
    if (rc == 1) {
        rc = 0;
        goto done;
    }
    if (rc < 0) {
        rc = rs_error_set(err, rc, "grpc %s: out of memory for a reply", c->addr);
        goto done;
    }
    rs_grpc_span msg;
    rs_error e = {0};
    if ((rc = rs_grpc_message_span(p->recv_bb, &c->scratch, &msg, &e)) == 0)
        rc = rs_ps_response_decode(msg.data ? msg.data : (const uint8_t *)"", msg.len, NULL, 0,
                                   &out->resp, &e);
    if (rc != 0) {
        rc = rs_error_set(err, RS_EPROTO, "grpc %s: bad PSResponse: %s", c->addr,
                          e.msg[0] ? e.msg : rs_strerror(rc));
        goto done;
    }
    if (out->resp.rows_len) {
        if (!p->rows_out || out->resp.rows_len > p->rows_cap) {
            rc = rs_error_set(err, RS_EPROTO,
                              "grpc %s: response carries %zu row bytes, the request expected %zu",
                              c->addr, out->resp.rows_len, p->rows_out ? p->rows_cap : 0);
            goto done;
        }
        rs_copy_rows(p->rows_out, out->resp.rows, out->resp.rows_len, c->copy);
        out->resp.rows = p->rows_out;
    } else {
        out->resp.rows = NULL;
    }
done:
    pending_put(c, p);
    return rc;
}

static void rs_grpc_conn_close(void *conn) {
    rs_grpc_conn *c = conn;
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) {
        rs_grpc_pending *p = ring_at(c, i);
        if (!p->done && !p->on_stream) grpc_call_cancel(p->call, NULL);
    }
    streams_break(c, GRPC_STATUS_CANCELLED, "client closing");
    while (c->on_wire > 0 && drive_one(c, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0) {
    }
    for (unsigned k = 0; k < c->nst; k++) {
        rs_grpc_stream_call *st = &c->st[k];
        if (!st->call) continue;
        grpc_call_unref(st->call);
        if (st->in) grpc_byte_buffer_destroy(st->in);
        if (st->out) grpc_byte_buffer_destroy(st->out);
        grpc_metadata_array_destroy(&st->initial_md);
        grpc_metadata_array_destroy(&st->trailing_md);
        grpc_slice_unref(st->details);
        if (st->error_string) gpr_free((void *)st->error_string);
    }
    for (size_t i = 0; i < c->count; i++)
        pending_put(c, ring_at(c, i));
    for (size_t i = 0; i < c->free_count; i++) {
        grpc_metadata_array_destroy(&c->free_list[i]->initial_md);
        grpc_metadata_array_destroy(&c->free_list[i]->trailing_md);
        free(c->free_list[i]);
    }
    if (c->channel) grpc_channel_destroy(c->channel);
    if (c->auth_n) grpc_slice_unref(c->auth_md.value);
    if (c->cq) {
        grpc_completion_queue_shutdown(c->cq);
        while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(c->cq);
    }
    free(c->st);
    free(c->ring);
    free(c->free_list);
    free(c->scratch.buf);
    free(c);
    grpc_shutdown();
}

const rs_ps_conn_ops rs_grpc_conn_ops = {
    .name = "grpc",
    .connect = rs_grpc_conn_connect,
    .submit = rs_grpc_conn_submit,
    .next = rs_grpc_conn_next,
    .close = rs_grpc_conn_close,
    .budget_per_cpu = RS_PS_BUDGET_GRPC_PER_CPU,
};

/* RecStore's wire on the same connection code ("recstore+grpc"). */
const rs_ps_conn_ops rs_grpc_rs_conn_ops = {
    .name = "recstore+grpc",
    .connect = rs_grpc_rs_conn_connect,
    .submit = rs_grpc_conn_submit,
    .next = rs_grpc_conn_next,
    .close = rs_grpc_conn_close,
    .budget_per_cpu = RS_PS_BUDGET_GRPC_PER_CPU,
};

#endif /* RS_HAVE_GRPC */
