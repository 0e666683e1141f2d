/* test_ps_brpc.c — the brpc transport end to end on loopback: a real shard (rs_kv) behind the
 * baidu_std server, the client connection ops, pipelined requests, PS-level errors, malformed
 * baidu_std traffic on raw sockets while a good client keeps getting correct rows, stop() with a
 * client connected, and how the client waits (spins, blocks, spins short after blocked waits). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recstore/cpu.h"
#include "recstore/spin.h"
#include "recstore/transport.h"
#include "rs_test.h"
#include "support/ps_conn_checks.h"
#include "transport/net.h"

#if RS_HAVE_PROTOBUF_C
#include "transport/brpc_frame.h"

#define VS 32u

typedef struct fixture {
    rs_ps_shard *shard;
    const rs_ps_server_ops *sops;
    const rs_ps_conn_ops *cops;
    void *srv;
    uint16_t port;
} fixture;

/* A server of `threads` workers with server transport options extra (NULL: none). */
static int fx_start_opts(fixture *f, unsigned threads, const char *extra) {
    rs_error err = {0};
    memset(f, 0, sizeof *f);
    if (rs_ps_transport_find("brpc", &f->sops, &f->cops, &err)) return -1;
    rs_ps_shard_config sc = {
        .shard_id = 0,
        .num_shards = 1,
        .kv = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = VS, .capacity = 10000},
        .max_keys_per_request = 100,
        .server_threads = threads};
    if (rs_ps_shard_open(&sc, &f->shard, &err)) {
        fprintf(stderr, "shard: %s\n", err.msg);
        return -1;
    }
    rs_ps_server_opts so = {.host = "127.0.0.1", .port = 0, .num_threads = threads, .extra = extra};
    if (f->sops->start(&so, f->shard, &f->srv, &err)) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    f->port = f->sops->bound_port(f->srv);
    return 0;
}

static int fx_start(fixture *f, unsigned threads) {
    return fx_start_opts(f, threads, NULL);
}

static void fx_stop(fixture *f) {
    if (f->srv) f->sops->stop(f->srv);
    rs_ps_shard_close(f->shard);
}

/* a client connection to port (the server's, or a relay's) with transport options extra */
static void *fx_connect_to(fixture *f, uint16_t port, uint32_t depth, const char *extra) {
    rs_ps_client_opts co = {.timeout_ms = 5000, .max_in_flight = depth, .extra = extra};
    void *c = NULL;
    rs_error err = {0};
    if (f->cops->connect("127.0.0.1", port, &co, &c, &err)) {
        fprintf(stderr, "connect: %s\n", err.msg);
        return NULL;
    }
    return c;
}

static void *fx_connect(fixture *f, uint32_t depth) {
    return fx_connect_to(f, f->port, depth, NULL);
}

static void row_for(uint64_t key, float *row) {
    for (unsigned j = 0; j < VS / 4; j++)
        row[j] = (float)(key * 10 + j);
}

/* one synchronous request */
static int call(fixture *f, void *c, rs_ps_request *req, void *rows_out, size_t cap,
                rs_ps_completion *comp) {
    rs_error err = {0};
    int rc = f->cops->submit(c, req, 42, rows_out, cap, &err);
    if (rc) return rc;
    rc = f->cops->next(c, comp, &err);
    if (rc) fprintf(stderr, "next: %s\n", err.msg);
    return rc;
}

