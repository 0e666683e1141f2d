/*
 * eventual.h — a one-shot completion ("eventual"): one side sets a value once, the other waits.
 *
 * PS client threads wait on one per in-flight request; the reply path sets it. Two wait modes:
 *   RS_WAIT_BLOCK — futex sleep: zero CPU while waiting, a syscall on wake;
 *   RS_WAIT_SPIN  — busy poll of the state word: lowest wake latency, burns a core.
 * State word: 0 = unset, 1 = set, 2 = unset and a waiter sleeps on the futex (set must wake).
 * Memory order: the value is published with a release store of state and read after an acquire
 * load, so a waiter that sees "set" also sees the value and everything written before set().
 */
#ifndef RECSTORE_EVENTUAL_H
#define RECSTORE_EVENTUAL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_wait_mode { RS_WAIT_BLOCK = 0, RS_WAIT_SPIN = 1 } rs_wait_mode;

typedef struct rs_eventual {
    uint32_t state; /* accessed only through __atomic builtins */
    int64_t value;
} rs_eventual;

/* Parse "block"/"spin"; returns 0 or RS_EINVAL. */
int rs_wait_mode_parse(const char *s, rs_wait_mode *out);

void rs_eventual_init(rs_eventual *e);

/* Publish value and wake a sleeping waiter. Call at most once per init. */
void rs_eventual_set(rs_eventual *e, int64_t value);

/* Wait until set or timeout_ns passes (UINT64_MAX = forever). 0 and *value on success,
 * RS_ETIMEDOUT otherwise. */
int rs_eventual_wait(rs_eventual *e, rs_wait_mode mode, uint64_t timeout_ns, int64_t *value);

/* Non-blocking: 1 and *value if set, else 0. */
int rs_eventual_test(rs_eventual *e, int64_t *value);

#ifdef __cplusplus
}
#endif
#endif
