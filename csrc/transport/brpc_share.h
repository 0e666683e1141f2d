/*
 * brpc_share.h — the brpc client's TCP connections, and the process's table of the ones its
 * threads share.
 *
 * A client connection (brpc_conn.c, one per thread and server) sends and receives on a socket:
 * its own, or one it shares with the other connections of the process to the same server
 * (transport option share, brpc_conn.c "Sharing"). Shared sockets are found here by a key — what
 * makes two connections interchangeable: server address, share, timeout, congestion control,
 * token — and
 * by the process that opened them (a child after fork() opens its own). A key's first socket
 * learns how many threads the server serves connections with (its stats reply's
 * server_threads); the key then holds at most that many sockets, and a connection joins the one
 * with the fewest users.
 */
#ifndef RS_TRANSPORT_BRPC_SHARE_H
#define RS_TRANSPORT_BRPC_SHARE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "recstore/error.h"
#include "transport/brpc_frame.h"

typedef struct rs_brpc_sock {
    int fd;
    char peer[160]; /* "brpc://host:port" for messages */
    /* the reader's: bytes received and not yet taken are in[in_start .. in_start + in_len) */
    uint8_t *in;
    size_t in_start, in_len, in_cap;
    rs_brpc_arena arena;
    uint8_t *zbuf; /* inflated response messages (compress_type != 0) */
    size_t zcap;
    pthread_mutex_t mu;    /* users, their rings, the reader role, broken */
    pthread_mutex_t wmu;   /* one request frame written at a time */
    pthread_cond_t placed; /* a user's reply was placed (for a user leaving or failing) */
    int broken;
    rs_error broken_err;
    void *reader; /* the user receiving now (a brpc_conn.c connection), or NULL */
    void **users; /* the connections using the socket */
    uint32_t nusers, users_cap;
    uint32_t leaving;  /* users gone from `users` that have not yet said whether they were last */
    uint32_t next_uid; /* user ids are never reused: a reply to a user gone is told apart */
    /* the table's (shared sockets only) */
    int shared;
    char *key;
    pid_t pid;
    uint32_t server_threads; /* the key's: learned by its first socket (0: not known) */
    /* its receiver may spin in every gap between frames, a preempted spin not counted against it
     * (brpc_conn.c, "Waiting"): the server leaves a CPU of this host free for it */
    int spin_free;
    struct rs_brpc_sock *next;
} rs_brpc_sock;

/* A socket for host:port not connected yet (fd -1) with its input buffer, or NULL (no memory). */
rs_brpc_sock *rs_brpc_sock_alloc(const char *host, uint16_t port);
/* A socket connected to host:port (non-blocking, TCP_NODELAY) within timeout_ms, with its input
 * buffer; not in the table. */
int rs_brpc_sock_open(const char *host, uint16_t port, uint32_t timeout_ms, rs_brpc_sock **out,
                      rs_error *err);
void rs_brpc_sock_free(rs_brpc_sock *s);

/* Add user u; *uid receives its id. RS_ENOMEM. Under s->mu, or before s is shared. */
int rs_brpc_sock_add_user(rs_brpc_sock *s, void *u, uint32_t *uid, rs_error *err);
/* Remove user u (under s->mu); the users left. */
uint32_t rs_brpc_sock_remove_user(rs_brpc_sock *s, void *u);

/* The table of shared sockets; every call below under rs_brpc_share_lock. */
void rs_brpc_share_lock(void);
void rs_brpc_share_unlock(void);
/* The usable socket of key with the fewest users (this process's, not broken), or NULL; *count
 * receives how many usable sockets key has, *server_threads what its first socket learned. */
rs_brpc_sock *rs_brpc_share_find(const char *key, uint32_t *count, uint32_t *server_threads);
/* Put s in the table under key (copied). RS_ENOMEM. */
int rs_brpc_share_add(rs_brpc_sock *s, const char *key, uint32_t server_threads, rs_error *err);
/* Take s out of the table (no one joins it any more). */
void rs_brpc_share_remove(rs_brpc_sock *s);

#endif
