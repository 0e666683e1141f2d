/*
 * redis_bench.c — Redis MSET/MGET baseline for the PS transport benchmark (see redis_bench.h).
 *
 * RESP on the wire: a request is an array of bulk strings ("*3\r\n$4\r\nMGET\r\n$5\r\nkey:1\r\n
 * ..."); an MGET reply is "*<n>\r\n" then n bulk strings "$<len>\r\n<bytes>\r\n" or "$-1\r\n" for
 * a missing key. The reply parser keeps its position across reads (no re-scan), never reads past
 * the buffered bytes, and copies each value into the caller-side rows buffer like a PS client.
 *
 * One thread, poll() over every connection, one MGET outstanding per connection.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/hist.h"
#include "recstore/ps_bench.h"
#include "recstore/redis_bench.h"
#include "recstore/rng.h"
#include "recstore/transport.h"
#include "transport/net.h"

typedef struct rconn {
    int fd;
    uint8_t *out;
    size_t out_len, out_sent, out_cap;
    uint8_t *in;
    size_t in_len, in_cap;
    /* reply parse state */
    int have_count;
    long long count, idx;
    size_t pos;
    uint64_t found;
    /* current request */
    int busy;
    uint64_t submit_ns;
    uint64_t *keys;
    uint8_t *rows;
} rconn;

static int reserve(uint8_t **p, size_t *cap, size_t need) {
    if (*cap >= need) return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int append(rconn *c, const void *data, size_t len) {
    if (reserve(&c->out, &c->out_cap, c->out_len + len)) return -1;
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
    return 0;
}

static int append_bulk(rconn *c, const void *data, size_t len) {
    char head[32];
    int h = snprintf(head, sizeof head, "$%zu\r\n", len);
    if (append(c, head, (size_t)h) || append(c, data, len) || append(c, "\r\n", 2)) return -1;
    return 0;
}

static int append_key(rconn *c, uint64_t key) {
    char k[32];
    int n = snprintf(k, sizeof k, "key:%llu", (unsigned long long)key);
    return append_bulk(c, k, (size_t)n);
}

/* Find "\r\n" at or after pos; returns the index of '\r' or -1. */
static long find_crlf(const rconn *c, size_t pos) {
    for (size_t i = pos; i + 1 < c->in_len; i++)
        if (c->in[i] == '\r' && c->in[i + 1] == '\n') return (long)i;
    return -1;
}

static int parse_int(const uint8_t *p, size_t len, long long *out) {
    char buf[24];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, p, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Advance the MGET reply parser. 1 = complete, 0 = need more bytes, -1 = protocol error. */
static int parse_mget(rconn *c, uint32_t value_size, rs_error *err) {
    if (!c->have_count) {
        long e = find_crlf(c, 0);
        if (e < 0) return 0;
        if (c->in[0] != '*' || parse_int(c->in + 1, (size_t)e - 1, &c->count) || c->count < 0) {
            rs_error_set(err, RS_EPROTO, "redis: unexpected MGET reply '%.*s'",
                         (int)(e > 60 ? 60 : e), (const char *)c->in);
            return -1;
        }
        c->have_count = 1;
        c->idx = 0;
        c->pos = (size_t)e + 2;
    }
    while (c->idx < c->count) {
        long e = find_crlf(c, c->pos);
        if (e < 0) return 0;
        long long len;
        if (c->in[c->pos] != '$' || parse_int(c->in + c->pos + 1, (size_t)e - c->pos - 1, &len)) {
            rs_error_set(err, RS_EPROTO, "redis: unexpected element '%.*s'",
                         (int)((size_t)e - c->pos > 60 ? 60 : (size_t)e - c->pos),
                         (const char *)c->in + c->pos);
            return -1;
        }
        uint8_t *row = c->rows + (size_t)c->idx * value_size;
        if (len < 0) {
            memset(row, 0, value_size);
            c->pos = (size_t)e + 2;
        } else {
            if ((size_t)e + 2 + (size_t)len + 2 > c->in_len) return 0;
            if ((size_t)len != value_size) {
                rs_error_set(err, RS_EPROTO, "redis: value of %lld bytes, expected %u", len,
                             value_size);
                return -1;
            }
            memcpy(row, c->in + e + 2, value_size);
            c->found++;
            c->pos = (size_t)e + 2 + (size_t)len + 2;
        }
        c->idx++;
    }
    return 1;
}

static int send_pending(rconn *c, rs_error *err) {
    while (c->out_sent < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return rs_error_errno(err, RS_ECONN, errno, "redis: send");
        }
        c->out_sent += (size_t)w;
    }
    return 0;
}

/* Read what is available (blocking=1: wait for at least one byte). */
static int recv_some(rconn *c, int blocking, rs_error *err) {
    if (reserve(&c->in, &c->in_cap, c->in_len + (256u << 10)))
        return rs_error_set(err, RS_ENOMEM, "redis buffer");
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, blocking ? 0 : MSG_DONTWAIT);
    if (r == 0) return rs_error_set(err, RS_ECONN, "redis: connection closed by the server");
    if (r < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return rs_error_errno(err, RS_ECONN, errno, "redis: recv");
    }
    c->in_len += (size_t)r;
    return 0;
}

