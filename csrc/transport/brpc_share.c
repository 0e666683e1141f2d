/*
 * brpc_share.c — the brpc client's sockets and the process's table of shared ones
 * (brpc_share.h).
 */
#if RS_HAVE_PROTOBUF_C
#include "transport/brpc_share.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/net.h"

rs_brpc_sock *rs_brpc_sock_alloc(const char *host, uint16_t port) {
    rs_brpc_sock *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->fd = -1;
    snprintf(s->peer, sizeof s->peer, "brpc://%s:%u", host, port);
    s->in_cap = 256 << 10;
    s->in = malloc(s->in_cap);
    if (!s->in) {
        free(s);
        return NULL;
    }
    rs_brpc_arena_init(&s->arena);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->placed, NULL);
    return s;
}

int rs_brpc_sock_open(const char *host, uint16_t port, uint32_t timeout_ms, rs_brpc_sock **out,
                      rs_error *err) {
    int rc;
    rs_brpc_sock *s = *out = rs_brpc_sock_alloc(host, port);
    if (!s) return rs_error_set(err, RS_ENOMEM, "brpc connection buffers");
    if ((rc = rs_net_connect(host, port, timeout_ms, RS_NET_NONBLOCK, &s->fd, err))) {
        rs_error_prefix(err, "brpc");
        rs_brpc_sock_free(s);
        *out = NULL;
    }
    return rc;
}

void rs_brpc_sock_free(rs_brpc_sock *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->placed);
    free(s->in);
    free(s->zbuf);
    free(s->users);
    free(s->key);
    free(s);
}

int rs_brpc_sock_add_user(rs_brpc_sock *s, void *u, uint32_t *uid, rs_error *err) {
    if (s->next_uid == INT32_MAX) /* ids fill the high half of a (signed) correlation id */
        return rs_error_set(err, RS_EBUSY, "%s: the socket has had 2^31 users", s->peer);
    if (s->nusers == s->users_cap) {
        uint32_t cap = s->users_cap ? 2 * s->users_cap : 4;
        void **p = realloc(s->users, cap * sizeof *p);
        if (!p) return rs_error_set(err, RS_ENOMEM, "%s: no memory for a user", s->peer);
        s->users = p;
        s->users_cap = cap;
    }
    s->users[s->nusers] = u;
    __atomic_store_n(&s->nusers, s->nusers + 1, __ATOMIC_RELAXED); /* read unlocked (Waiting) */
    *uid = s->next_uid++;
    return 0;
}

uint32_t rs_brpc_sock_remove_user(rs_brpc_sock *s, void *u) {
    for (uint32_t i = 0; i < s->nusers; i++)
        if (s->users[i] == u) {
            s->users[i] = s->users[s->nusers - 1];
            __atomic_store_n(&s->nusers, s->nusers - 1, __ATOMIC_RELAXED);
            break;
        }
    return s->nusers;
}

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static rs_brpc_sock *table;

void rs_brpc_share_lock(void) {
    pthread_mutex_lock(&table_mu);
}

void rs_brpc_share_unlock(void) {
    pthread_mutex_unlock(&table_mu);
}

rs_brpc_sock *rs_brpc_share_find(const char *key, uint32_t *count, uint32_t *server_threads) {
    rs_brpc_sock *best = NULL;
    uint32_t best_users = 0;
    pid_t pid = getpid();
    *count = 0;
    *server_threads = 0;
    for (rs_brpc_sock *s = table; s; s = s->next) {
        if (s->pid != pid || strcmp(s->key, key) != 0) continue;
        *server_threads = s->server_threads;
        pthread_mutex_lock(&s->mu);
        int broken = s->broken;
        uint32_t users = s->nusers;
        pthread_mutex_unlock(&s->mu);
        if (broken) continue;
        ++*count;
        if (!best || users < best_users) {
            best = s;
            best_users = users;
        }
    }
    return best;
}

int rs_brpc_share_add(rs_brpc_sock *s, const char *key, uint32_t server_threads, rs_error *err) {
    s->key = strdup(key);
    if (!s->key) return rs_error_set(err, RS_ENOMEM, "%s: no memory for its key", s->peer);
    s->shared = 1;
    s->pid = getpid();
    s->server_threads = server_threads;
    s->next = table;
    table = s;
    return 0;
}

void rs_brpc_share_remove(rs_brpc_sock *s) {
    for (rs_brpc_sock **p = &table; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    s->next = NULL;
}
#endif
