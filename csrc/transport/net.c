/*
 * net.c — TCP resolve / listen / connect-with-deadline / bound port (see net.h).
 *
 * A connect is always started non-blocking and waited for with poll() until one deadline for all
 * the addresses a name resolves to; the socket is switched back to blocking afterwards unless the
 * caller wants it non-blocking. The errno of the last address tried is the one reported: for a
 * name with one address (the usual case) that is the whole story.
 */
#define _GNU_SOURCE
#include "transport/net.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/clock.h"

const char *rs_net_format(char *buf, size_t cap, const char *host, uint16_t port) {
    if (!host || !*host)
        snprintf(buf, cap, "*:%u", (unsigned)port);
    else if (strchr(host, ':'))
        snprintf(buf, cap, "[%s]:%u", host, (unsigned)port);
    else
        snprintf(buf, cap, "%s:%u", host, (unsigned)port);
    return buf;
}

static int resolve(const char *host, uint16_t port, int passive, struct addrinfo **res) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    *res = NULL;
    int g = getaddrinfo(host && *host ? host : NULL, ps, &hints, res);
    if (g == 0 && !*res) g = EAI_NONAME;
    return g;
}

int rs_net_listen(const char *host, uint16_t port, int flags, int backlog, int *out,
                  rs_error *err) {
    char ep[300];
    rs_net_format(ep, sizeof ep, host, port);
    *out = -1;
    struct addrinfo *res;
    int g = resolve(host, port, 1, &res);
    if (g) return rs_error_set(err, RS_EINVAL, "cannot resolve %s: %s", ep, gai_strerror(g));
    int fd = -1, e = 0;
    int type = SOCK_STREAM | SOCK_CLOEXEC | (flags & RS_NET_NONBLOCK ? SOCK_NONBLOCK : 0);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, type, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, backlog > 0 ? backlog : RS_NET_LISTEN_BACKLOG) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return rs_error_errno(err, e == EADDRINUSE ? RS_EBUSY : RS_EIO, e, "cannot listen on %s",
                              ep);
    *out = fd;
    return RS_OK;
}

int rs_net_wait(int fd, short events, uint64_t deadline_ns) {
    for (;;) {
        uint64_t now = rs_now_ns();
        if (now >= deadline_ns) return RS_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        uint64_t ms = (deadline_ns - now + 999999) / 1000000; /* round up: never spin at 0 ms */
        int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
        if (r > 0) return RS_OK;
        if (r < 0 && errno != EINTR) return RS_EIO;
    }
}

int rs_net_connect(const char *host, uint16_t port, uint32_t timeout_ms, int flags, int *out,
                   rs_error *err) {
    char ep[300];
    rs_net_format(ep, sizeof ep, host, port);
    *out = -1;
    if (!host || !*host) return rs_error_set(err, RS_EINVAL, "connect to %s: no host given", ep);
    if (timeout_ms == 0) return rs_error_set(err, RS_EINVAL, "connect to %s: timeout of 0 ms", ep);
    struct addrinfo *res;
    int g = resolve(host, port, 0, &res);
    if (g) return rs_error_set(err, RS_ECONN, "cannot resolve %s: %s", ep, gai_strerror(g));
    uint64_t deadline = rs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    int fd = -1, e = 0, timed_out = 0;
    for (struct addrinfo *ai = res; ai && !timed_out; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        /* EINTR: the connection goes on asynchronously, as with EINPROGRESS */
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        e = errno;
        if (e == EINPROGRESS || e == EINTR) {
            int w = rs_net_wait(fd, POLLOUT, deadline);
            if (w == 0) {
                socklen_t sl = sizeof e;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0) e = errno;
                if (e == 0) break;
            } else if (w == RS_ETIMEDOUT) {
                timed_out = 1;
            } else {
                e = errno;
            }
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0 && timed_out)
        return rs_error_set(err, RS_ETIMEDOUT, "connect to %s timed out after %u ms", ep,
                            timeout_ms);
    if (fd < 0) return rs_error_errno(err, RS_ECONN, e, "connect to %s", ep);
    int rc = rs_net_set_nodelay(fd, err);
    if (rc == 0 && !(flags & RS_NET_NONBLOCK)) rc = rs_net_set_nonblock(fd, 0, err);
    if (rc) {
        close(fd);
        rs_error_prefix(err, "connect to %s", ep);
        return rc;
    }
    *out = fd;
    return RS_OK;
}

int rs_net_bound_port(int fd, uint16_t *port, rs_error *err) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return rs_error_errno(err, RS_EIO, errno, "getsockname");
    if (ss.ss_family == AF_INET6)
        *port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else if (ss.ss_family == AF_INET)
        *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else
        return rs_error_set(err, RS_EINVAL, "socket %d is not a TCP socket", fd);
    return RS_OK;
}

int rs_net_set_nonblock(int fd, int on, rs_error *err) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) != 0)
        return rs_error_errno(err, RS_EIO, errno, "fcntl(O_NONBLOCK)");
    return RS_OK;
}

int rs_net_set_nodelay(int fd, rs_error *err) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        return rs_error_errno(err, RS_EIO, errno, "setsockopt(TCP_NODELAY)");
    return RS_OK;
}
