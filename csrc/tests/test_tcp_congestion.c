/*
 * test_tcp_congestion.c — the tcp_congestion option (transport/tcp_congestion.h) on real loopback
 * sockets: parsing, a named congestion control set or refused with the kernel's list, auto's
 * rule (a BBR on a loopback connection or a loopback listener becomes cubic; a wildcard listener,
 * or a socket that is not BBR, keeps what it has), system leaving every socket alone, the
 * connections a listener accepts inheriting its setting, and the sockets found by port.
 *
 * Cases that need BBR (auto's rule) say "skipped" with the reason where the kernel cannot give a
 * socket BBR (no tcp_bbr, or not allowed to this process).
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rs_test.h"
#include "transport/net.h"
#include "transport/tcp_congestion.h"

typedef struct pair {
    int lfd, cfd, afd; /* listener, client end, accepted end */
    uint16_t port;
} pair;

static int pair_open(pair *p, const char *host) {
    rs_error err = {0};
    p->lfd = p->cfd = p->afd = -1;
    if (rs_net_listen(host, 0, 0, 0, &p->lfd, &err) || rs_net_bound_port(p->lfd, &p->port, &err))
        return -1;
    if (rs_net_connect("127.0.0.1", p->port, 5000, 0, &p->cfd, &err)) return -1;
    p->afd = accept(p->lfd, NULL, NULL);
    return p->afd >= 0 ? 0 : -1;
}

static void pair_close(pair *p) {
    if (p->afd >= 0) close(p->afd);
    if (p->cfd >= 0) close(p->cfd);
    if (p->lfd >= 0) close(p->lfd);
}

static int set_cc(int fd, const char *name) {
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
}

static int is_cc(int fd, const char *name) {
    char now[RS_TCP_CC_NAME_MAX];
    return strcmp(rs_tcp_cc_name(fd, now, sizeof now), name) == 0;
}

static rs_tcp_cc parsed(const char *val) {
    rs_tcp_cc cc;
    rs_error err = {0};
    RS_CHECK_EQ(rs_tcp_cc_parse("t", val, &cc, &err), 0);
    return cc;
}

static void test_parse(void) {
    RS_CHECK_EQ(parsed("auto").mode, RS_TCP_CC_AUTO);
    RS_CHECK_EQ(parsed("system").mode, RS_TCP_CC_SYSTEM);
    rs_tcp_cc cc = parsed("reno");
    RS_CHECK_EQ(cc.mode, RS_TCP_CC_NAMED);
    RS_CHECK(strcmp(cc.name, "reno") == 0);
    const char *bad[] = {"", "cu bic", "cubic;", "a_name_too_long_", "bbr\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rs_error err = {0};
        RS_CHECK_EQ(rs_tcp_cc_parse("brpc client", bad[i], &cc, &err), RS_EINVAL);
        RS_CHECK(strstr(err.msg, "brpc client option tcp_congestion=") != NULL);
    }
}

static void test_named_is_set_or_refused(void) {
    pair p;
    RS_CHECK_EQ(pair_open(&p, "127.0.0.1"), 0);
    rs_tcp_cc reno = parsed("reno"), none = parsed("no_such_cc");
    rs_error err = {0};
    RS_CHECK_EQ(rs_tcp_cc_apply(p.cfd, &reno, "t", &err), 1);
    RS_CHECK(is_cc(p.cfd, "reno"));
    RS_CHECK_EQ(rs_tcp_cc_apply(p.cfd, &reno, "t", &err), 0); /* already */
    RS_CHECK_EQ(rs_tcp_cc_apply(p.cfd, &none, "grpc client", &err), RS_EINVAL);
    RS_CHECK(strstr(err.msg, "grpc client option tcp_congestion=no_such_cc") != NULL);
    RS_CHECK(strstr(err.msg, "may choose: ") != NULL);
    RS_CHECK(is_cc(p.cfd, "reno"));
    pair_close(&p);
}

static void test_accepted_connections_inherit_the_listener(void) {
    rs_error err = {0};
    int lfd = -1, cfd = -1, afd = -1;
    uint16_t port = 0;
    RS_CHECK_EQ(rs_net_listen("127.0.0.1", 0, 0, 0, &lfd, &err), 0);
    RS_CHECK_EQ(rs_net_bound_port(lfd, &port, &err), 0);
    rs_tcp_cc reno = parsed("reno");
    RS_CHECK_EQ(rs_tcp_cc_apply(lfd, &reno, "t", &err), 1);
    RS_CHECK_EQ(rs_net_connect("127.0.0.1", port, 5000, 0, &cfd, &err), 0);
    afd = accept(lfd, NULL, NULL);
    RS_CHECK(afd >= 0);
    RS_CHECK(is_cc(afd, "reno"));
    close(afd);
    close(cfd);
    close(lfd);
}

