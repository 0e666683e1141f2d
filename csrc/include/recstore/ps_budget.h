/*
 * ps_budget.h — the process's budget of PS bytes in flight, shared by its active clients.
 *
 * An all-shards client (ps_client.c) is active while it has batches in flight. Each active client
 * keeps at most budget / (active clients) bytes of requests in flight — keys plus rows, per chunk
 * — and always at least one chunk; a chunk past its share stays unsent in its client until the
 * client's own earlier requests are collected. So with many threads the requests and replies in
 * flight, and the caches and TLB entries they take, stay near the budget whatever the thread
 * count, and every thread gets the same share of it. A client never waits for another's requests:
 * only for its own, as it would anyway.
 *
 * The default budget is RS_PS_BUDGET_BYTES_PER_CPU per CPU the process may run on (its affinity
 * mask, read once): 16 MiB on 2 CPUs, more than 16 threads x 4 requests of 500 keys x 512 B
 * (so such a pipeline is not touched) and an eighth of what RecStore's default concurrency, 16
 * threads x 16 requests of 1024 keys x 512 B, puts in flight (each thread then keeps one out).
 * Clients of brpc and grpc keep to it unless told otherwise; clients of shm and rdma keep to none
 * (transport.h's budget_by_default; docs/scale.md, "A budget of bytes in flight"). Thread-safe; a
 * few atomic operations per batch and per chunk.
 */
#ifndef RECSTORE_PS_BUDGET_H
#define RECSTORE_PS_BUDGET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_PS_BUDGET_BYTES_PER_CPU (8ull << 20)
#define RS_PS_BUDGET_NONE          UINT64_MAX

/* RS_PS_BUDGET_BYTES_PER_CPU x the CPUs in the process's affinity mask. */
uint64_t rs_ps_budget_default(void);

/* A client's first batch in flight (enter) and its last one done (leave). */
void rs_ps_budget_enter(void);
void rs_ps_budget_leave(void);
/* What one active client may keep in flight under budget (RS_PS_BUDGET_NONE: no limit). */
uint64_t rs_ps_budget_share(uint64_t budget);
/* The clients active now (tests). */
uint32_t rs_ps_budget_active(void);

#ifdef __cplusplus
}
#endif
#endif
