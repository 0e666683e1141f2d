/*
 * brpc_conn.c — the client side of the brpc transport: one TCP connection to one shard server,
 * speaking baidu_std (frame picture in brpc_frame.h).
 *
 * A connection is used by one thread. submit() records the request in a ring of at most
 * max_in_flight outstanding requests and writes the whole request frame (writev of header +
 * RpcMeta + PSRequest, keys, rows: no copy of keys or rows); next() reads responses, matches them
 * to requests by correlation id, and returns completions in submission order. A GET response's
 * attachment is received straight into the caller's rows buffer when it is not already buffered.
 *
 * Sharing (transport option share, default auto): the connections of one process to one server
 * share its TCP sockets (brpc_share.h), as bRPC's own clients share one connection per server by
 * default. With auto a key's first socket asks the server how many threads serve its
 * connections (stats: server_threads) and the key takes that many sockets — each of the server's
 * threads gets one — and no more; later connections join the socket with the fewest users.
 * share=N takes N sockets, share=off one per connection (as before 2026-12-07), and a server that
 * does not say its threads gets one per connection. Frames are written whole under the socket's
 * write lock; a correlation id carries its connection's user id in its high half. One user at a
 * time receives for the socket (the reader): a user in next() whose answer is not there takes the
 * turn if no one has it, receives frames and places each reply in its owner's ring and rows
 * (waking the owner if it sleeps) until its own answer is placed, then passes the turn to a
 * sleeping user whose answer is still to come; a user finding the turn taken sleeps on a futex
 * until its answer is placed or the turn passes to it. So with many threads one of them receives
 * while the others sleep, the server's sends find a receiver that is awake more often, and the
 * server holds one connection per thread instead of one per client thread (docs/scale.md, "brpc
 * clients share a socket per server thread"). A user that closes with requests outstanding is
 * told apart by its user id: its replies are received and dropped. A socket breaks for all its
 * users at once; a user's timeout while another receives shuts the socket down. A user whose
 * frame does not fit the socket receives while it waits for room, when no other user does
 * (wait_to_send): the server stops reading a connection whose replies back up, so a writer that
 * only waited would wait for the server until the timeout (alone on its socket too).
 *
 * The same connection speaks RecStore's wire when made through rs_brpc_rs_conn_ops
 * ("recstore+brpc"): requests become recstoreps_brpc.ParameterService calls of at most
 * RS_RSMSG_MAX_KEYS_PER_REQUEST keys, keys and row blocks in the attachment as RecStore's bRPC
 * client sends them (recstore_msg.c); the ring holds one entry per call (up to RS_BRPC_RS_CHUNKS
 * per request) and next() merges a request's calls, GET blocks decoded into the caller's rows.
 *
 * Waiting: the first receive of a next() that finds nothing begins a wait. The thread then receives
 * again in a loop for up to spin_us (transport option, default RS_BRPC_CLIENT_SPIN_US) from there,
 * then blocks in poll() for the rest of the wait. It spins only when no more of the process's
 * threads are waiting than it has CPUs, when it holds one of the process's spin slots
 * (recstore/spin.h), and while its connection's waits pay for a spin (adaptive spinning): a spin
 * that did not catch its answer, or during which the kernel switched the thread out for another
 * (its involuntary context switches, getrusage: the CPU it spun on was wanted, by the server's
 * threads or the process's own, and spinning there delays the answer it waits for), puts the
 * connection's count at its top; a wait longer than spin_us raises it by one; a wait that blocked
 * but was over within spin_us lowers it by one (a spin might have caught it), one caught by the
 * spin halves it; at RS_SPIN_QUICK_AFTER or more the thread blocks at once. So after a spin that
 * failed it takes several short waits in a row before the next, and no probe spins are needed.
 * At one client thread per core the answer comes within the spin: the thread does not sleep, and
 * the server's send of the answer does not have to wake it (an interrupt to the client's CPU; on a
 * VM an exit, and the halted CPU's way back). With more threads than cores nothing spins.
 * spin_us=0 blocks at once (docs/scale.md, "brpc clients spin before they block").
 * The receiver of a shared socket (Sharing) whose server leaves a CPU of this host for it — the
 * server is on another host, or on this one with fewer threads than this process has CPUs
 * (spin_free) — waits once per frame instead of once per next(): placing another user's reply
 * ends its wait, so it spins again for the next frame; a preempted spin is not held against it
 * (the threads that preempt it are mostly the users it has just woken), and it yields the CPU in
 * its spin instead of pausing, so they run at once and p99 stays low. It spins as the lone
 * client thread of the best point does, and the server's sends find it awake (docs/scale.md,
 * "The shared socket's receiver spins").
 *
 * The connection's TCP congestion control follows the option tcp_congestion (default auto: cubic
 * instead of a BBR when the server is on a loopback address; transport/tcp_congestion.h).
 *
 * A response carrying RpcMeta's CRC32C (a bRPC server set to checksum its responses) is verified
 * over the message as sent and, when checksum_with_attachment says so, the attachment
 * (brpc_checksum.c); a mismatch or an unknown checksum type is a malformed frame.
 *
 * Failure policy: a refused/reset/closed connection, a malformed response frame, or a timeout
 * marks the connection broken; every outstanding and later request then fails with the stored
 * reason (RS_ECONN / RS_ETIMEDOUT / RS_EPROTO), which names the server. Timeouts count from the
 * request's submission.
 */
#if RS_HAVE_PROTOBUF_C
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "recstore/auth.h"
#include "recstore/clock.h"
#include "recstore/cpu.h"
#include "recstore/crc32c.h"
#include "recstore/futex.h"
#include "recstore/ps_budget.h"
#include "recstore/spin.h"
#include "recstore/transport.h"
#include "transport/brpc_frame.h"
#include "transport/brpc_share.h"
#include "transport/net.h"
#include "transport/tcp_congestion.h"
#include "transport/transport_options.h"

#define RS_BRPC_CLIENT_READ_AHEAD 4096
/* RpcMeta and PSResponse are buffered; only GET rows (the attachment) can be large, and they go
 * straight into the caller's buffer, sized by the request. A server claiming more than this for
 * the buffered part is broken or hostile: refused before allocating. */
#define RS_BRPC_CLIENT_MAX_HEAD (1u << 20)
/* How long a client thread receives again before it blocks (transport option spin_us; the
 * largest accepted is a second). */
#define RS_BRPC_CLIENT_SPIN_US     100u
#define RS_BRPC_CLIENT_SPIN_US_MAX 1000000u
/* RecStore's wire: calls one request may take (so at most 32 x 500 keys per request). */
#define RS_BRPC_RS_CHUNKS 32