static void reply_done(rconn *c) {
    size_t rest = c->in_len - c->pos;
    memmove(c->in, c->in + c->pos, rest);
    c->in_len = rest;
    c->have_count = 0;
    c->pos = 0;
    c->busy = 0;
}

static int load(const rs_redis_bench_config *cfg, rconn *c, rs_error *err) {
    float *row = malloc(cfg->value_size);
    if (!row) return rs_error_set(err, RS_ENOMEM, "row");
    int rc = 0;
    for (uint64_t k = 1; k <= cfg->record_count && !rc;) {
        uint64_t n = cfg->record_count - k + 1;
        if (n > cfg->batch_keys) n = cfg->batch_keys;
        c->out_len = c->out_sent = 0;
        char head[32];
        int h = snprintf(head, sizeof head, "*%llu\r\n", (unsigned long long)(1 + 2 * n));
        append(c, head, (size_t)h);
        append_bulk(c, "MSET", 4);
        for (uint64_t i = 0; i < n; i++) {
            rs_ps_bench_row(k + i, cfg->value_size, row);
            append_key(c, k + i);
            append_bulk(c, row, cfg->value_size);
        }
        while (!rc && c->out_sent < c->out_len) {
            rc = send_pending(c, err);
            if (!rc && c->out_sent < c->out_len) {
                struct pollfd p = {.fd = c->fd, .events = POLLOUT};
                poll(&p, 1, 1000);
            }
        }
        while (!rc) {
            long e = find_crlf(c, 0);
            if (e >= 0) {
                if (c->in[0] != '+') {
                    rc = rs_error_set(err, RS_EPROTO, "redis: MSET failed: %.*s",
                                      (int)(e > 200 ? 200 : e), (const char *)c->in);
                }
                memmove(c->in, c->in + e + 2, c->in_len - (size_t)e - 2);
                c->in_len -= (size_t)e + 2;
                break;
            }
            rc = recv_some(c, 1, err);
        }
        k += n;
    }
    free(row);
    return rc;
}

