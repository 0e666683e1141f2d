/*
 * net.h — the TCP plumbing every transport shares, after Redis's anet: resolve a host, listen,
 * connect with a deadline, wait for readiness until a deadline, read the bound port, switch a
 * socket to non-blocking or TCP_NODELAY.
 *
 * Every function returns 0 or an RS_E* code and fills the caller's rs_error with a reason that
 * names the endpoint as host:port ("connect to 127.0.0.1:25001: Connection refused"), so the
 * caller only prefixes who it is ("brpc", "control plane"). Sockets are always close-on-exec.
 * IPv4 and IPv6 both work: every address a name resolves to is tried in order, as anet does.
 *
 * Users: the brpc server and client, the RC control plane (server and client), the Redis
 * baseline client and the gRPC server's bind probe. gRPC's own sockets are gRPC core's.
 */
#ifndef RS_TRANSPORT_NET_H
#define RS_TRANSPORT_NET_H

#include <stdint.h>

#include "recstore/error.h"

/* listen() backlog of every TCP server here when the caller passes 0. The kernel caps it at
 * net.core.somaxconn (4096 since Linux 5.4); a burst of clients larger than this (a runner starting
 * many clients against one shard) would otherwise see SYNs dropped and 1 s retransmits. */
#define RS_NET_LISTEN_BACKLOG 1024

/* flags of rs_net_listen / rs_net_connect */
enum {
    RS_NET_NONBLOCK = 1 << 0, /* leave the returned socket non-blocking */
};

/* "host:port", or "[host]:port" when host is an IPv6 literal, into buf (NULL or "" host: "*"). */
const char *rs_net_format(char *buf, size_t cap, const char *host, uint16_t port);

/* A socket bound to host:port and listening with backlog (0 = RS_NET_LISTEN_BACKLOG), with
 * SO_REUSEADDR. host NULL or "" listens on every address; port 0 takes a free port (read it with
 * rs_net_bound_port). RS_EINVAL when host does not resolve, RS_EBUSY when the address is in use,
 * RS_EIO otherwise; the message names host:port. */
int rs_net_listen(const char *host, uint16_t port, int flags, int backlog, int *fd, rs_error *err);

/* A TCP connection to host:port with TCP_NODELAY, established within timeout_ms (> 0; the wait
 * covers every address tried). RS_ECONN when host does not resolve or the connection is refused or
 * unreachable, RS_ETIMEDOUT when timeout_ms passed; the message names host:port. The socket is
 * blocking unless flags has RS_NET_NONBLOCK. */
int rs_net_connect(const char *host, uint16_t port, uint32_t timeout_ms, int flags, int *fd,
                   rs_error *err);

/* Wait until fd is ready for events (POLLIN / POLLOUT) or deadline_ns (rs_now_ns clock) passes:
 * 0 when ready (or in error / hung up: the next read or write says which), RS_ETIMEDOUT, or
 * RS_EIO with errno set when poll() itself fails. EINTR is retried with the time left. */
int rs_net_wait(int fd, short events, uint64_t deadline_ns);

/* The local port of a bound socket (the one the kernel picked for port 0). */
int rs_net_bound_port(int fd, uint16_t *port, rs_error *err);

int rs_net_set_nonblock(int fd, int on, rs_error *err);
int rs_net_set_nodelay(int fd, rs_error *err);

#endif