static void test_roundtrip(void) {
    fixture f;
    RS_CHECK_EQ(fx_start(&f, 2), 0);
    void *c = fx_connect(&f, 4);
    RS_CHECK(c != NULL);
    if (!c) return fx_stop(&f);
    uint64_t keys[10];
    float rows[10 * VS / 4], got[10 * VS / 4];
    for (int i = 0; i < 10; i++) {
        keys[i] = 100 + (uint64_t)i;
        row_for(keys[i], rows + i * VS / 4);
    }
    rs_ps_completion comp;
    rs_ps_request put = {.op = RS_PS_PUT,
                         .value_size = VS,
                         .num_keys = 10,
                         .keys = (const uint8_t *)keys,
                         .rows = (const uint8_t *)rows,
                         .rows_len = sizeof rows};
    RS_CHECK_EQ(call(&f, c, &put, NULL, 0, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, 0);
    RS_CHECK_EQ(comp.tag, 42);

    keys[9] = 999; /* a missing key reads as zeros */
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = 10, .keys = (const uint8_t *)keys};
    memset(got, 0xff, sizeof got);
    RS_CHECK_EQ(call(&f, c, &get, got, sizeof got, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, 0);
    RS_CHECK_EQ(comp.resp.num_found, 9);
    RS_CHECK_EQ(comp.resp.value_size, VS);
    RS_CHECK(memcmp(got, rows, 9 * VS) == 0);
    for (unsigned j = 0; j < VS / 4; j++)
        RS_CHECK(got[9 * VS / 4 + j] == 0.0f);

    /* update adds deltas */
    float deltas[VS / 4];
    for (unsigned j = 0; j < VS / 4; j++)
        deltas[j] = 0.5f;
    rs_ps_request upd = {.op = RS_PS_UPDATE,
                         .num_keys = 1,
                         .keys = (const uint8_t *)keys,
                         .rows = (const uint8_t *)deltas,
                         .rows_len = sizeof deltas};
    RS_CHECK_EQ(call(&f, c, &upd, NULL, 0, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, 0);
    get.num_keys = 1;
    RS_CHECK_EQ(call(&f, c, &get, got, sizeof got, &comp), 0);
    RS_CHECK(got[0] == rows[0] + 0.5f && got[3] == rows[3] + 0.5f);

    /* commands */
    rs_ps_request cmd = {.op = RS_PS_COMMAND, .command = "stats", .command_len = 5};
    RS_CHECK_EQ(call(&f, c, &cmd, NULL, 0, &comp), 0);
    RS_CHECK(strstr(comp.resp.reply, "handled_put=1") != NULL);
    RS_CHECK(strstr(comp.resp.reply, "keys=10") != NULL);
    cmd.command = "bogus";
    cmd.command_len = 5;
    RS_CHECK_EQ(call(&f, c, &cmd, NULL, 0, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(comp.resp.error, "bogus") != NULL);
    cmd.command = "clear";
    RS_CHECK_EQ(call(&f, c, &cmd, NULL, 0, &comp), 0);
    RS_CHECK(strstr(comp.resp.reply, "cleared 10") != NULL);

    /* PS-level errors */
    uint64_t many[101] = {0};
    rs_ps_request big = {.op = RS_PS_GET, .num_keys = 101, .keys = (const uint8_t *)many};
    static float sink[101 * VS / 4];
    RS_CHECK_EQ(call(&f, c, &big, sink, sizeof sink, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, RS_PS_BATCH_TOO_LARGE);
    RS_CHECK(strstr(comp.resp.error, "at most 100") != NULL);
    rs_ps_request badrows = put;
    badrows.rows_len -= 4;
    RS_CHECK_EQ(call(&f, c, &badrows, NULL, 0, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(comp.resp.error, "expected") != NULL);
    rs_ps_request badvs = get;
    badvs.value_size = 64;
    RS_CHECK_EQ(call(&f, c, &badvs, got, sizeof got, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, RS_PS_VALUE_SIZE_MISMATCH);

    /* pipelining: 4 in flight, completions in order */
    for (uint64_t t = 0; t < 4; t++) {
        rs_error err = {0};
        RS_CHECK_EQ(f.cops->submit(c, &get, t, got, sizeof got, &err), 0);
    }
    rs_error err = {0};
    RS_CHECK_EQ(f.cops->submit(c, &get, 9, got, sizeof got, &err), RS_EBUSY);
    for (uint64_t t = 0; t < 4; t++) {
        RS_CHECK_EQ(f.cops->next(c, &comp, &err), 0);
        RS_CHECK_EQ(comp.tag, t);
    }
    f.cops->close(c);
    rs_ps_transport_stats ts;
    f.sops->stats(f.srv, &ts);
    RS_CHECK(ts.requests >= 10);
    RS_CHECK_EQ(ts.bad_frames, 0);
    fx_stop(&f);
}

static int raw_connect(uint16_t port) {
    int fd;
    return rs_net_connect("127.0.0.1", port, 5000, 0, &fd, NULL) ? -1 : fd;
}

/* Send bytes; returns 1 if the server then closed the connection (read gives 0 or an error). */
static int send_and_expect_close(uint16_t port, const uint8_t *bytes, size_t len) {
    int fd = raw_connect(port);
    if (fd < 0) return 0;
    if (write(fd, bytes, len) != (ssize_t)len) {
        close(fd);
        return 0;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b[64];
    ssize_t r = read(fd, b, sizeof b);
    close(fd);
    return r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

static void check_good_client(fixture *f, void *c) {
    uint64_t k = 7;
    float row[VS / 4], got[VS / 4];
    row_for(k, row);
    rs_ps_completion comp;
    rs_ps_request put = {.op = RS_PS_PUT,
                         .num_keys = 1,
                         .keys = (const uint8_t *)&k,
                         .rows = (const uint8_t *)row,
                         .rows_len = VS};
    RS_CHECK_EQ(call(f, c, &put, NULL, 0, &comp), 0);
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = 1, .keys = (const uint8_t *)&k};
    RS_CHECK_EQ(call(f, c, &get, got, sizeof got, &comp), 0);
    RS_CHECK_EQ(comp.resp.status, 0);
    RS_CHECK(memcmp(got, row, VS) == 0);
}

static void test_malformed_traffic(void) {
    fixture f;
    RS_CHECK_EQ(fx_start(&f, 1), 0);
    void *good = fx_connect(&f, 2);
    RS_CHECK(good != NULL);
    if (!good) return fx_stop(&f);
    check_good_client(&f, good);

    /* a connection that sends half a header and stalls stays open and harms no one */
    int staller = raw_connect(f.port);
    RS_CHECK(staller >= 0);
    RS_CHECK_EQ(write(staller, "PRPC\0\0", 6), 6);

    /* bad magic */
    RS_CHECK(send_and_expect_close(f.port, (const uint8_t *)"HTTP/1.1 GET /\r\n\r\n", 18));
    check_good_client(&f, good);
    /* huge body size: rejected before allocating */
    RS_CHECK(send_and_expect_close(
        f.port, (const uint8_t[]){'P', 'R', 'P', 'C', 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 4}, 12));
    check_good_client(&f, good);
    /* meta_size larger than body_size */
    RS_CHECK(send_and_expect_close(
        f.port, (const uint8_t[]){'P', 'R', 'P', 'C', 0, 0, 0, 4, 0, 0, 0, 9, 1, 2, 3, 4}, 16));
    /* garbage protobuf as RpcMeta */
    RS_CHECK(send_and_expect_close(
        f.port,
        (const uint8_t[]){'P', 'R', 'P', 'C', 0, 0, 0, 4, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, 16));
    /* a valid RpcMeta without the request part */
    RS_CHECK(send_and_expect_close(
        f.port, (const uint8_t[]){'P', 'R', 'P', 'C', 0, 0, 0, 2, 0, 0, 0, 2, 0x20, 0x05}, 14));
    check_good_client(&f, good);

    /* a well-framed request with a garbage PSRequest gets an error response, not a close */
    {
        Brpc__Policy__RpcMeta meta = BRPC__POLICY__RPC_META__INIT;
        Brpc__Policy__RpcRequestMeta rm = BRPC__POLICY__RPC_REQUEST_META__INIT;
        rm.service_name = "recstore.PSService";
        rm.method_name = "Get";
        meta.request = &rm;
        meta.has_correlation_id = 1;
        meta.correlation_id = 77;
        uint8_t buf[256];
        size_t ml = brpc__policy__rpc_meta__pack(&meta, buf + 12);
        const uint8_t junk[] = {0x1a, 0x50, 1}; /* keys field claims 80 bytes */
        memcpy(buf + 12 + ml, junk, sizeof junk);
        rs_brpc_header_write(buf, (uint32_t)(ml + sizeof junk), (uint32_t)ml);
        int fd = raw_connect(f.port);
        RS_CHECK_EQ(write(fd, buf, 12 + ml + sizeof junk), (ssize_t)(12 + ml + sizeof junk));
        uint8_t in[512];
        size_t got = 0;
        rs_brpc_header h = {0};
        while (got < 12 || got < 12 + h.body_size) {
            ssize_t r = read(fd, in + got, sizeof in - got);
            if (r <= 0) break;
            got += (size_t)r;
            if (got >= 12) rs_brpc_header_parse(in, 1 << 20, &h, NULL);
        }
        RS_CHECK(got >= 12 && got == 12 + h.body_size);
        rs_brpc_arena ar;
        rs_brpc_arena_init(&ar);
        Brpc__Policy__RpcMeta *rmeta = NULL;
        RS_CHECK_EQ(rs_brpc_meta_unpack(&ar, in + 12, h.meta_size, &rmeta, NULL), 0);
        if (rmeta) {
            RS_CHECK_EQ(rmeta->correlation_id, 77);
            RS_CHECK(rmeta->response && rmeta->response->error_code == RS_BRPC_EREQUEST);
            RS_CHECK(rmeta->response && strstr(rmeta->response->error_text, "keys") != NULL);
            rs_brpc_meta_free(&ar, rmeta);
        }
        close(fd);
    }
    check_good_client(&f, good);
    close(staller);
    check_good_client(&f, good);
    rs_ps_transport_stats ts;
    f.sops->stats(f.srv, &ts);
    RS_CHECK(ts.bad_frames >= 5);
    f.cops->close(good);
    fx_stop(&f);
}

/* A GET on c fails with RS_ECONN, the message naming the server (it has stopped). */
static void check_get_fails_naming_the_server(fixture *f, void *c) {
    uint64_t k = 7;
    float got[VS / 4];
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = 1, .keys = (const uint8_t *)&k};
    rs_error err = {0};
    rs_ps_completion comp;
    int rc = f->cops->submit(c, &get, 1, got, sizeof got, &err);
    if (rc == 0) rc = f->cops->next(c, &comp, &err);
    RS_CHECK_EQ(rc, RS_ECONN);
    RS_CHECK(strstr(err.msg, "127.0.0.1") != NULL);
}

static void test_stop_with_client_connected(void) {
    fixture f;
    RS_CHECK_EQ(fx_start(&f, 2), 0);
    void *c = fx_connect(&f, 2);
    RS_CHECK(c != NULL);
    if (!c) return fx_stop(&f);
    check_good_client(&f, c);
    f.sops->stop(f.srv);
    f.srv = NULL;
    check_get_fails_naming_the_server(&f, c);
    f.cops->close(c);
    rs_error err = {0};
    /* connecting now is refused with a message naming the server */
    rs_ps_client_opts co = {.timeout_ms = 2000, .max_in_flight = 1};
    void *c2 = NULL;
    RS_CHECK_EQ(f.cops->connect("127.0.0.1", f.port, &co, &c2, &err), RS_ECONN);
    RS_CHECK(strstr(err.msg, "refused") != NULL);
    fx_stop(&f);
}

/* Connections are spread over the workers (the accepting worker hands one to the worker owning the
 * fewest): 9 clients connected one after another on 3 workers, each on a socket of its own
 * (share=off), are 3 each, and all are served. Under TSan this covers the hand-off through a
 * worker's inbox. */
static void test_connections_spread_over_workers(void) {
    fixture f;
    if (fx_start(&f, 3)) {
        RS_CHECK(0);
        return;
    }
    void *c[9] = {0};
    for (int i = 0; i < 9; i++) {
        c[i] = fx_connect_to(&f, f.port, 2, "share=off");
        RS_CHECK(c[i] != NULL);
        if (c[i]) check_good_client(&f, c[i]); /* answered: its worker adopted it */
    }
    rs_ps_transport_stats ts;
    f.sops->stats(f.srv, &ts);
    RS_CHECK_EQ(ts.connections_open, 9);
    RS_CHECK_EQ(ts.connections_accepted, 9);
    RS_CHECK_EQ(ts.worker_connections_max, 3);
    RS_CHECK_EQ(ts.worker_connections_min, 3);
    for (int i = 0; i < 9; i++)
        if (c[i]) f.cops->close(c[i]);
    fx_stop(&f);
}

/* RecStore's wire on the same server under the sanitizers: recstore+brpc connections (keys and
 * blocks in the attachment, chunks of 500), misses, the update refusal, a request of 0 keys.
 * Compressed requests are covered by test_recstore_brpc_server.py. */
static void test_recstore_wire(void) {
    fixture f;
    if (fx_start(&f, 1)) {
        RS_CHECK(0);
        return;
    }
    const rs_ps_conn_ops *ops = NULL;
    rs_error e = {0};
    RS_CHECK_EQ(rs_ps_transport_find("recstore+brpc", NULL, &ops, &e), 0);
    void *c = NULL;
    rs_ps_client_opts co = {.timeout_ms = 5000, .max_in_flight = 2};
    RS_CHECK_EQ(ops->connect("127.0.0.1", f.port, &co, &c, &e), 0);
    char why[256];
    int rc = rs_test_recstore_put_get(ops, c, 900, 1100, 1200, VS, row_for, why, sizeof why);
    if (rc) fprintf(stderr, "recstore+brpc put/get: %s\n", why);
    RS_CHECK_EQ(rc, 0);
    float got[VS / 4];
    rs_ps_request zero = {.op = RS_PS_GET, .num_keys = 0};
    RS_CHECK_EQ(ops->submit(c, &zero, 5, got, 0, &e), RS_EINVAL);
    ops->close(c);
    fx_stop(&f);
}

/* ---- waiting: spin, then block (brpc_conn.c, "Waiting") ------------------------------------ */

/* n synchronous GETs of key 7 (put by check_good_client), rows checked; the wait counters after */
static rs_ps_wait_stats sync_gets(fixture *f, void *c, int n) {
    uint64_t k = 7;
    float row[VS / 4], got[VS / 4];
    row_for(k, row);
    rs_ps_completion comp;
    for (int i = 0; i < n; i++) {
        rs_ps_request get = {.op = RS_PS_GET, .num_keys = 1, .keys = (const uint8_t *)&k};
        memset(got, 0, sizeof got);
        RS_CHECK_EQ(call(f, c, &get, got, sizeof got, &comp), 0);
        RS_CHECK(memcmp(got, row, VS) == 0);
    }
    rs_ps_wait_stats st = {0};
    f->cops->wait_stats(c, &st);
    return st;
}

/* A TCP relay between the test's client and the server that passes requests on at once and holds
 * each chunk of a reply until an event on the client's side: RELAY_UNTIL_BLOCKED until the
 * client's thread sleeps (in its poll(): so every call waits, and no spin can catch its answer),
 * RELAY_UNTIL_WAITING until the client has begun a wait (rs_spin_waiters; so every call waits, and
 * a spin can catch it). On loopback the server's answer can otherwise be there before the client's
 * next() begins, when the server's thread preempts the client on its CPU. */
enum { RELAY_UNTIL_BLOCKED, RELAY_UNTIL_WAITING };
typedef struct relay {
    int lfd, cfd, sfd;
    uint16_t port, server_port;
    int mode;
    pid_t client_tid; /* the test's thread, which makes the calls */
    pthread_t th;
} relay;

/* The scheduler state of a thread of this process ('R', 'S', ...; '?' when unreadable). */
static char thread_state(pid_t tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *fp = fopen(path, "r");
    if (!fp) return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

static int relay_may_release(const relay *r) {
    if (r->mode == RELAY_UNTIL_WAITING && rs_spin_waiters() > 0) return 1;
    return thread_state(r->client_tid) == 'S';
}

static void *relay_main(void *arg) {
    relay *r = arg;
    r->cfd = accept(r->lfd, NULL, NULL);
    rs_error err = {0};
    if (r->cfd < 0 || rs_net_connect("127.0.0.1", r->server_port, 5000, 0, &r->sfd, &err))
        return NULL;
    uint8_t buf[1 << 16];
    for (;;) {
        struct pollfd p[2] = {{.fd = r->cfd, .events = POLLIN}, {.fd = r->sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) return NULL;
        if (p[0].revents) { /* requests go on at once */
            ssize_t n = read(r->cfd, buf, sizeof buf);
            if (n <= 0 || write(r->sfd, buf, (size_t)n) != n) break;
        }
        if (p[1].revents) { /* replies are held until the client's event */
            ssize_t n = read(r->sfd, buf, sizeof buf);
            if (n <= 0) break;
            while (!relay_may_release(r))
                sched_yield();
            if (write(r->cfd, buf, (size_t)n) != n) break;
        }
    }
    return NULL;
}

static int relay_start(relay *r, uint16_t server_port, int mode) {
    memset(r, 0, sizeof *r);
    r->cfd = r->sfd = -1;
    r->server_port = server_port;
    r->mode = mode;
    r->client_tid = (pid_t)syscall(SYS_gettid);
    rs_error err = {0};
    if (rs_net_listen("127.0.0.1", 0, 0, 1, &r->lfd, &err) ||
        rs_net_bound_port(r->lfd, &r->port, &err))
        return -1;
    return pthread_create(&r->th, NULL, relay_main, r);
}

/* after the client closed: the relay sees EOF and ends */
static void relay_stop(relay *r) {
    pthread_join(r->th, NULL);
    if (r->cfd >= 0) close(r->cfd);
    if (r->sfd >= 0) close(r->sfd);
    close(r->lfd);
}

/* Through a relay that holds each answer until the client has begun to wait for it, a spin
 * longer than any answer takes here catches it; held until the client sleeps, with every spin slot
 * of the process taken, or more of its threads waiting than it has CPUs, or spin_us=0, every wait
 * blocks at once. */
static void test_client_spins_then_blocks(void) {
    fixture f;
    if (fx_start(&f, 1)) {
        RS_CHECK(0);
        return;
    }
    for (int mode = 0; mode < 3; mode++) {
        relay r;
        RS_CHECK_EQ(relay_start(&r, f.port, mode ? RELAY_UNTIL_BLOCKED : RELAY_UNTIL_WAITING), 0);
        void *c = fx_connect_to(&f, r.port, 2, mode < 2 ? "spin_us=1000000" : "spin_us=0");
        RS_CHECK(c != NULL);
        if (!c) {
            relay_stop(&r);
            break;
        }
        if (mode == 0) {
            check_good_client(&f, c); /* key 7's row */
            rs_ps_wait_stats st = sync_gets(&f, c, 8);
            RS_CHECK_EQ(st.spun + st.blocked, 10); /* the PUT, the GET, the 8 GETs */
            /* the first spun and caught its answer (later ones too, unless the kernel switched
             * the thread out mid-spin: then it stops spinning for a while) */
            RS_CHECK(st.spun >= 1);
            RS_CHECK_EQ(st.unspun, 0);
        } else if (mode == 1) {
            /* every slot taken (by this thread, standing in for other waiters) */
            uint32_t cap = 0, peak = 0;
            rs_spin_slots(&cap, &peak);
            int held[64] = {0};
            for (uint32_t i = 0; i < cap && i < 64; i++)
                RS_CHECK_EQ(held[i] = rs_spin_slot_take(), 1);
            RS_CHECK_EQ(rs_spin_slot_take(), 0);
            rs_ps_wait_stats full = sync_gets(&f, c, 2);
            for (uint32_t i = 0; i < cap && i < 64; i++)
                rs_spin_slot_give(&held[i]);
            RS_CHECK_EQ(full.spun, 0);
            RS_CHECK_EQ(full.blocked, 2);
            RS_CHECK_EQ(full.unspun, 2);
            /* as many other waiters as CPUs (this thread standing in for them) */
            for (unsigned i = 0; i < rs_cpu_count(); i++)
                rs_spin_waiters_enter();
            rs_ps_wait_stats crowded = sync_gets(&f, c, 2);
            for (unsigned i = 0; i < rs_cpu_count(); i++)
                rs_spin_waiters_leave();
            RS_CHECK_EQ(crowded.spun, 0);
            RS_CHECK_EQ(crowded.blocked, 4);
            RS_CHECK_EQ(crowded.unspun, 4);
        } else {
            rs_ps_wait_stats st0 = sync_gets(&f, c, 4);
            RS_CHECK_EQ(st0.spun, 0);
            RS_CHECK_EQ(st0.blocked, 4);
            RS_CHECK_EQ(st0.quick, 0);
            RS_CHECK_EQ(st0.unspun, 0);
        }
        f.cops->close(c);
        relay_stop(&r);
    }
    fx_stop(&f);
}

/* Adaptive spinning: with every answer held until the client sleeps, every spin misses; after
 * one, the client blocks at once, and only a run of waits that were over within the spin (these
 * are: their answers come as soon as the client sleeps) brings the next spin. */
static void test_client_spins_short_after_blocked_waits(void) {
    fixture f;
    if (fx_start(&f, 1)) {
        RS_CHECK(0);
        return;
    }
    relay r;
    RS_CHECK_EQ(relay_start(&r, f.port, RELAY_UNTIL_BLOCKED), 0);
    void *c = fx_connect_to(&f, r.port, 2, "spin_us=50000");
    RS_CHECK(c != NULL);
    if (c) {
        check_good_client(&f, c); /* 2 waits */
        rs_ps_wait_stats st = sync_gets(&f, c, 22);
        uint64_t waits = st.spun + st.blocked, spins = waits - st.quick - st.unspun;
        RS_CHECK_EQ(waits, 24);
        RS_CHECK_EQ(st.spun, 0);
        RS_CHECK_EQ(st.unspun, 0);
        /* a spin, then RS_SPIN_QUICK_AFTER + 1 waits blocked at once, again and again (a wait
         * stretched past 50 ms by the machine raises the count instead: fewer spins) */
        RS_CHECK(spins >= 2);
        RS_CHECK(spins <= waits / (RS_SPIN_QUICK_AFTER + 2) + 1);
        f.cops->close(c);
    }
    relay_stop(&r);
    fx_stop(&f);
}

/* ---- Sharing: the process's connections to one server share its sockets ------------------- */

static uint64_t open_connections(fixture *f) {
    rs_ps_transport_stats ts;
    f->sops->stats(f->srv, &ts);
    return ts.connections_open;
}

/* A thread's connection pipelines GETs (two in flight) of keys of its own, PUT first, and checks
 * every row; its replies are received by whichever of the socket's users receives. */
typedef struct share_worker {
    fixture *f;
    void *c;
    uint64_t base; /* its keys: base .. base + 7 */
    int rounds, failures;
    pthread_t th;
} share_worker;

static void *share_worker_main(void *arg) {
    share_worker *w = arg;
    enum { K = 8, DEPTH = 2 };
    uint64_t keys[K];
    float rows[K * VS / 4], got[DEPTH][K * VS / 4];
    for (int i = 0; i < K; i++) {
        keys[i] = w->base + (uint64_t)i;
        row_for(keys[i], rows + i * VS / 4);
    }
    rs_error err = {0};
    rs_ps_completion comp;
    rs_ps_request put = {.op = RS_PS_PUT,
                         .num_keys = K,
                         .keys = (const uint8_t *)keys,
                         .rows = (const uint8_t *)rows,
                         .rows_len = sizeof rows};
    if (w->f->cops->submit(w->c, &put, 0, NULL, 0, &err) || w->f->cops->next(w->c, &comp, &err) ||
        comp.resp.status) {
        w->failures++;
        return NULL;
    }
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = K, .keys = (const uint8_t *)keys};
    int sent = 0, done = 0;
    while (done < w->rounds) {
        while (sent < w->rounds && sent - done < DEPTH) {
            memset(got[sent % DEPTH], 0, sizeof got[0]);
            if (w->f->cops->submit(w->c, &get, (uint64_t)sent, got[sent % DEPTH], sizeof got[0],
                                   &err)) {
                w->failures++;
                return NULL;
            }
            sent++;
        }
        if (w->f->cops->next(w->c, &comp, &err) || comp.tag != (uint64_t)done ||
            comp.resp.num_found != K || memcmp(got[done % DEPTH], rows, sizeof rows) != 0) {
            w->failures++;
            return NULL;
        }
        done++;
    }
    return NULL;
}

/* With share=auto (the default) the connections of a process take as many sockets as the server
 * has threads (server_threads in its stats) and no more; share=N takes N, share=off one each.
 * Six threads on three sockets' worth of connections all get their own rows back, in order. */
static void test_threads_share_sockets(void) {
    fixture f;
    if (fx_start(&f, 2)) {
        RS_CHECK(0);
        return;
    }
    void *c[6] = {0};
    for (int i = 0; i < 6; i++) {
        c[i] = fx_connect(&f, 2);
        RS_CHECK(c[i] != NULL);
        if (c[i]) check_good_client(&f, c[i]);
    }
    RS_CHECK_EQ(open_connections(&f), 2);
    void *one[3] = {0}, *own[2] = {0};
    for (int i = 0; i < 3; i++) {
        one[i] = fx_connect_to(&f, f.port, 2, "share=1;spin_us=50");
        RS_CHECK(one[i] != NULL);
        if (one[i]) check_good_client(&f, one[i]);
    }
    RS_CHECK_EQ(open_connections(&f), 3); /* share=1: a socket of their own (another key) */
    for (int i = 0; i < 2; i++) {
        own[i] = fx_connect_to(&f, f.port, 2, "share=off");
        RS_CHECK(own[i] != NULL);
        if (own[i]) check_good_client(&f, own[i]);
    }
    RS_CHECK_EQ(open_connections(&f), 5);
    share_worker w[9];
    void **all[9] = {&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &one[0], &one[1], &one[2]};
    for (int i = 0; i < 9; i++) {
        w[i] =
            (share_worker){.f = &f, .c = *all[i], .base = 1000 + 100 * (uint64_t)i, .rounds = 300};
        RS_CHECK_EQ(w[i].c ? pthread_create(&w[i].th, NULL, share_worker_main, &w[i]) : -1, 0);
    }
    for (int i = 0; i < 9; i++) {
        if (w[i].c) pthread_join(w[i].th, NULL);
        RS_CHECK_EQ(w[i].failures, 0);
    }
    for (int i = 0; i < 9; i++)
        if (*all[i]) f.cops->close(*all[i]);
    for (int i = 0; i < 2; i++)
        if (own[i]) f.cops->close(own[i]);
    fx_stop(&f);
}

/* The users of a shared socket close at once, from their own threads: exactly one of them frees
 * the socket (two closers each found themselves the last and freed it twice, or one read it after
 * the other freed it: ps_bench's load threads leaving as its run threads came; AddressSanitizer).
 */
typedef struct closer {
    fixture *f;
    void *c;
    pthread_barrier_t *go;
    pthread_t th;
} closer;

static void *closer_main(void *arg) {
    closer *k = arg;
    pthread_barrier_wait(k->go);
    k->f->cops->close(k->c);
    return NULL;
}

static void test_shared_users_close_at_once(void) {
    fixture f;
    if (fx_start(&f, 1)) {
        RS_CHECK(0);
        return;
    }
    enum { USERS = 2, ROUNDS = 3000 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, USERS);
    for (int r = 0; r < ROUNDS; r++) {
        closer k[USERS];
        int opened = 1;
        for (int i = 0; i < USERS; i++) {
            k[i] = (closer){.f = &f, .c = fx_connect_to(&f, f.port, 2, "share=1"), .go = &go};
            opened &= k[i].c != NULL;
        }
        RS_CHECK(opened);
        if (!opened) break;
        if (r % 100 == 0) check_good_client(&f, k[r % USERS].c);
        for (int i = 0; i < USERS; i++)
            RS_CHECK_EQ(pthread_create(&k[i].th, NULL, closer_main, &k[i]), 0);
        for (int i = 0; i < USERS; i++)
            pthread_join(k[i].th, NULL);
    }
    pthread_barrier_destroy(&go);
    fx_stop(&f);
}

/* A one-worker server and two connections on one socket (share=1, depth in flight each); -1,
 * with nothing left open, when any of them failed. */
static int fx_start_pair(fixture *f, uint32_t depth, void **a, void **b) {
    *a = *b = NULL;
    if (fx_start(f, 1)) return -1;
    *a = fx_connect_to(f, f->port, depth, "share=1");
    *b = fx_connect_to(f, f->port, depth, "share=1");
    if (*a && *b) return 0;
    if (*a) f->cops->close(*a);
    if (*b) f->cops->close(*b);
    fx_stop(f);
    return -1;
}

/* A user that leaves with requests outstanding takes nothing from the others: their replies are
 * received and dropped by the user that receives next, whose own come back right. */
static void test_shared_user_leaves_with_requests_outstanding(void) {
    fixture f;
    void *a, *b;
    if (fx_start_pair(&f, 4, &a, &b)) {
        RS_CHECK(0);
        return;
    }
    check_good_client(&f, b); /* key 7's row */
    uint64_t k = 7;
    float gone[3][VS / 4], got[VS / 4], row[VS / 4];
    row_for(k, row);
    rs_error err = {0};
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = 1, .keys = (const uint8_t *)&k};
    for (int i = 0; i < 3; i++)
        RS_CHECK_EQ(f.cops->submit(a, &get, 1, gone[i], sizeof gone[i], &err), 0);
    f.cops->close(a);
    rs_ps_completion comp;
    for (int i = 0; i < 3; i++) {
        memset(got, 0, sizeof got);
        RS_CHECK_EQ(call(&f, b, &get, got, sizeof got, &comp), 0);
        RS_CHECK(memcmp(got, row, VS) == 0);
    }
    RS_CHECK_EQ(open_connections(&f), 1);
    f.cops->close(b);
    fx_stop(&f);
}

/* A shared socket that breaks fails every user's requests with the reason, naming the server;
 * a connection made after that takes a new socket. */
static void test_shared_socket_breaks_for_every_user(void) {
    fixture f;
    void *a, *b;
    if (fx_start_pair(&f, 2, &a, &b)) {
        RS_CHECK(0);
        return;
    }
    check_good_client(&f, a);
    uint16_t port = f.port;
    f.sops->stop(f.srv);
    f.srv = NULL;
    check_get_fails_naming_the_server(&f, a);
    check_get_fails_naming_the_server(&f, b);
    rs_error err = {0};
    rs_ps_client_opts co = {.timeout_ms = 2000, .max_in_flight = 1, .extra = "share=1"};
    void *c = NULL;
    RS_CHECK_EQ(f.cops->connect("127.0.0.1", port, &co, &c, &err), RS_ECONN); /* a new socket */
    f.cops->close(a);
    f.cops->close(b);
    fx_stop(&f);
}

/* A connection that sends more requests than the sockets hold without reading the replies
 * receives while it waits to send: the server stops reading a connection whose unsent replies
 * pass max_pending_bytes (64 KiB here), so a writer waiting only for room to send would wait for
 * a server waiting for it, until the timeout. Every request is answered, in order. */
static void test_writer_receives_while_it_waits(void) {
    fixture f;
    if (fx_start_opts(&f, 1, "max_pending_bytes=65536")) {
        RS_CHECK(0);
        return;
    }
    enum { N = 16000, K = 100 }; /* about 14 MB of requests, 51 MB of replies */
    void *c = fx_connect_to(&f, f.port, N, NULL);
    RS_CHECK(c != NULL);
    if (!c) return fx_stop(&f);
    uint64_t keys[K];
    for (int i = 0; i < K; i++)
        keys[i] = 5000 + (uint64_t)i; /* never written: zero rows */
    static float rows[K * VS / 4];
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = K, .keys = (const uint8_t *)keys};
    rs_error err = {0};
    int sent = 0;
    while (sent < N && f.cops->submit(c, &get, (uint64_t)sent, rows, sizeof rows, &err) == 0)
        sent++;
    if (sent < N) fprintf(stderr, "submit %d: %s\n", sent, err.msg);
    RS_CHECK_EQ(sent, N);
    int answered = 0;
    rs_ps_completion comp;
    while (answered < sent && f.cops->next(c, &comp, &err) == 0 && comp.tag == (uint64_t)answered &&
           comp.resp.status == 0 && comp.resp.num_found == 0)
        answered++;
    RS_CHECK_EQ(answered, sent);
    f.cops->close(c);
    fx_stop(&f);
}

/* share takes auto, off or 1..1024; RecStore's wire does not share. */
static void test_share_option_errors(void) {
    fixture f;
    if (fx_start(&f, 1)) {
        RS_CHECK(0);
        return;
    }
    const rs_ps_conn_ops *rs_ops = NULL;
    rs_error err = {0};
    RS_CHECK_EQ(rs_ps_transport_find("recstore+brpc", NULL, &rs_ops, &err), 0);
    const char *bad[] = {"share=0", "share=many", "share=1025"};
    for (int i = 0; i < 3; i++) {
        rs_ps_client_opts co = {.timeout_ms = 2000, .max_in_flight = 1, .extra = bad[i]};
        void *c = NULL;
        RS_CHECK_EQ(f.cops->connect("127.0.0.1", f.port, &co, &c, &err), RS_EINVAL);
        RS_CHECK(strstr(err.msg, bad[i]) != NULL);
    }
    rs_ps_client_opts co = {.timeout_ms = 2000, .max_in_flight = 1, .extra = "share=2"};
    void *c = NULL;
    RS_CHECK_EQ(rs_ops ? rs_ops->connect("127.0.0.1", f.port, &co, &c, &err) : 0, RS_EINVAL);
    RS_CHECK(strstr(err.msg, "RecStore's wire") != NULL);
    fx_stop(&f);
}

RS_TEST_MAIN(RS_TEST(test_roundtrip), RS_TEST(test_recstore_wire), RS_TEST(test_malformed_traffic),
             RS_TEST(test_stop_with_client_connected),
             RS_TEST(test_connections_spread_over_workers), RS_TEST(test_client_spins_then_blocks),
             RS_TEST(test_client_spins_short_after_blocked_waits),
             RS_TEST(test_threads_share_sockets),
             RS_TEST(test_shared_user_leaves_with_requests_outstanding),
             RS_TEST(test_shared_users_close_at_once),
             RS_TEST(test_shared_socket_breaks_for_every_user), RS_TEST(test_share_option_errors),
             RS_TEST(test_writer_receives_while_it_waits))
#else
static void test_skipped(void) {
    printf("brpc transport not built (no protobuf-c)\n");
}
RS_TEST_MAIN(RS_TEST(test_skipped))
#endif