int rs_redis_bench(const rs_redis_bench_config *cfg, rs_redis_bench_result *res, rs_error *err) {
    memset(res, 0, sizeof *res);
    if (!cfg->connections || !cfg->batch_keys || !cfg->record_count || !cfg->value_size ||
        cfg->value_size % 4)
        return rs_error_set(err, RS_EINVAL,
                            "connections, batch_keys, record_count and value_size (multiple of 4) "
                            "must be positive");
    uint32_t nc = cfg->connections;
    rconn *cs = calloc(nc, sizeof *cs);
    rs_hist *hist = malloc(sizeof *hist);
    float *expect = malloc(cfg->value_size);
    int rc = 0;
    if (!cs || !hist || !expect) {
        rc = rs_error_set(err, RS_ENOMEM, "redis bench");
        goto out;
    }
    rs_hist_reset(hist);
    for (uint32_t i = 0; i < nc; i++)
        cs[i].fd = -1;
    for (uint32_t i = 0; i < nc && !rc; i++) {
        rc = rs_net_connect(cfg->host, cfg->port, RS_PS_DEFAULT_TIMEOUT_MS, 0, &cs[i].fd, err);
        if (rc) rs_error_prefix(err, "redis");
        if (!rc) {
            cs[i].keys = malloc((size_t)cfg->batch_keys * 8);
            cs[i].rows = malloc((size_t)cfg->batch_keys * cfg->value_size);
            if (!cs[i].keys || !cs[i].rows) rc = rs_error_set(err, RS_ENOMEM, "redis buffers");
        }
    }
    if (rc) goto out;
    if (cfg->load) {
        uint64_t t = rs_now_ns();
        if ((rc = load(cfg, &cs[0], err))) goto out;
        res->load_s = (double)(rs_now_ns() - t) / 1e9;
    }
    rs_rng rng;
    rs_rng_seed(&rng, cfg->seed);
    struct pollfd *pfd = calloc(nc, sizeof *pfd);
    if (!pfd) {
        rc = rs_error_set(err, RS_ENOMEM, "pollfds");
        goto out;
    }
    rs_cpu_times cpu0, cpu1;
    rs_process_cpu(&cpu0);
    uint64_t t0 = rs_now_ns(), end = t0 + (uint64_t)(cfg->running_seconds * 1e9), t_end = 0;
    uint32_t busy = 0;
    for (;;) {
        uint64_t now = rs_now_ns();
        int more = now < end && !(cfg->stop && *cfg->stop);
        if (!more && !t_end) t_end = now < end ? now : end;
        for (uint32_t i = 0; more && i < nc; i++) {
            rconn *c = &cs[i];
            if (c->busy) continue;
            c->out_len = c->out_sent = 0;
            char head[32];
            int h = snprintf(head, sizeof head, "*%u\r\n", cfg->batch_keys + 1);
            append(c, head, (size_t)h);
            append_bulk(c, "MGET", 4);
            for (uint32_t k = 0; k < cfg->batch_keys; k++) {
                c->keys[k] = rs_rng_below(&rng, cfg->record_count) + 1;
                append_key(c, c->keys[k]);
            }
            c->busy = 1;
            c->found = 0;
            busy++;
            c->submit_ns = rs_now_ns();
            if ((rc = send_pending(c, err))) goto out_pfd;
        }
        if (!busy) break;
        for (uint32_t i = 0; i < nc; i++) {
            pfd[i].fd = cs[i].busy ? cs[i].fd : -1;
            pfd[i].events = POLLIN | (cs[i].out_sent < cs[i].out_len ? POLLOUT : 0);
            pfd[i].revents = 0;
        }
        int pr = poll(pfd, nc, 1000);
        if (pr < 0 && errno != EINTR) {
            rc = rs_error_errno(err, RS_EIO, errno, "poll");
            goto out_pfd;
        }
        for (uint32_t i = 0; i < nc && pr > 0; i++) {
            rconn *c = &cs[i];
            if (!pfd[i].revents) continue;
            if (pfd[i].revents & POLLOUT && (rc = send_pending(c, err))) goto out_pfd;
            if (!(pfd[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
            if ((rc = recv_some(c, 0, err))) goto out_pfd;
            int p = parse_mget(c, cfg->value_size, err);
            if (p < 0) {
                rc = RS_EPROTO;
                goto out_pfd;
            }
            if (p == 0) continue;
            uint64_t done = rs_now_ns();
            if (done <= end) {
                rs_hist_record(hist, done - c->submit_ns);
                res->mgets++;
                res->key_ops += cfg->batch_keys;
                res->keys_found += c->found;
                if (cfg->verify) {
                    for (uint32_t k = 0; k < cfg->batch_keys; k++) {
                        rs_ps_bench_row(c->keys[k], cfg->value_size, expect);
                        if (memcmp(expect, c->rows + (size_t)k * cfg->value_size, cfg->value_size))
                            res->verify_bad++;
                    }
                }
            }
            reply_done(c);
            busy--;
        }
    }
    rs_process_cpu(&cpu1);
    if (!t_end) t_end = end;
    res->runtime_s = (double)(t_end - t0) / 1e9;
    rs_cpu_times d = rs_cpu_delta(cpu0, cpu1);
    res->cpu_user_s = d.user_s;
    res->cpu_sys_s = d.sys_s;
    res->mean_us = rs_hist_mean(hist) / 1e3;
    res->p50_us = (double)rs_hist_percentile(hist, 50) / 1e3;
    res->p95_us = (double)rs_hist_percentile(hist, 95) / 1e3;
    res->p99_us = (double)rs_hist_percentile(hist, 99) / 1e3;
    res->p999_us = (double)rs_hist_percentile(hist, 99.9) / 1e3;
    res->max_us = hist->count ? (double)hist->max / 1e3 : 0.0;
    if (res->verify_bad)
        rc = rs_error_set(err, RS_EVERIFY, "redis: %llu fetched values differ from the loaded rows",
                          (unsigned long long)res->verify_bad);
out_pfd:
    free(pfd);
out:
    for (uint32_t i = 0; cs && i < nc; i++) {
        if (cs[i].fd >= 0) close(cs[i].fd);
        free(cs[i].out);
        free(cs[i].in);
        free(cs[i].keys);
        free(cs[i].rows);
    }
    free(cs);
    free(hist);
    free(expect);
    return rc;
}
