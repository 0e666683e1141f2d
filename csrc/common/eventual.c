/*
 * eventual.c — futex-backed one-shot completion (state machine in eventual.h).
 */
#define _GNU_SOURCE
#include "recstore/eventual.h"

#include <string.h>

#include "recstore/cpu.h"

#include "recstore/clock.h"
#include "recstore/error.h"
#include "recstore/futex.h"

int rs_wait_mode_parse(const char *s, rs_wait_mode *out) {
    if (strcmp(s, "block") == 0) {
        *out = RS_WAIT_BLOCK;
        return RS_OK;
    }
    if (strcmp(s, "spin") == 0) {
        *out = RS_WAIT_SPIN;
        return RS_OK;
    }
    return RS_EINVAL;
}

void rs_eventual_init(rs_eventual *e) {
    e->value = 0;
    __atomic_store_n(&e->state, 0, __ATOMIC_RELEASE);
}

void rs_eventual_set(rs_eventual *e, int64_t value) {
    e->value = value;
    uint32_t old = __atomic_exchange_n(&e->state, 1, __ATOMIC_ACQ_REL);
    if (old == 2) rs_futex_wake(&e->state, 1, 0);
}

int rs_eventual_test(rs_eventual *e, int64_t *value) {
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == 1) {
        if (value) *value = e->value;
        return 1;
    }
    return 0;
}

int rs_eventual_wait(rs_eventual *e, rs_wait_mode mode, uint64_t timeout_ns, int64_t *value) {
    uint64_t deadline = timeout_ns == UINT64_MAX ? UINT64_MAX : rs_now_ns() + timeout_ns;
    if (mode == RS_WAIT_SPIN) {
        for (uint32_t spins = 0;; spins++) {
            if (rs_eventual_test(e, value)) return RS_OK;
            rs_cpu_relax();
            if ((spins & 1023) == 1023 && deadline != UINT64_MAX && rs_now_ns() >= deadline)
                return RS_ETIMEDOUT;
        }
    }
    for (;;) {
        uint32_t s = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (s == 1) break;
        if (s == 0 &&
            !__atomic_compare_exchange_n(&e->state, &s, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue; /* raced with set() or another state change: re-read */
        uint64_t left = UINT64_MAX;
        if (deadline != UINT64_MAX) {
            uint64_t now = rs_now_ns();
            if (now >= deadline) return RS_ETIMEDOUT;
            left = deadline - now;
        }
        int rc = rs_futex_wait(&e->state, 2, left, 0);
        if (rc == RS_EIO || rc == RS_EINVAL) return RS_EIO;
    }
    if (value) *value = e->value;
    return RS_OK;
}