typedef struct pending {
    uint64_t tag;
    int64_t cid;
    uint64_t deadline_ns;
    rs_ps_op op;
    uint32_t num_keys;
    void *rows_out;
    size_t rows_cap;
    int done;    /* its reply is placed (under the socket's mu) */
    int claimed; /* a user is placing its reply */
    rs_ps_completion comp;
    int rs_method; /* RecStore's wire: the call's rs_rsmsg_method */
    size_t rs_from, rs_keys, rs_vs;
    int last; /* RecStore's wire: the request's last call */
} pending;

typedef struct brpc_cconn {
    rs_brpc_sock *s; /* its own, or shared (Sharing) */
    uint32_t uid;    /* its id on s: the high half of its correlation ids */
    uint32_t seq;    /* the low half of its last correlation id */
    uint64_t timeout_ns;
    uint32_t cap, head, count;
    pending *ring;
    /* a user waiting while another receives (under s->mu): it sleeps on word while it is 0 */
    int sleeping;
    uint32_t word;
    uint32_t claimed; /* its requests whose replies the receiving user is placing now */
    int recstore;     /* RecStore's wire */
    uint32_t requests, max_requests;
    uint8_t *abuf; /* RecStore's wire: a request's message + attachment being sent */
    size_t acap;
    rs_auth_token auth; /* sent in every request's RpcMeta.authentication_data; len 0: none */
    uint64_t spin_ns;   /* spin_us */
    rs_spin_streak streak;
    struct {
        int on, blocked, slot; /* a wait began in this next(); it blocked; holds a spin slot */
        int spins;             /* it may spin (took a slot) */
        int free;              /* the receiver of a shared socket with a CPU free (Waiting) */
        uint64_t t0, spin_ns;  /* when it began; how long it may spin */
        long nivcsw;           /* the thread's involuntary context switches when it began */
    } w;
    rs_ps_wait_stats st;
} brpc_cconn;

/* A correlation id of c's: its user id in the high half tells the receiving user whose reply a
 * frame is (Sharing); alone on its socket, the ids are 1, 2, ... */
static int64_t next_cid(brpc_cconn *c) {
    return (int64_t)((uint64_t)c->uid << 32 | ++c->seq);
}

/* Every request carries the deployment token when the client has one (RpcMeta field 7). */
static void meta_set_auth(brpc_cconn *c, Brpc__Policy__RpcMeta *meta) {
    if (!c->auth.len) return;
    meta->has_authentication_data = 1;
    meta->authentication_data.data = c->auth.bytes;
    meta->authentication_data.len = c->auth.len;
}