static void test_system_leaves_sockets_alone(void) {
    pair p;
    RS_CHECK_EQ(pair_open(&p, "127.0.0.1"), 0);
    RS_CHECK_EQ(set_cc(p.cfd, "reno"), 0);
    rs_tcp_cc sys = parsed("system");
    rs_error err = {0};
    char name[RS_TCP_CC_NAME_MAX];
    int changed = -1;
    RS_CHECK_EQ(rs_tcp_cc_apply(p.cfd, &sys, "t", &err), 0);
    RS_CHECK(is_cc(p.cfd, "reno"));
    RS_CHECK_EQ(rs_tcp_cc_apply_port(p.port, 0, &sys, "t", &changed, name, sizeof name, &err), 0);
    RS_CHECK_EQ(changed, 0);
    RS_CHECK(strcmp(name, "reno") == 0); /* found, named, not changed */
    pair_close(&p);
}

/* auto: a BBR on loopback becomes cubic; the rest keeps what it has. */
static void test_auto_takes_bbr_off_loopback(void) {
    pair p;
    RS_CHECK_EQ(pair_open(&p, "127.0.0.1"), 0);
    if (set_cc(p.cfd, "bbr") != 0) {
        printf("test_auto_takes_bbr_off_loopback: skipped: this kernel gives no socket bbr here\n");
        pair_close(&p);
        return;
    }
    rs_tcp_cc a = parsed("auto");
    rs_error err = {0};
    RS_CHECK_EQ(rs_tcp_cc_apply(p.cfd, &a, "t", &err), 1);
    RS_CHECK(is_cc(p.cfd, "cubic"));
    RS_CHECK_EQ(set_cc(p.afd, "reno"), 0); /* not a BBR: kept */
    RS_CHECK_EQ(rs_tcp_cc_apply(p.afd, &a, "t", &err), 0);
    RS_CHECK(is_cc(p.afd, "reno"));
    RS_CHECK_EQ(set_cc(p.lfd, "bbr"), 0); /* a listener bound to 127.0.0.1 */
    RS_CHECK_EQ(rs_tcp_cc_apply(p.lfd, &a, "t", &err), 1);
    RS_CHECK(is_cc(p.lfd, "cubic"));
    pair_close(&p);

    /* a wildcard listener is not loopback: its connections may come from anywhere */
    RS_CHECK_EQ(pair_open(&p, "0.0.0.0"), 0);
    RS_CHECK_EQ(set_cc(p.lfd, "bbr"), 0);
    RS_CHECK_EQ(rs_tcp_cc_apply(p.lfd, &a, "t", &err), 0);
    RS_CHECK(is_cc(p.lfd, "bbr"));
    pair_close(&p);
}

/* By port: the listener bound to it, or the connections whose peer port it is (the client's end,
 * not the accepted one, whose local port it is). */
static void test_sockets_found_by_port(void) {
    pair p;
    RS_CHECK_EQ(pair_open(&p, "127.0.0.1"), 0);
    RS_CHECK_EQ(set_cc(p.cfd, "cubic"), 0);
    RS_CHECK_EQ(set_cc(p.afd, "cubic"), 0);
    RS_CHECK_EQ(set_cc(p.lfd, "cubic"), 0);
    rs_tcp_cc reno = parsed("reno");
    rs_error err = {0};
    char name[RS_TCP_CC_NAME_MAX];
    int changed = 0;
    RS_CHECK_EQ(rs_tcp_cc_apply_port(p.port, 0, &reno, "t", &changed, name, sizeof name, &err), 0);
    RS_CHECK_EQ(changed, 1);
    RS_CHECK(strcmp(name, "reno") == 0);
    RS_CHECK(is_cc(p.cfd, "reno"));
    RS_CHECK(is_cc(p.afd, "cubic"));
    RS_CHECK(is_cc(p.lfd, "cubic"));
    RS_CHECK_EQ(rs_tcp_cc_apply_port(p.port, 1, &reno, "t", &changed, name, sizeof name, &err), 0);
    RS_CHECK_EQ(changed, 1);
    RS_CHECK(is_cc(p.lfd, "reno"));
    RS_CHECK(is_cc(p.afd, "cubic"));
    /* a port nothing uses: nothing found */
    RS_CHECK_EQ(rs_tcp_cc_apply_port(1, 1, &reno, "t", &changed, name, sizeof name, &err), 0);
    RS_CHECK_EQ(changed, 0);
    RS_CHECK(name[0] == 0);
    /* a refused name stops at the first socket, naming the option */
    rs_tcp_cc none = parsed("no_such_cc");
    RS_CHECK_EQ(rs_tcp_cc_apply_port(p.port, 0, &none, "grpc client", &changed, NULL, 0, &err),
                RS_EINVAL);
    RS_CHECK(strstr(err.msg, "tcp_congestion=no_such_cc") != NULL);
    pair_close(&p);
}

RS_TEST_MAIN(RS_TEST(test_parse), RS_TEST(test_named_is_set_or_refused),
             RS_TEST(test_accepted_connections_inherit_the_listener),
             RS_TEST(test_system_leaves_sockets_alone), RS_TEST(test_auto_takes_bbr_off_loopback),
             RS_TEST(test_sockets_found_by_port))
