/*
 * futex.c — futex(2) and futex_waitv(2) wrappers (see futex.h). Relative timeouts for FUTEX_WAIT;
 * futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
 */
#define _GNU_SOURCE
#include "recstore/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recstore/error.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif

/* struct futex_waitv of linux/futex.h (>= 5.16), declared here so older headers build */
typedef struct rs_futex_waitv_entry {
    uint64_t val, uaddr;
    uint32_t flags, reserved;
} rs_futex_waitv_entry;

static int from_errno(int e) {
    switch (e) {
    case 0:
    case EINTR: return 0; /* a signal: the caller re-checks its condition */
    case EAGAIN: return RS_EBUSY;
    case ETIMEDOUT: return RS_ETIMEDOUT;
    case ENOSYS: return RS_ENOTSUP;
    case EINVAL: return RS_EINVAL;
    default: return RS_EIO;
    }
}

int rs_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns, int shared) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns != UINT64_MAX) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tsp = &ts;
    }
    int op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
    if (syscall(SYS_futex, word, op, expected, tsp, NULL, 0) == 0) return 0;
    return from_errno(errno);
}

int rs_futex_wake(uint32_t *word, int n, int shared) {
    long r = syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    return r > 0 ? (int)r : 0;
}

int rs_futex_waitv(uint32_t *const *words, const uint32_t *expected, const uint8_t *shared, int n,
                   uint64_t timeout_ns) {
    if (n < 1 || n > RS_FUTEX_WAITV_MAX) return RS_EINVAL;
    rs_futex_waitv_entry v[RS_FUTEX_WAITV_MAX];
    memset(v, 0, (size_t)n * sizeof v[0]);
    for (int i = 0; i < n; i++) {
        v[i].val = expected[i];
        v[i].uaddr = (uint64_t)(uintptr_t)words[i];
        v[i].flags = FUTEX_32 | (shared[i] ? 0 : FUTEX_PRIVATE_FLAG);
    }
    struct timespec ts, *tsp = NULL;
    if (timeout_ns != UINT64_MAX) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000ull;
        ts.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        tsp = &ts;
    }
    long r = syscall(SYS_futex_waitv, v, (unsigned)n, 0u, tsp, CLOCK_MONOTONIC);
    if (r >= 0) return (int)r;
    int e = errno;
    return e == EINTR ? RS_EBUSY : from_errno(e);
}
