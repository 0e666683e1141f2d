/*
 * test_net.c — transport/net.c on loopback: listen on port 0 and read the port back, a second
 * listener on a taken port (RS_EBUSY naming host:port), connect + accept + bytes, waiting for
 * readiness until a deadline, the blocking / non-blocking flag, a refused connect and a connect
 * that times out against a listener whose accept queue is full — each error naming host:port.
 * No sleeps: every timeout is a deadline of the call under test.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "rs_test.h"
#include "transport/net.h"

static int has(const char *msg, const char *part) {
    if (strstr(msg, part)) return 1;
    fprintf(stderr, "message '%s' lacks '%s'\n", msg, part);
    return 0;
}

static void test_listen_port0_and_busy(void) {
    rs_error e = {0};
    int lfd = -1, l2 = -1;
    uint16_t port = 0;
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", 0, 0, 0, &lfd, &e), 0);
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &e), 0);
    RS_CHECK(port != 0);
    int fl = fcntl(lfd, F_GETFD);
    RS_CHECK(fl >= 0 && (fl & FD_CLOEXEC));
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", port, 0, 0, &l2, &e), RS_EBUSY);
    RS_CHECK_EQ(l2, -1);
    char ep[64];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", port);
    RS_CHECK(has(e.msg, ep));
    RS_CHECK(has(e.msg, "in use"));
    close(lfd);
}

static void test_connect_accept_roundtrip(void) {
    rs_error e = {0};
    int lfd, cfd, nfd;
    uint16_t port;
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", 0, 0, 0, &lfd, &e), 0);
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &e), 0);
    RS_CHECK_EQ(rs_net_connect("127.0.0.1", port, 5000, 0, &cfd, &e), 0);
    RS_CHECK_EQ(fcntl(cfd, F_GETFL) & O_NONBLOCK, 0); /* blocking unless asked */
    int nd = 0;
    socklen_t sl = sizeof nd;
    RS_CHECK_EQ(getsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &nd, &sl), 0);
    RS_CHECK(nd != 0);
    int afd = accept(lfd, NULL, NULL);
    RS_CHECK(afd >= 0);
    RS_CHECK_EQ(write(cfd, "ping", 4), 4);
    char buf[8] = {0};
    RS_CHECK_EQ(rs_net_wait(afd, POLLIN, rs_now_ns() + 5000000000ull), 0);
    RS_CHECK_EQ(read(afd, buf, sizeof buf), 4);
    RS_CHECK_EQ(memcmp(buf, "ping", 4), 0);
    /* nothing more to read: the deadline ends the wait; a passed deadline does not poll at all */
    RS_CHECK_EQ(rs_net_wait(afd, POLLIN, rs_now_ns() + 20000000ull), RS_ETIMEDOUT);
    RS_CHECK_EQ(rs_net_wait(afd, POLLIN, rs_now_ns() - 1), RS_ETIMEDOUT);
    RS_CHECK_EQ(rs_net_wait(afd, POLLOUT, rs_now_ns() + 5000000000ull), 0);
    RS_CHECK_EQ(rs_net_connect("127.0.0.1", port, 5000, RS_NET_NONBLOCK, &nfd, &e), 0);
    RS_CHECK(fcntl(nfd, F_GETFL) & O_NONBLOCK);
    RS_CHECK_EQ(read(nfd, buf, sizeof buf), -1); /* nothing sent: EAGAIN, not a hang */
    RS_CHECK_EQ(rs_net_set_nonblock(nfd, 0, &e), 0);
    RS_CHECK_EQ(fcntl(nfd, F_GETFL) & O_NONBLOCK, 0);
    close(nfd);
    close(afd);
    close(cfd);
    close(lfd);
}

static void test_connect_refused_names_endpoint(void) {
    rs_error e = {0};
    int lfd, cfd = 123;
    uint16_t port;
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", 0, 0, 0, &lfd, &e), 0);
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &e), 0);
    close(lfd); /* the port is now closed */
    RS_CHECK_EQ(rs_net_connect("127.0.0.1", port, 5000, 0, &cfd, &e), RS_ECONN);
    RS_CHECK_EQ(cfd, -1);
    char ep[64];
    snprintf(ep, sizeof ep, "connect to 127.0.0.1:%u", port);
    RS_CHECK(has(e.msg, ep));
    RS_CHECK(has(e.msg, "refused"));
}

/* Linux drops a SYN when the listener's accept queue is full, so the next connect stays in
 * SYN_SENT (the retransmit comes after 1 s) and our deadline fires: a timeout on loopback without
 * an unroutable address. backlog 1 holds at most 2 unaccepted connections. */
static void test_connect_times_out_on_full_backlog(void) {
    rs_error e = {0};
    int lfd, fds[16];
    size_t n = 0;
    uint16_t port;
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", 0, 0, 1, &lfd, &e), 0);
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &e), 0);
    int rc = 0;
    while (n < sizeof fds / sizeof *fds) {
        int fd = -1;
        rc = rs_net_connect("127.0.0.1", port, 150, 0, &fd, &e);
        if (rc) break;
        fds[n++] = fd;
    }
    RS_CHECK_EQ(rc, RS_ETIMEDOUT);
    RS_CHECK(n >= 1);
    char ep[64];
    snprintf(ep, sizeof ep, "connect to 127.0.0.1:%u timed out after 150 ms", port);
    RS_CHECK(has(e.msg, ep));
    while (n)
        close(fds[--n]);
    close(lfd);
}

static void test_bad_arguments(void) {
    rs_error e = {0};
    int fd;
    RS_CHECK_EQ(rs_net_connect("", 80, 100, 0, &fd, &e), RS_EINVAL);
    RS_CHECK(has(e.msg, "no host"));
    RS_CHECK_EQ(rs_net_connect("127.0.0.1", 80, 0, 0, &fd, &e), RS_EINVAL);
    char buf[64];
    RS_CHECK(has(rs_net_format(buf, sizeof buf, "::1", 7), "[::1]:7"));
    RS_CHECK(has(rs_net_format(buf, sizeof buf, NULL, 7), "*:7"));
    RS_CHECK_EQ(rs_net_bound_port(-1, &(uint16_t){0}, &e), RS_EIO);
}

/* IPv6 loopback where the machine has it (a container may not): same calls, bracketed names. */
static void test_ipv6_loopback(void) {
    rs_error e = {0};
    int lfd, cfd;
    uint16_t port;
    if (rs_net_listen("::1", 0, 0, 0, &lfd, &e) != 0) {
        printf("skip ipv6: %s\n", e.msg);
        return;
    }
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &e), 0);
    RS_CHECK_EQ(rs_net_connect("::1", port, 5000, 0, &cfd, &e), 0);
    close(cfd);
    close(lfd);
    RS_CHECK_EQ(rs_net_connect("::1", port, 5000, 0, &cfd, &e), RS_ECONN);
    char ep[64];
    snprintf(ep, sizeof ep, "[::1]:%u", port);
    RS_CHECK(has(e.msg, ep));
}

RS_TEST_MAIN(RS_TEST(test_listen_port0_and_busy), RS_TEST(test_connect_accept_roundtrip),
             RS_TEST(test_connect_refused_names_endpoint),
             RS_TEST(test_connect_times_out_on_full_backlog), RS_TEST(test_bad_arguments),
             RS_TEST(test_ipv6_loopback))
