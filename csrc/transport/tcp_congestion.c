/*
 * tcp_congestion.c — the congestion control of the PS's TCP sockets (see tcp_congestion.h).
 *
 * A socket is "loopback" when the address that decides it is in 127.0.0.0/8, is ::1 or an
 * IPv4-mapped 127.x address, or (for a connection) equals the socket's own address: Linux routes a
 * connection to one of the host's own addresses through the loopback device too. For a listening
 * socket the bound address decides (a wildcard bind is not loopback); for a connection, the peer.
 */
#define _GNU_SOURCE
#include "transport/tcp_congestion.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* What auto switches a BBR on loopback to: Linux's default, which does not pace without the fq
 * qdisc (loopback has none). */
#define RS_TCP_CC_LOOPBACK "cubic"

int rs_tcp_cc_parse(const char *who, const char *val, rs_tcp_cc *out, rs_error *err) {
    memset(out, 0, sizeof *out);
    if (strcmp(val, "auto") == 0) return 0;
    if (strcmp(val, "system") == 0) {
        out->mode = RS_TCP_CC_SYSTEM;
        return 0;
    }
    size_t n = strlen(val);
    int ok = n > 0 && n < RS_TCP_CC_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)val[i]) || val[i] == '_' || val[i] == '-';
    if (!ok)
        return rs_error_set(err, RS_EINVAL,
                            "%s option tcp_congestion=%s: expected auto, system or a congestion "
                            "control name of 1..%d letters, digits, '_' or '-' (reno, cubic, bbr)",
                            who, val, RS_TCP_CC_NAME_MAX - 1);
    out->mode = RS_TCP_CC_NAMED;
    memcpy(out->name, val, n + 1);
    return 0;
}

const char *rs_tcp_cc_name(int fd, char *buf, size_t cap) {
    char name[RS_TCP_CC_NAME_MAX] = {0};
    socklen_t len = sizeof name - 1;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0 || !name[0])
        snprintf(buf, cap, "?");
    else
        snprintf(buf, cap, "%s", name);
    return buf;
}

static int addr_loopback(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss_family != AF_INET6) return 0;
    const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(x) || (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
}

static int addr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return 0;
}

static uint16_t addr_port(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)a)->sin_port);
    if (a->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
    return 0;
}

int rs_tcp_socket_loopback(int fd, int *listening) {
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof self, pl = sizeof peer;
    int acc = 0;
    socklen_t al = sizeof acc;
    if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0 ||
        (self.ss_family != AF_INET && self.ss_family != AF_INET6))
        return -1;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0) return -1;
    *listening = acc;
    if (acc) return addr_loopback(&self);
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) return 0; /* not connected (yet) */
    return addr_loopback(&peer) || addr_same(&self, &peer);
}

/* The kernel's list of congestion controls this process may choose, for messages. */
static void allowed_list(char *buf, size_t cap) {
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_allowed_congestion_control", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)cap, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
    if (!buf[0]) snprintf(buf, cap, "unknown");
}

int rs_tcp_cc_apply(int fd, const rs_tcp_cc *cc, const char *who, rs_error *err) {
    if (cc->mode == RS_TCP_CC_SYSTEM) return 0;
    char now[RS_TCP_CC_NAME_MAX];
    rs_tcp_cc_name(fd, now, sizeof now);
    if (cc->mode == RS_TCP_CC_NAMED) {
        if (strcmp(now, cc->name) == 0) return 0;
        if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc->name, (socklen_t)strlen(cc->name)) == 0)
            return 1;
        int e = errno;
        char allowed[256];
        allowed_list(allowed, sizeof allowed);
        return rs_error_set(err, RS_EINVAL,
                            "%s option tcp_congestion=%s: the kernel refused it (%s); this process "
                            "may choose: %s",
                            who, cc->name, strerror(e), allowed);
    }
    int listening = 0;
    if (strncmp(now, "bbr", 3) != 0 || rs_tcp_socket_loopback(fd, &listening) != 1) return 0;
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, RS_TCP_CC_LOOPBACK,
                      sizeof RS_TCP_CC_LOOPBACK - 1) == 0;
}

int rs_tcp_cc_apply_port(uint16_t port, int listening, const rs_tcp_cc *cc, const char *who,
                         int *changed, char *name, size_t name_cap, rs_error *err) {
    if (changed) *changed = 0;
    if (name && name_cap) name[0] = 0;
    if (cc->mode == RS_TCP_CC_SYSTEM && !name) return 0; /* nothing to set, nothing to tell */
    /* one scan at a time: threads connecting at once would each find the others' listing
     * descriptor among the process's and fstat it while its owner closes it (ThreadSanitizer
     * reported that race in test_grpc's crowd of connecting threads) */
    static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&scan_lock);
    DIR *d = opendir("/proc/self/fd");
    if (!d) { /* only a name the user asked for is an error: auto never fails */
        int e = errno;
        pthread_mutex_unlock(&scan_lock);
        if (cc->mode != RS_TCP_CC_NAMED) return 0;
        return rs_error_errno(err, RS_EIO, e,
                              "%s option tcp_congestion=%s: cannot list "
                              "/proc/self/fd to find the sockets",
                              who, cc->name);
    }
    int rc = 0;
    struct dirent *de;
    while (rc >= 0 && (de = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(de->d_name, &end, 10);
        struct stat st;
        if (*end || end == de->d_name || fd == dirfd(d) || fstat((int)fd, &st) != 0 ||
            !S_ISSOCK(st.st_mode))
            continue;
        int type = 0, acc = 0;
        socklen_t tl = sizeof type, al = sizeof acc;
        if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
            getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0 || !acc != !listening)
            continue;
        struct sockaddr_storage a;
        socklen_t len = sizeof a;
        int got = listening ? getsockname((int)fd, (struct sockaddr *)&a, &len)
                            : getpeername((int)fd, (struct sockaddr *)&a, &len);
        if (got != 0 || addr_port(&a) != port) continue;
        rc = rs_tcp_cc_apply((int)fd, cc, who, err);
        if (rc > 0 && changed) (*changed)++;
        if (rc >= 0 && name && name_cap) rs_tcp_cc_name((int)fd, name, name_cap);
    }
    closedir(d);
    pthread_mutex_unlock(&scan_lock);
    return rc < 0 ? rc : 0;
}
