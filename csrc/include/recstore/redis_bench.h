/*
 * redis_bench.h — the Redis baseline of the PS transport benchmark: MSET-load keys 1..N with
 * value_size-byte values, then time MGETs of batch_keys random keys, speaking RESP over raw TCP
 * from C (no client library), so the comparison with ps_bench measures servers, not clients.
 *
 * One thread drives `connections` non-blocking connections with one MGET outstanding on each
 * (the counterpart of ps_bench's prefetch_depth). Reply values are copied into a rows buffer as
 * the PS client does. Keys are "key:<n>" (n decimal); values are the PS bench rows of the key.
 */
#ifndef RECSTORE_REDIS_BENCH_H
#define RECSTORE_REDIS_BENCH_H

#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_redis_bench_config {
    const char *host;
    uint16_t port;
    uint32_t connections;   /* MGETs in flight, one per connection */
    uint32_t batch_keys;    /* keys per MGET / MSET */
    uint64_t record_count;  /* keys 1..N */
    uint32_t value_size;    /* bytes per value (multiple of 4) */
    double running_seconds; /* timed MGET phase */
    int load;               /* 1: MSET keys 1..N first (untimed for the run figures) */
    int verify;             /* check every fetched value against the loaded row */
    uint64_t seed;
    const volatile int *stop;
} rs_redis_bench_config;

typedef struct rs_redis_bench_result {
    double load_s;
    double runtime_s;
    uint64_t mgets, key_ops, keys_found;
    double mean_us, p50_us, p95_us, p99_us, p999_us, max_us;
    double cpu_user_s, cpu_sys_s; /* this process over the timed phase */
    uint64_t verify_bad;
} rs_redis_bench_result;

/* RS_ECONN naming host:port when Redis is unreachable, RS_EPROTO on a reply that is not what
 * RESP promises (the offending bytes are quoted), RS_EVERIFY on a wrong value. */
int rs_redis_bench(const rs_redis_bench_config *cfg, rs_redis_bench_result *res, rs_error *err);

#ifdef __cplusplus
}
#endif
#endif
