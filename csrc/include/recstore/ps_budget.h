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
 * The default budget is a number of bytes per CPU the process may run on (its affinity mask, read
 * once), set by the transport (transport.h's budget_per_cpu).
 *
 * brpc: RS_PS_BUDGET_BRPC_PER_CPU, 4 MiB per CPU (8 until 2026-12-06): 8 MiB on 2 CPUs, two
 * requests of 500 keys x 512 B per thread at 16 threads with 4 in flight each. On the Zen 4 VM it
 * gave 5-17 % more keys/s there than 8 MiB per CPU (medians of 4 alternated rounds, 1-4 server
 * threads) with p99 within 2 x the Little's-law latency wherever it had been (in the full run
 * after it, brpc with 2 server threads reached 2.02 times, 1.58 in the one before), and 24-30 %
 * more at 4 and 8 threads x 16 requests of 1024 keys (about the same at 2). 2 MiB per CPU (one
 * request per thread) was faster still at 16 threads but put their p99 at 2.0-2.7 times that
 * latency.
 *
 * gRPC: RS_PS_BUDGET_GRPC_PER_CPU, 8 MiB per CPU. With 4 its keys/s stayed the same and its p99
 * rose (1.9-4.7 against 1.4-3.3 times the Little's-law latency at 16 threads); with 2 it was 14 %
 * slower: its streams per connection already keep its threads fair.
 *
 * shm and rdma: none (8 MiB made shm 2-30 % slower at 16 threads).
 *
 * RecStore's default concurrency, 16 threads x 16 requests of 1024 keys x 512 B, keeps one request
 * per thread under either (docs/scale.md, "A budget of bytes in flight"). Thread-safe; a few
 * atomic operations per batch and per chunk.
 */
#ifndef RECSTORE_PS_BUDGET_H
#define RECSTORE_PS_BUDGET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_PS_BUDGET_BRPC_PER_CPU (4ull << 20)
#define RS_PS_BUDGET_GRPC_PER_CPU (8ull << 20)
#define RS_PS_BUDGET_NONE         UINT64_MAX

/* per_cpu x the CPUs in the process's affinity mask; RS_PS_BUDGET_NONE when per_cpu is 0. */
uint64_t rs_ps_budget_default(uint64_t per_cpu);

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
