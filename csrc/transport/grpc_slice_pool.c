/*
 * grpc_slice_pool.c — reusable buffers handed to gRPC as slices (the GET rows of server replies).
 *
 * A 500 x 512-byte GET reply needs a 256 KB buffer per request; allocating it fresh each time costs
 * a malloc, and often page faults when the allocator gives the memory back to the kernel in
 * between. A pool keeps a few buffers: rs_grpc_slice_pool_get returns a slice over a pooled buffer
 * (grpc_slice_new_with_user_data), and when gRPC drops its last reference — on whatever thread
 * finishes writing it — the buffer goes back to the pool.
 *
 * Invariants: the pool is reference-counted (one reference per buffer lent out plus the owner's),
 * so buffers released after rs_grpc_slice_pool_release, e.g. by gRPC threads tearing down a
 * connection, still find a live pool; `free` is guarded by the mutex; at most `keep` buffers are
 * kept idle. A buffer's hand-off to the thread that returns it is ordered by gRPC's slice refcount;
 * the release/acquire pair on `lent` states that ordering where ThreadSanitizer can see it.
 */
#if RS_HAVE_GRPC

#include <pthread.h>
#include <stdlib.h>

#include "transport/grpc_transport.h"

typedef struct pool_buf {
    rs_grpc_slice_pool *pool;
    size_t cap;
    int lent; /* __atomic: released when lent to gRPC, acquired on return (orders the hand-off) */
    uint8_t data[] __attribute__((aligned(64)));
} pool_buf;

struct rs_grpc_slice_pool {
    pthread_mutex_t mu;
    int refs; /* __atomic */
    size_t keep, nfree;
    pool_buf **free;
};

int rs_grpc_slice_pool_create(size_t keep, rs_grpc_slice_pool **out) {
    rs_grpc_slice_pool *p = calloc(1, sizeof *p);
    if (!p) return RS_ENOMEM;
    p->free = calloc(keep ? keep : 1, sizeof *p->free);
    if (!p->free) {
        free(p);
        return RS_ENOMEM;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->free);
        free(p);
        return RS_ENOMEM;
    }
    p->keep = keep;
    p->refs = 1;
    *out = p;
    return 0;
}

static void pool_unref(rs_grpc_slice_pool *p) {
    if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (size_t i = 0; i < p->nfree; i++)
        free(p->free[i]);
    pthread_mutex_destroy(&p->mu);
    free(p->free);
    free(p);
}

void rs_grpc_slice_pool_release(rs_grpc_slice_pool *p) {
    if (p) pool_unref(p);
}

static void buf_return(void *arg) {
    pool_buf *b = arg;
    (void)__atomic_load_n(&b->lent, __ATOMIC_ACQUIRE); /* see the top of the file */
    rs_grpc_slice_pool *p = b->pool;
    pthread_mutex_lock(&p->mu);
    if (p->nfree < p->keep) {
        p->free[p->nfree++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    free(b);
    pool_unref(p);
}

int rs_grpc_slice_pool_get(rs_grpc_slice_pool *p, size_t len, grpc_slice *out) {
    pool_buf *b = NULL, *drop = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->nfree) {
        b = p->free[--p->nfree];
        if (b->cap < len) {
            drop = b;
            b = NULL;
        }
    }
    pthread_mutex_unlock(&p->mu);
    free(drop);
    if (!b) {
        size_t cap = (len + 65535) & ~(size_t)65535; /* whole 64 KB units: fewer regrowths */
        b = aligned_alloc(64, (sizeof *b + cap + 63) & ~(size_t)63);
        if (!b) return RS_ENOMEM;
        b->pool = p;
        b->cap = cap;
    }
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&b->lent, 1, __ATOMIC_RELEASE);
    *out = grpc_slice_new_with_user_data(b->data, len, buf_return, b);
    return 0;
}

#endif /* RS_HAVE_GRPC */
