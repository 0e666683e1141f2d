/*
 * clock.h — wall and CPU clocks used by every benchmark loop.
 *
 * rs_now_ns() is CLOCK_MONOTONIC (cheap vDSO call, safe on hot paths). CPU time is reported next
 * to every throughput figure: a busy-polling loop shows up as CPU seconds ~= wall seconds.
 */
#ifndef RECSTORE_CLOCK_H
#define RECSTORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t rs_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* User and system CPU seconds of the whole process so far (getrusage RUSAGE_SELF). */
typedef struct rs_cpu_times {
    double user_s;
    double sys_s;
} rs_cpu_times;

void rs_process_cpu(rs_cpu_times *out);

/* out = b - a, field by field. */
static inline rs_cpu_times rs_cpu_delta(rs_cpu_times a, rs_cpu_times b) {
    rs_cpu_times d = {b.user_s - a.user_s, b.sys_s - a.sys_s};
    return d;
}

/* Sleep for ns nanoseconds (resumed after EINTR with the time left). */
void rs_sleep_ns(uint64_t ns);

#ifdef __cplusplus
}
#endif
#endif