static int mark_broken(brpc_cconn *c, rs_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Wake user u if it sleeps waiting for another user to receive (under s->mu). */
static void wake_user(brpc_cconn *u) {
    if (!u->sleeping || __atomic_load_n(&u->word, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&u->word, 1, __ATOMIC_RELEASE);
    rs_futex_wake(&u->word, 1, 0);
}

static int sock_broken(rs_brpc_sock *s) {
    return __atomic_load_n(&s->broken, __ATOMIC_ACQUIRE);
}

/* The socket is broken (first reason kept): every user's outstanding and later requests fail
 * with the reason. A shared socket is shut down, which ends a receive in progress, and its
 * sleeping users are woken. Not under s->mu. */
static int mark_broken(brpc_cconn *c, rs_error *err, int code, const char *fmt, ...) {
    rs_brpc_sock *s = c->s;
    char why[RS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->mu);
    if (!s->broken) {
        rs_error_set(&s->broken_err, code, "%s: %s", s->peer, why);
        __atomic_store_n(&s->broken, 1, __ATOMIC_RELEASE);
        if (s->shared) {
            shutdown(s->fd, SHUT_RDWR);
            for (uint32_t i = 0; i < s->nusers; i++)
                wake_user(s->users[i]);
        }
    }
    if (err) *err = s->broken_err;
    code = s->broken_err.code;
    pthread_mutex_unlock(&s->mu);
    return code;
}

static int broken_error(brpc_cconn *c, rs_error *err) {
    if (err) *err = c->s->broken_err; /* set once, before broken (sock_broken) */
    return c->s->broken_err.code;
}

/* The brpc client's transport options. Any other key is an error, not ignored. */
typedef struct client_opts {
    uint64_t spin_us;
    rs_tcp_cc tcp_cc;
    int share; /* SHARE_AUTO, SHARE_OFF, or the sockets a server gets (1..RS_BRPC_SHARE_MAX) */
} client_opts;

enum { SHARE_OFF = -1, SHARE_AUTO = 0 };
#define RS_BRPC_SHARE_MAX 1024u

static int client_option(void *ctx, const char *key, const char *val, rs_error *err) {
    client_opts *o = ctx;
    if (strcmp(key, "spin_us") == 0)
        return rs_transport_option_u64("brpc client", key, val, 0, RS_BRPC_CLIENT_SPIN_US_MAX,
                                       &o->spin_us, err);
    if (strcmp(key, "tcp_congestion") == 0)
        return rs_tcp_cc_parse("brpc client", val, &o->tcp_cc, err);
    if (strcmp(key, "share") == 0) {
        if (strcmp(val, "auto") == 0 || strcmp(val, "off") == 0) {
            o->share = val[0] == 'a' ? SHARE_AUTO : SHARE_OFF;
            return 0;
        }
        uint64_t n;
        if (rs_transport_option_u64("brpc client", key, val, 1, RS_BRPC_SHARE_MAX, &n, err))
            return rs_error_set(err, RS_EINVAL,
                                "brpc client option share=%s: give auto, off or a number of "
                                "sockets per server from 1 to %u",
                                val, RS_BRPC_SHARE_MAX);
        o->share = (int)n;
        return 0;
    }
    return rs_error_set(err, RS_EINVAL,
                        "brpc client option '%s=%s' is unknown (the brpc client takes spin_us, "
                        "tcp_congestion, share)",
                        key, val);
}

static void conn_free(brpc_cconn *c) {
    free(c->abuf);
    free(c->ring);
    free(c);
}

static int brpc_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                       size_t rows_cap, rs_error *err);
static int brpc_next(void *conn, rs_ps_completion *out, rs_error *err);

/* How many threads the server serves connections with: its stats reply's server_threads, asked
 * on c's new socket (0 when the server does not say). */
static int learn_server_threads(brpc_cconn *c, uint32_t *out, rs_error *err) {
    static const char cmd[] = "stats";
    rs_ps_request req = {.op = RS_PS_COMMAND, .command = cmd, .command_len = sizeof cmd - 1};
    rs_ps_completion comp;
    int rc = brpc_submit(c, &req, 0, NULL, 0, err);
    if (!rc) rc = brpc_next(c, &comp, err);
    if (rc) return rc;
    uint64_t n =
        comp.resp.status == RS_PS_OK ? rs_ps_reply_u64(comp.resp.reply, "server_threads") : 0;
    *out = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    return 0;
}

/* Attach c to a socket (file comment: Sharing): its own, or the key's least used one once the
 * key has as many as the server has threads (or as share says). */
static int attach(brpc_cconn *c, const char *host, uint16_t port, const client_opts *o,
                  rs_error *err) {
    uint32_t ms = (uint32_t)(c->timeout_ns / 1000000);
    int rc;
    if (c->recstore || o->share == SHARE_OFF) { /* RecStore's wire is never shared */
        if ((rc = rs_brpc_sock_open(host, port, ms, &c->s, err))) return rc;
        if ((rc = rs_tcp_cc_apply(c->s->fd, &o->tcp_cc, "brpc client", err)) < 0) return rc;
        return rs_brpc_sock_add_user(c->s, c, &c->uid, err);
    }
    char key[512];
    size_t n =
        (size_t)snprintf(key, sizeof key, "%s %u %d %llu %d %s ", host, port, o->share,
                         (unsigned long long)c->timeout_ns, (int)o->tcp_cc.mode, o->tcp_cc.name);
    for (size_t i = 0; i < c->auth.len && n + 2 < sizeof key; i++, n += 2)
        snprintf(key + n, 3, "%02x", c->auth.bytes[i]);
    rs_brpc_share_lock();
    uint32_t count, threads;
    rs_brpc_sock *s = rs_brpc_share_find(key, &count, &threads);
    uint32_t want = o->share > 0 ? (uint32_t)o->share : threads;
    if (s && want && count >= want) {
        pthread_mutex_lock(&s->mu);
        rc = rs_brpc_sock_add_user(s, c, &c->uid, err);
        pthread_mutex_unlock(&s->mu);
        if (!rc) c->s = s;
        rs_brpc_share_unlock();
        return rc;
    }
    if ((rc = rs_brpc_sock_open(host, port, ms, &s, err))) goto out;
    c->s = s;
    if ((rc = rs_tcp_cc_apply(s->fd, &o->tcp_cc, "brpc client", err)) < 0) goto out;
    if ((rc = rs_brpc_sock_add_user(s, c, &c->uid, err))) goto out;
    if (o->share == SHARE_AUTO && !count && !threads) { /* the key's first socket asks */
        if ((rc = learn_server_threads(c, &threads, err))) goto out;
        memset(&c->st, 0, sizeof c->st); /* the connection's waits are its caller's */
        memset(&c->streak, 0, sizeof c->streak);
    }
    /* in the table even when the server does not say (threads 0: no one joins it), so that the
     * key's next sockets do not ask again */
    rc = rs_brpc_share_add(s, key, threads, err);
    int listening, local = rs_tcp_socket_loopback(s->fd, &listening);
    s->spin_free = local == 0 || (threads && threads < rs_cpu_count());
out:
    rs_brpc_share_unlock();
    return rc < 0 ? rc : 0;
}

static void brpc_close(void *conn);

static int connect_wire(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                        int recstore, void **out, rs_error *err) {
    int rc;
    *out = NULL;
    client_opts o = {.spin_us = RS_BRPC_CLIENT_SPIN_US};
    if (opts &&
        (rc = rs_transport_options_each(opts->extra, "brpc client", client_option, &o, err)))
        return rc;
    if (recstore && o.share > 0)
        return rs_error_set(err, RS_EINVAL,
                            "brpc client option share=%d: RecStore's wire (recstore+brpc) does not "
                            "share sockets; give share=off or auto",
                            o.share);
    brpc_cconn *c = calloc(1, sizeof *c);
    if (!c) return rs_error_set(err, RS_ENOMEM, "brpc connection");
    c->spin_ns = o.spin_us * 1000u;
    c->timeout_ns =
        (uint64_t)(opts && opts->timeout_ms ? opts->timeout_ms : RS_PS_DEFAULT_TIMEOUT_MS) *
        1000000ull;
    c->max_requests = opts && opts->max_in_flight ? opts->max_in_flight : 1;
    if (opts && opts->want_in_flight > c->max_requests)
        c->max_requests = opts->want_in_flight; /* the client's chunks of one batch */
    c->recstore = recstore;
    c->cap = c->max_requests * (recstore ? RS_BRPC_RS_CHUNKS : 1);
    if (opts && opts->auth) c->auth = *opts->auth;
    c->ring = calloc(c->cap, sizeof *c->ring);
    if (!c->ring) {
        conn_free(c);
        return rs_error_set(err, RS_ENOMEM, "brpc connection buffers");
    }
    if ((rc = attach(c, host, port, &o, err))) {
        if (c->s)
            brpc_close(c);
        else
            conn_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Leave the socket: no reply is placed for c from now on (one on its way is waited for); the
 * last user of a socket closes it. A user counts as leaving from its removal until it has
 * decided, under the table's lock (which joining users take too), whether it was last — that is
 * no user left and none leaving — so the users leaving together find exactly one of them last,
 * and none touches the socket after that one frees it. The wait for a reply being placed (which
 * may wait for the network) holds no lock but `mu`. s->shared is read while c is still a user
 * (set under the table's lock before any other user could join). */
static void brpc_close(void *conn) {
    brpc_cconn *c = conn;
    if (!c) return;
    rs_brpc_sock *s = c->s;
    int shared = s->shared;
    pthread_mutex_lock(&s->mu);
    rs_brpc_sock_remove_user(s, c);
    s->leaving++;
    while (c->claimed)
        pthread_cond_wait(&s->placed, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (shared) rs_brpc_share_lock();
    pthread_mutex_lock(&s->mu);
    int last = --s->leaving == 0 && s->nusers == 0;
    pthread_mutex_unlock(&s->mu);
    if (last && shared) rs_brpc_share_remove(s);
    if (shared) rs_brpc_share_unlock();
    if (last) rs_brpc_sock_free(s);
    conn_free(c);
}

static int read_one(brpc_cconn *c, uint64_t deadline, rs_error *err);
static void pass_turn(rs_brpc_sock *s);
static void wait_end(brpc_cconn *c);

/* The socket takes no more bytes: wait until it does, receiving meanwhile when no other user of
 * the socket receives. A server stops reading a connection whose unsent replies back up
 * (max_pending_bytes), so a writer that only waited for room would wait for a server waiting for
 * it (docs/parameter-server.md). 0 when the caller may send again; else the broken socket's
 * error. */
static int wait_to_send(brpc_cconn *c, uint64_t deadline, rs_error *err) {
    rs_brpc_sock *s = c->s;
    pthread_mutex_lock(&s->mu);
    int turn = !s->reader;
    if (turn) s->reader = c;
    pthread_mutex_unlock(&s->mu);
    int rc = turn && s->in_len ? 0 : rs_net_wait(s->fd, POLLOUT | (turn ? POLLIN : 0), deadline);
    uint8_t b;
    if (!rc && turn && (s->in_len || recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0)) {
        rc = read_one(c, deadline, err); /* a reply, anyone's */
        wait_end(c);
    } else if (rc == RS_ETIMEDOUT) {
        rc = mark_broken(c, err, RS_ETIMEDOUT, "sending a request timed out");
    } else if (rc) {
        rc = mark_broken(c, err, RS_ECONN, "poll failed while sending");
    }
    if (turn) {
        pthread_mutex_lock(&s->mu);
        pass_turn(s);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* Write all of iov (modified in place) before deadline; the caller holds s->wmu. */
static int write_all(brpc_cconn *c, struct iovec *iov, int n, uint64_t deadline, rs_error *err) {
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->s->fd, &mh, MSG_NOSIGNAL); /* no SIGPIPE if the server went away */
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = wait_to_send(c, deadline, err);
                if (rc) return rc;
                continue;
            }
            return mark_broken(c, err, RS_ECONN, "send failed: %s", strerror(errno));
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Send one request frame (whole, between other users' frames). */
static int write_frame(brpc_cconn *c, struct iovec *iov, int n, uint64_t deadline, rs_error *err) {
    pthread_mutex_lock(&c->s->wmu);
    int rc = sock_broken(c->s) ? broken_error(c, err) : write_all(c, iov, n, deadline, err);
    pthread_mutex_unlock(&c->s->wmu);
    return rc;
}

static int brpc_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts, void **out,
                        rs_error *err) {
    return connect_wire(host, port, opts, 0, out, err);
}

static int brpc_rs_connect(const char *host, uint16_t port, const rs_ps_client_opts *opts,
                           void **out, rs_error *err) {
    return connect_wire(host, port, opts, 1, out, err);
}

/* RecStore's wire: one call per chunk of at most RS_RSMSG_MAX_KEYS_PER_REQUEST keys. Its socket is
 * never shared, so its calls go into the ring after they are written: only this thread receives
 * for it. */
static int rs_submit(brpc_cconn *c, const rs_ps_request *req, uint64_t tag, void *rows_out,
                     size_t rows_cap, rs_error *err) {
    size_t n = req->op == RS_PS_COMMAND ? 1 : req->num_keys;
    size_t vs = !req->num_keys         ? 0
                : req->op == RS_PS_GET ? rows_cap / req->num_keys
                                       : req->rows_len / req->num_keys;
    size_t chunk = RS_RSMSG_MAX_KEYS_PER_REQUEST;
    if (req->op != RS_PS_COMMAND && (n == 0 || (req->op == RS_PS_GET && !vs)))
        return rs_error_set(err, RS_EINVAL, "%s: RecStore's wire has no request of 0 keys/rows",
                            c->s->peer);
    if ((n + chunk - 1) / chunk > RS_BRPC_RS_CHUNKS)
        return rs_error_set(err, RS_EINVAL,
                            "%s: %zu keys in one request; recstore+brpc sends at most %u calls of "
                            "%zu keys per request",
                            c->s->peer, n, RS_BRPC_RS_CHUNKS, chunk);
    if (c->requests == c->max_requests)
        return rs_error_set(err, RS_EBUSY, "%s: %u requests already in flight (max_in_flight)",
                            c->s->peer, c->max_requests);
    for (size_t from = 0; from < n; from += chunk) {
        size_t m = n - from < chunk ? n - from : chunk;
        rs_rsmsg_client_req cr;
        int rc = rs_rsmsg_client_size(req, from, m, "default", 1, &cr, err);
        if (rc) return rc;
        size_t need = cr.msg_len + cr.att_len;
        if (need > c->acap) {
            uint8_t *b = realloc(c->abuf, need);
            if (!b) return rs_error_set(err, RS_ENOMEM, "%s: no memory for a request", c->s->peer);
            c->abuf = b;
            c->acap = need;
        }
        rs_rsmsg_client_encode(req, from, m, "default", 1, c->abuf, c->abuf + cr.msg_len);
        Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
        Brpc__Policy__RpcRequestMeta rmeta = BRPC__POLICY__RPC_REQUEST_META__INIT;
        rmeta.service_name = (char *)RS_BRPC_RECSTORE_SERVICE;
        rmeta.method_name = (char *)rs_rsmsg_method_name(cr.method);
        meta.request = &rmeta;
        meta.has_correlation_id = 1;
        meta.correlation_id = next_cid(c);
        meta_set_auth(c, &meta);
        if (cr.att_len) {
            meta.has_attachment_size = 1;
            meta.attachment_size = (int32_t)cr.att_len;
        }
        size_t meta_len = brpc__policy__rpc_meta__get_packed_size(&meta);
        uint8_t head[RS_BRPC_HEADER_BYTES + 256 + RS_AUTH_TOKEN_MAX + 4];
        rs_brpc_header_write(head, (uint32_t)(meta_len + need), (uint32_t)meta_len);
        brpc__policy__rpc_meta__pack(&meta, head + RS_BRPC_HEADER_BYTES);
        struct iovec iov[2] = {{head, RS_BRPC_HEADER_BYTES + meta_len}, {c->abuf, need}};
        uint64_t now = rs_now_ns();
        if ((rc = write_frame(c, iov, need ? 2 : 1, now + c->timeout_ns, err))) {
            if (from == 0) return rc;
            /* earlier calls were sent: the request ends there, next() reports the broken
             * connection */
            c->ring[(c->head + c->count - 1) % c->cap].last = 1;
            break;
        }
        pending *p = &c->ring[(c->head + c->count) % c->cap];
        p->tag = tag;
        p->cid = meta.correlation_id;
        p->deadline_ns = now + c->timeout_ns;
        p->op = req->op;
        p->num_keys = (uint32_t)m;
        p->rows_out = rows_out;
        p->rows_cap = rows_cap;
        p->done = 0;
        p->claimed = 0;
        p->rs_method = (int)cr.method;
        p->rs_from = from;
        p->rs_keys = m;
        p->rs_vs = vs;
        p->last = from + m >= n;
        c->count++;
    }
    c->requests++;
    return 0;
}

static int brpc_submit(void *conn, const rs_ps_request *req, uint64_t tag, void *rows_out,
                       size_t rows_cap, rs_error *err) {
    brpc_cconn *c = conn;
    if (sock_broken(c->s)) return broken_error(c, err);
    if (c->recstore) return rs_submit(c, req, tag, rows_out, rows_cap, err);
    if (c->count == c->cap)
        return rs_error_set(err, RS_EBUSY, "%s: %u requests already in flight (max_in_flight)",
                            c->s->peer, c->cap);
    size_t keys_len = (size_t)req->num_keys * 8;
    size_t att = keys_len + req->rows_len;
    if (att > INT32_MAX)
        return rs_error_set(err, RS_EINVAL, "%s: request of %zu bytes is too large", c->s->peer,
                            att);

    Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
    Brpc__Policy__RpcRequestMeta rmeta = BRPC__POLICY__RPC_REQUEST_META__INIT;
    rmeta.service_name = (char *)RS_BRPC_SERVICE;
    rmeta.method_name = (char *)rs_ps_op_method(req->op);
    meta.request = &rmeta;
    meta.has_correlation_id = 1;
    meta.correlation_id = next_cid(c);
    meta_set_auth(c, &meta);
    if (att) {
        meta.has_attachment_size = 1;
        meta.attachment_size = (int32_t)att;
    }
    size_t meta_len = brpc__policy__rpc_meta__get_packed_size(&meta);
    size_t msg_len = rs_ps_request_encoded_size(req, 1);
    uint8_t head[RS_BRPC_HEADER_BYTES + 256 + 64 + RS_AUTH_TOKEN_MAX + 4];
    if (meta_len + msg_len + RS_BRPC_HEADER_BYTES > sizeof head) /* commands are short words */
        return rs_error_set(err, RS_EINVAL, "%s: command of %zu bytes is too long", c->s->peer,
                            req->command_len);
    rs_brpc_header_write(head, (uint32_t)(meta_len + msg_len + att), (uint32_t)meta_len);
    brpc__policy__rpc_meta__pack(&meta, head + RS_BRPC_HEADER_BYTES);
    rs_ps_request_encode(req, 1, head + RS_BRPC_HEADER_BYTES + meta_len);

    struct iovec iov[3];
    int n = 0;
    iov[n++] = (struct iovec){head, RS_BRPC_HEADER_BYTES + meta_len + msg_len};
    if (keys_len) iov[n++] = (struct iovec){(void *)req->keys, keys_len};
    if (req->rows_len) iov[n++] = (struct iovec){(void *)req->rows, req->rows_len};
    /* the request is in the ring before its frame is on the wire: a user receiving for the
     * socket may read its reply as soon as it is sent */
    uint64_t now = rs_now_ns();
    pthread_mutex_lock(&c->s->mu);
    pending *p = &c->ring[(c->head + c->count) % c->cap];
    p->tag = tag;
    p->cid = meta.correlation_id;
    p->deadline_ns = now + c->timeout_ns;
    p->op = req->op;
    p->num_keys = req->num_keys;
    p->rows_out = rows_out;
    p->rows_cap = rows_cap;
    p->done = 0;
    p->claimed = 0;
    p->rs_method = -1;
    p->last = 1;
    c->count++;
    pthread_mutex_unlock(&c->s->mu);
    int rc = write_frame(c, iov, n, now + c->timeout_ns, err);
    if (rc) { /* not sent whole: no reply comes for it, and the socket is broken */
        pthread_mutex_lock(&c->s->mu);
        c->count--;
        pthread_mutex_unlock(&c->s->mu);
        return rc;
    }
    c->requests++;
    return 0;
}

/* The calling thread's involuntary context switches so far (0 if unknown). */
static long thread_nivcsw(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* A wait begins (file comment: Waiting): how long it may spin, and with a spin slot or not. */
static void wait_begin(brpc_cconn *c) {
    c->w.on = 1;
    c->w.blocked = 0;
    c->w.slot = 0;
    c->w.spins = 0;
    c->w.t0 = rs_now_ns();
    c->w.spin_ns = c->spin_ns;
    c->w.free = c->s->spin_free && __atomic_load_n(&c->s->nusers, __ATOMIC_RELAXED) > 1;
    if (!c->w.spin_ns) return; /* spin_us=0: not one of the process's waiters either */
    if (rs_spin_waiters_enter() > rs_cpu_count()) {
        c->w.spin_ns = 0; /* more waiters than CPUs: none of them spins */
        c->st.unspun++;
    } else if (rs_spin_streak_high(&c->streak)) {
        c->w.spin_ns = 0; /* its recent waits did not pay for a spin */
        c->st.quick++;
    } else if (!(c->w.slot = rs_spin_slot_take())) {
        c->w.spin_ns = 0;
        c->st.unspun++;
    } else {
        c->w.spins = 1;
        c->w.nivcsw = thread_nivcsw();
    }
}

/* The wait of this next() (if it had one) is over: count how it ended, and move the connection's
 * count of waits that did not pay for a spin (file comment: Waiting). */
static void wait_end(brpc_cconn *c) {
    if (!c->w.on) return;
    c->w.on = 0;
    rs_spin_slot_give(&c->w.slot);
    if (c->spin_ns) rs_spin_waiters_leave();
    c->st.blocked += c->w.blocked;
    c->st.spun += !c->w.blocked;
    int preempted = c->w.spins && thread_nivcsw() != c->w.nivcsw;
    c->st.preempted += preempted;
    if (c->w.free) preempted = 0; /* by the users it woke, mostly: not against it (Waiting) */
    if (c->w.spins && (preempted || c->w.blocked))
        rs_spin_streak_failed(&c->streak); /* a spin that did not pay */
    else if (!c->w.blocked)
        rs_spin_streak_spun(&c->streak);
    else if (rs_now_ns() - c->w.t0 > c->spin_ns)
        rs_spin_streak_blocked(&c->streak);
    else
        rs_spin_streak_short(&c->streak); /* a spin might have caught it */
}

/* One receive step into the iovecs: the bytes received (> 0); 0 when nothing arrived yet and the
 * caller should try again (EINTR, or the socket became readable before the deadline); or a
 * negative code after marking the connection broken (peer closed, error, deadline). Finding
 * nothing, it spins (receives again) while the wait may, then blocks in poll(). */
static ssize_t recv_stepv(brpc_cconn *c, struct iovec *iov, size_t n, uint64_t deadline,
                          rs_error *err) {
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
    for (;;) {
        ssize_t r = recvmsg(c->s->fd, &mh, 0);
        if (r > 0) return r;
        if (r == 0)
            return mark_broken(c, err, RS_ECONN,
                               "connection closed by the server with %u request(s) outstanding",
                               c->count);
        if (errno == EINTR) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return mark_broken(c, err, RS_ECONN, "receive failed: %s", strerror(errno));
        if (!c->w.on) wait_begin(c);
        if (c->w.blocked || !c->w.spin_ns || rs_now_ns() - c->w.t0 >= c->w.spin_ns) break;
        if (c->w.free)
            sched_yield(); /* the users it woke run at once (Waiting) */
        else
            rs_cpu_relax();
    }
    rs_spin_slot_give(&c->w.slot);
    c->w.blocked = 1;
    int rc = rs_net_wait(c->s->fd, POLLIN, deadline);
    if (rc == RS_ETIMEDOUT)
        return mark_broken(c, err, RS_ETIMEDOUT, "no response within %llu ms",
                           (unsigned long long)(c->timeout_ns / 1000000));
    if (rc) return mark_broken(c, err, RS_ECONN, "poll failed while receiving");
    return 0;
}

static ssize_t recv_step(brpc_cconn *c, uint8_t *buf, size_t len, uint64_t deadline,
                         rs_error *err) {
    struct iovec iov = {buf, len};
    return recv_stepv(c, &iov, 1, deadline, err);
}

static int fill(brpc_cconn *c, size_t want, uint64_t deadline, rs_error *err) {
    rs_brpc_sock *s = c->s;
    if (s->in_len >= want) return 0;
    if (s->in_start + want > s->in_cap) {
        memmove(s->in, s->in + s->in_start, s->in_len);
        s->in_start = 0;
        if (want > s->in_cap) {
            size_t cap = s->in_cap;
            while (cap < want)
                cap *= 2;
            uint8_t *p = realloc(s->in, cap);
            if (!p)
                return mark_broken(c, err, RS_ENOMEM, "no memory for a %zu-byte response", want);
            s->in = p;
            s->in_cap = cap;
        }
    }
    while (s->in_len < want) {
        size_t off = s->in_start + s->in_len;
        /* read little beyond what is needed: a GET's rows are then received straight into the
         * caller's buffer by recv_into instead of being copied out of this one */
        size_t room = s->in_cap - off, ask = want - s->in_len;
        if (ask < RS_BRPC_CLIENT_READ_AHEAD) ask = RS_BRPC_CLIENT_READ_AHEAD;
        ssize_t r = recv_step(c, s->in + off, ask < room ? ask : room, deadline, err);
        if (r < 0) return (int)r;
        s->in_len += (size_t)r;
    }
    return 0;
}

/* Receive exactly len bytes into dst, first from the buffer, then from the socket directly. */
static int recv_into(brpc_cconn *c, uint8_t *dst, size_t len, uint64_t deadline, rs_error *err) {
    rs_brpc_sock *s = c->s;
    size_t from_buf = s->in_len < len ? s->in_len : len;
    memcpy(dst, s->in + s->in_start, from_buf);
    s->in_start += from_buf;
    s->in_len -= from_buf;
    size_t got = from_buf;
    while (got < len) {
        ssize_t r = recv_step(c, dst + got, len - got, deadline, err);
        if (r < 0) return (int)r;
        got += (size_t)r;
    }
    return 0;
}

static int map_error_code(int code) {
    switch (code) {
    case RS_BRPC_ENOSERVICE:
    case RS_BRPC_ENOMETHOD: return RS_PS_UNKNOWN_METHOD;
    case RS_BRPC_EREQUEST: return RS_PS_INVALID_PAYLOAD;
    case RS_BRPC_EAUTH: return RS_PS_UNAUTHENTICATED;
    default: return RS_PS_INTERNAL;
    }
}

/* A response frame's head, read and checked (read_one). */
typedef struct frame {
    rs_brpc_header hdr;
    size_t att;
    int64_t cid;
    int ecode;
    char etext[256];
    int ctype;
    rs_brpc_checksum ck;
} frame;

/* Receive a frame of a user gone (it closed with requests outstanding) and drop it. */
static int skip_frame(brpc_cconn *c, const frame *f, uint64_t deadline, rs_error *err) {
    size_t len = RS_BRPC_HEADER_BYTES + (size_t)f->hdr.body_size;
    int rc = fill(c, len, deadline, err);
    if (rc) return rc;
    c->s->in_start += len;
    c->s->in_len -= len;
    return 0;
}

/* Place frame f's reply in p: the frame's message and attachment are received, checked and
 * decoded into p's completion and rows. */
static int place(brpc_cconn *c, frame *f, pending *p, uint64_t deadline, rs_error *err) {
    rs_brpc_sock *s = c->s;
    rs_error perr = {0};
    int rc;
    size_t att = f->att, msg_len = f->hdr.body_size - f->hdr.meta_size - att;
    if (p->rs_method >= 0) {
        /* RecStore's wire: the frame is received whole into the input buffer (one large copy out
         * of the socket, as the native wire's rows), then the block is checked and its rows copied
         * to the caller's in one pass (rs_rsblock_read_rows). Receiving each item's floats
         * straight into its row instead takes two pieces per key (12-byte head, row): the
         * kernel's per-piece cost made that 3x the copy (docs/recstore-wire.md, Performance). */
        size_t len = RS_BRPC_HEADER_BYTES + (size_t)f->hdr.body_size;
        rc = fill(c, len, deadline, err);
        if (rc) return rc;
        const uint8_t *m = s->in + s->in_start + RS_BRPC_HEADER_BYTES + f->hdr.meta_size;
        size_t mlen = msg_len;
        if (rs_brpc_checksum_verify(&f->ck, m, msg_len, m + msg_len, att, &perr))
            return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
        if (f->ctype != RS_BRPC_COMPRESS_NONE) {
            if (rs_brpc_decompress(f->ctype, m, msg_len, RS_BRPC_CLIENT_MAX_HEAD, &s->zbuf,
                                   &s->zcap, &mlen, &perr))
                return mark_broken(c, err, RS_EPROTO, "response message: %s", perr.msg);
            m = s->zbuf;
        }
        rs_ps_response *resp = &p->comp.resp;
        if (f->ecode) {
            memset(resp, 0, offsetof(rs_ps_response, error));
            resp->status = f->ecode == 22 ? RS_PS_INVALID_PAYLOAD : map_error_code(f->ecode);
            snprintf(resp->error, sizeof resp->error, "error %d: %s", f->ecode, f->etext);
            resp->reply[0] = 0;
        } else if (rs_rsmsg_client_decode(
                       (rs_rsmsg_method)p->rs_method, m, mlen,
                       s->in + s->in_start + RS_BRPC_HEADER_BYTES + f->hdr.meta_size + msg_len, att,
                       p->rs_keys, (uint32_t)p->rs_vs,
                       p->rows_out ? (uint8_t *)p->rows_out + p->rs_from * p->rs_vs : NULL, resp,
                       &perr)) {
            return mark_broken(c, err, RS_EPROTO, "bad %s reply: %s",
                               rs_rsmsg_method_name((rs_rsmsg_method)p->rs_method), perr.msg);
        }
        s->in_start += len;
        s->in_len -= len;
        p->comp.tag = p->tag;
        return 0;
    }
    if (msg_len > RS_BRPC_CLIENT_MAX_HEAD)
        return mark_broken(c, err, RS_EPROTO, "bad response: PSResponse of %zu bytes exceeds %u",
                           msg_len, RS_BRPC_CLIENT_MAX_HEAD);
    rc = fill(c, RS_BRPC_HEADER_BYTES + f->hdr.meta_size + msg_len, deadline, err);
    if (rc) return rc;
    const uint8_t *msg = s->in + s->in_start + RS_BRPC_HEADER_BYTES + f->hdr.meta_size;
    size_t raw_len = msg_len;
    /* the CRC runs over the message as sent, then (if asked) over the rows once received */
    uint32_t crc = f->ck.type ? rs_crc32c(0, msg, raw_len) : 0;
    if (f->ck.type && !(f->ck.with_attachment && att) &&
        rs_brpc_checksum_check(&f->ck, crc, raw_len, 0, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    if (f->ctype != RS_BRPC_COMPRESS_NONE) { /* a bRPC server that compresses its responses */
        if (rs_brpc_decompress(f->ctype, msg, raw_len, RS_BRPC_CLIENT_MAX_HEAD, &s->zbuf, &s->zcap,
                               &msg_len, &perr))
            return mark_broken(c, err, RS_EPROTO, "response message: %s", perr.msg);
        msg = s->zbuf;
    }
    rs_ps_response *resp = &p->comp.resp;
    /* decode the message with a placeholder attachment: the rows are placed below */
    static const uint8_t placeholder[1];
    if (rs_ps_response_decode(msg, msg_len, att ? placeholder : NULL, att, resp, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad PSResponse: %s", perr.msg);
    if (!att && resp->rows_len) { /* rows in PSResponse.rows (a server not using attachments) */
        if (p->op != RS_PS_GET || resp->rows_len > p->rows_cap || !p->rows_out)
            return mark_broken(c, err, RS_EPROTO,
                               "response carries %zu bytes of rows; %zu expected for %s",
                               resp->rows_len, p->rows_cap, rs_ps_op_method(p->op));
        memcpy(p->rows_out, resp->rows, resp->rows_len); /* before the buffer is reused */
    }
    s->in_start += RS_BRPC_HEADER_BYTES + f->hdr.meta_size + raw_len;
    s->in_len -= RS_BRPC_HEADER_BYTES + f->hdr.meta_size + raw_len;
    resp->rows = !att && resp->rows_len ? p->rows_out : NULL;
    if (att) {
        if (p->op != RS_PS_GET || att > p->rows_cap || !p->rows_out)
            return mark_broken(c, err, RS_EPROTO,
                               "response carries %zu bytes of rows; %zu expected for %s", att,
                               p->rows_cap, rs_ps_op_method(p->op));
        rc = recv_into(c, p->rows_out, att, deadline, err);
        if (rc) return rc;
        if (f->ck.type && f->ck.with_attachment &&
            rs_brpc_checksum_check(&f->ck, rs_crc32c(crc, p->rows_out, att), raw_len, att, &perr))
            return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
        resp->rows = p->rows_out;
    }
    if (f->ecode) {
        resp->status = map_error_code(f->ecode);
        snprintf(resp->error, sizeof resp->error, "%s", f->etext);
    }
    p->comp.tag = p->tag;
    return 0;
}

/* The request frame f answers, claimed for placing (under s->mu): found by the user id in its
 * correlation id's high half (Sharing), then in that user's ring. NULL when no user has it; *gone
 * then says whether the id is of a user that has left the socket. */
static pending *claim(rs_brpc_sock *s, int64_t cid, brpc_cconn **owner, int *gone) {
    uint32_t uid = (uint32_t)((uint64_t)cid >> 32);
    *owner = NULL;
    *gone = 0;
    for (uint32_t i = 0; i < s->nusers; i++) {
        brpc_cconn *u = s->users[i];
        if (u->uid != uid) continue;
        for (uint32_t j = 0; j < u->count; j++) {
            pending *q = &u->ring[(u->head + j) % u->cap];
            if (!q->done && !q->claimed && q->cid == cid) {
                q->claimed = 1;
                u->claimed++;
                *owner = u;
                return q;
            }
        }
        return NULL;
    }
    *gone = cid >= 0 && uid < s->next_uid;
    return NULL;
}

/* Read one response frame and complete its pending request, c's or another user's of the
 * socket (the other user is woken if it sleeps). */
static int read_one(brpc_cconn *c, uint64_t deadline, rs_error *err) {
    rs_brpc_sock *s = c->s;
    rs_error perr = {0};
    frame f;
    int rc = fill(c, RS_BRPC_HEADER_BYTES, deadline, err);
    if (rc) return rc;
    if (rs_brpc_header_parse(s->in + s->in_start, RS_PS_MAX_REPLY_BYTES, &f.hdr, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response frame: %s", perr.msg);
    if (f.hdr.meta_size > RS_BRPC_CLIENT_MAX_HEAD)
        return mark_broken(c, err, RS_EPROTO, "bad response frame: meta_size %u exceeds %u bytes",
                           f.hdr.meta_size, RS_BRPC_CLIENT_MAX_HEAD);
    /* buffer meta + message; the attachment may go straight to the caller's rows */
    rc = fill(c, RS_BRPC_HEADER_BYTES + f.hdr.meta_size, deadline, err);
    if (rc) return rc;
    Brpc__Policy__RpcMeta *meta = NULL;
    if (rs_brpc_meta_unpack(&s->arena, s->in + s->in_start + RS_BRPC_HEADER_BYTES, f.hdr.meta_size,
                            &meta, &perr))
        return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    f.att = meta->has_attachment_size ? (size_t)(uint32_t)meta->attachment_size : 0;
    f.cid = meta->has_correlation_id ? meta->correlation_id : -1;
    f.ecode = meta->response && meta->response->has_error_code ? meta->response->error_code : 0;
    f.etext[0] = 0;
    if (f.ecode && meta->response->error_text)
        snprintf(f.etext, sizeof f.etext, "%s", meta->response->error_text);
    int bad_att = meta->has_attachment_size && meta->attachment_size < 0;
    f.ctype = meta->has_compress_type ? meta->compress_type : RS_BRPC_COMPRESS_NONE;
    int bad_meta =
        rs_brpc_content_type_check(meta, &perr) || rs_brpc_checksum_read(meta, &f.ck, &perr);
    rs_brpc_meta_free(&s->arena, meta);
    if (bad_meta) return mark_broken(c, err, RS_EPROTO, "bad response: %s", perr.msg);
    if (bad_att || f.att > (size_t)f.hdr.body_size - f.hdr.meta_size)
        return mark_broken(c, err, RS_EPROTO, "bad response: attachment_size %zu > body", f.att);
    brpc_cconn *owner;
    int gone;
    pthread_mutex_lock(&s->mu);
    pending *p = claim(s, f.cid, &owner, &gone);
    pthread_mutex_unlock(&s->mu);
    if (gone) return skip_frame(c, &f, deadline, err);
    if (!p)
        return mark_broken(c, err, RS_EPROTO, "response with unknown correlation id %lld",
                           (long long)f.cid);
    rc = place(c, &f, p, deadline, err);
    pthread_mutex_lock(&s->mu);
    p->claimed = 0;
    p->done = !rc;
    if (!--owner->claimed) pthread_cond_broadcast(&s->placed); /* a user leaving may wait */
    if (owner != c) wake_user(owner);
    pthread_mutex_unlock(&s->mu);
    if (owner != c && c->w.free) wait_end(c); /* the next frame is a wait of its own */
    return rc;
}

/* The reader's turn passes on: wake a user that sleeps on an answer not yet placed (under
 * s->mu). */
static void pass_turn(rs_brpc_sock *s) {
    s->reader = NULL;
    for (uint32_t i = 0; i < s->nusers; i++) {
        brpc_cconn *u = s->users[i];
        if (u->sleeping && !__atomic_load_n(&u->word, __ATOMIC_RELAXED)) {
            wake_user(u);
            return;
        }
    }
}

/* Wait until p (c's oldest request) is answered (file comment: Sharing): receive for the socket
 * when no other user does, else sleep until the receiving user places the answer or passes the
 * turn. 0, or the broken socket's error (returned only once no reply is being placed for c). */
static int await_reply(brpc_cconn *c, pending *p, rs_error *err) {
    rs_brpc_sock *s = c->s;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (!p->done) {
        if (s->broken) {
            while (c->claimed) /* its caller may free the rows being written */
                pthread_cond_wait(&s->placed, &s->mu);
            rc = broken_error(c, err);
            break;
        }
        if (!s->reader) {
            s->reader = c;
            pthread_mutex_unlock(&s->mu);
            while (!p->done && !read_one(c, p->deadline_ns, err)) {
            }
            pthread_mutex_lock(&s->mu);
            pass_turn(s);
            continue;
        }
        __atomic_store_n(&c->word, 0, __ATOMIC_RELAXED);
        c->sleeping = 1;
        pthread_mutex_unlock(&s->mu);
        uint64_t now = rs_now_ns();
        int w = now < p->deadline_ns ? rs_futex_wait(&c->word, 0, p->deadline_ns - now, 0)
                                     : RS_ETIMEDOUT;
        c->st.blocked++;
        pthread_mutex_lock(&s->mu);
        c->sleeping = 0;
        if (w == RS_ETIMEDOUT && !p->done && !s->broken) {
            pthread_mutex_unlock(&s->mu);
            mark_broken(c, NULL, RS_ETIMEDOUT, "no response within %llu ms",
                        (unsigned long long)(c->timeout_ns / 1000000));
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Take c's oldest request off its ring (under s->mu: the receiving user reads the ring). */
static void pop(brpc_cconn *c) {
    pthread_mutex_lock(&c->s->mu);
    c->head = (c->head + 1) % c->cap;
    c->count--;
    pthread_mutex_unlock(&c->s->mu);
}

static int next_reply(brpc_cconn *c, rs_ps_completion *out, rs_error *err) {
    if (c->count == 0)
        return rs_error_set(err, RS_EINVAL, "%s: next() with no request outstanding", c->s->peer);
    c->requests--;
    if (c->recstore) { /* merge the request's calls */
        uint32_t found = 0;
        int status = RS_PS_OK;
        char error[256] = "";
        for (;;) {
            pending *p = &c->ring[c->head];
            int rc = await_reply(c, p, err);
            int last = p->last;
            pop(c);
            if (rc) {
                while (!last) { /* drop the request's other calls: the connection is broken */
                    last = c->ring[c->head].last;
                    pop(c);
                }
                return rc;
            }
            found += p->comp.resp.num_found;
            if (p->comp.resp.status != RS_PS_OK && status == RS_PS_OK) {
                status = p->comp.resp.status;
                snprintf(error, sizeof error, "%s", p->comp.resp.error);
            }
            if (last) {
                memcpy(out, &p->comp, sizeof *out);
                break;
            }
        }
        out->resp.status = status;
        out->resp.num_found = found;
        snprintf(out->resp.error, sizeof out->resp.error, "%s", error);
        out->resp.rows = NULL;
        return 0;
    }
    pending *p = &c->ring[c->head];
    /* a broken socket fails this request (and, on later calls, the others) */
    int rc = await_reply(c, p, err);
    if (!rc) memcpy(out, &p->comp, sizeof *out);
    pop(c);
    return rc;
}

static int brpc_next(void *conn, rs_ps_completion *out, rs_error *err) {
    brpc_cconn *c = conn;
    int rc = next_reply(c, out, err);
    wait_end(c);
    return rc;
}

static void brpc_wait_stats(void *conn, rs_ps_wait_stats *out) {
    const brpc_cconn *c = conn;
    out->spun += c->st.spun;
    out->blocked += c->st.blocked;
    out->quick += c->st.quick;
    out->unspun += c->st.unspun;
    out->preempted += c->st.preempted;
}

const rs_ps_conn_ops rs_brpc_conn_ops = {
    .name = "brpc",
    .connect = brpc_connect,
    .submit = brpc_submit,
    .next = brpc_next,
    .close = brpc_close,
    .budget_per_cpu = RS_PS_BUDGET_BRPC_PER_CPU,
    .wait_stats = brpc_wait_stats,
};

/* RecStore's wire on the same connection code ("recstore+brpc"). */
const rs_ps_conn_ops rs_brpc_rs_conn_ops = {
    .name = "recstore+brpc",
    .connect = brpc_rs_connect,
    .submit = brpc_submit,
    .next = brpc_next,
    .close = brpc_close,
    .budget_per_cpu = RS_PS_BUDGET_BRPC_PER_CPU,
    .wait_stats = brpc_wait_stats,
};
#endif
