/*
 * tcp_congestion.h — the TCP congestion control of the PS's connections: transport option
 * tcp_congestion=auto|system|NAME of the brpc and gRPC servers and clients.
 *
 * Why: a host may set a pacing congestion control as its default (net.ipv4.tcp_congestion_control
 * = bbr; Debian's own default is cubic). BBR paces every segment with a timer of its own, also on
 * loopback, where there is no link to share and no queue to protect: on a 2-vCPU VM that cost
 * gRPC 7-25 % of its keys/s at 16 client threads, and RecStore's wire, whose 500-row reply needs a
 * fifth 64 KiB loopback segment, 0.69x native's keys/s against 0.97x (docs/scale.md, "Loopback
 * connections do not pace"). Across hosts the host's choice is the operator's, and stays.
 *
 *   auto    (default) a connection whose peer is a loopback address (127.0.0.0/8, ::1, or the
 *           socket's own address), and a listening socket bound to a loopback address (the
 *           connections it accepts inherit its setting), switch to cubic when the kernel gave them
 *           a BBR; anything else keeps the system's choice. Never an error: if the kernel refuses
 *           cubic the socket keeps what it has.
 *   system  the kernel's choice for every socket, as before this option.
 *   NAME    that congestion control (reno, cubic, bbr, ... as the kernel spells it) on every
 *           connection and listening socket the transport sets up; a name the kernel does not
 *           have, or does not allow this process, is an error naming the option and the kernel's
 *           allowed list.
 *
 * gRPC core makes its sockets itself, so for gRPC the sockets are found among the process's file
 * descriptors (rs_tcp_cc_apply_port): its listening socket on the server's port after the server
 * starts, and the connections to the server's port once a channel is ready. A connection gRPC
 * re-establishes later keeps the system's choice.
 */
#ifndef RS_TRANSPORT_TCP_CONGESTION_H
#define RS_TRANSPORT_TCP_CONGESTION_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

/* Longest congestion control name (the kernel's TCP_CA_NAME_MAX, with its NUL). */
#define RS_TCP_CC_NAME_MAX 16

typedef enum { RS_TCP_CC_AUTO = 0, RS_TCP_CC_SYSTEM, RS_TCP_CC_NAMED } rs_tcp_cc_mode;

typedef struct rs_tcp_cc {
    rs_tcp_cc_mode mode;           /* zero-initialised: auto */
    char name[RS_TCP_CC_NAME_MAX]; /* RS_TCP_CC_NAMED: the congestion control */
} rs_tcp_cc;

/* Parse the option's value (auto, system, or a name of 1..15 letters, digits, '_' or '-');
 * RS_EINVAL naming "<who> option tcp_congestion=<val>". The name is checked against the kernel
 * when a socket takes it. */
int rs_tcp_cc_parse(const char *who, const char *val, rs_tcp_cc *out, rs_error *err);

/* Apply cc to a TCP socket, connected or listening (file comment). Returns 1 when the socket's
 * congestion control was changed, 0 when it was left as it is, or RS_EINVAL (RS_TCP_CC_NAMED
 * refused by the kernel; the message names who, the option and the allowed list). */
int rs_tcp_cc_apply(int fd, const rs_tcp_cc *cc, const char *who, rs_error *err);

/* Whether fd listens (*listening), and whether what decides it (file comment) is loopback: 1 or
 * 0; -1 when fd is not a TCP socket over IP. Also the brpc client's test for a server on this
 * host. */
int rs_tcp_socket_loopback(int fd, int *listening);

/* Apply cc to the process's TCP sockets on port: with listening set, the listening sockets bound
 * to it; without, the connected sockets whose peer port it is. *changed (may be NULL) counts the
 * sockets changed; name (may be NULL) receives the congestion control the last of them has
 * afterwards ("" if none was found). 0, or the first rs_tcp_cc_apply error; RS_EIO when
 * /proc/self/fd cannot be read for a NAMED cc (auto and system then leave the sockets alone). */
int rs_tcp_cc_apply_port(uint16_t port, int listening, const rs_tcp_cc *cc, const char *who,
                         int *changed, char *name, size_t name_cap, rs_error *err);

/* The congestion control of fd into buf ("?" when it has none: not TCP). */
const char *rs_tcp_cc_name(int fd, char *buf, size_t cap);

#endif
