/*
 * futex.h — the Linux futex calls recbench blocks on, in one place.
 *
 * A futex word is a 32-bit integer; wait() sleeps while it holds an expected value, wake() wakes
 * sleepers. `shared` picks the key: 0 = private (threads of this process; faster), 1 = shared
 * (the word lives in a MAP_SHARED mapping and the peer is another process mapping the same object,
 * as the RC shm fabric's regions are). waitv() sleeps on several words at once (Linux >= 5.16;
 * RS_ENOTSUP before), which lets one RC poller sleep on the doorbells of all its lanes.
 * Callers own the protocol (flag, fence, re-check) that makes a wake-up impossible to lose; see
 * eventual.c and rc_poll.c.
 */
#ifndef RECSTORE_FUTEX_H
#define RECSTORE_FUTEX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sleep while *word == expected, at most timeout_ns (UINT64_MAX = no limit). 0 when woken (or
 * spuriously), RS_EBUSY when *word != expected on entry, RS_ETIMEDOUT, RS_EIO otherwise. */
int rs_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns, int shared);

/* Wake up to n sleepers on word; returns how many were woken (>= 0). */
int rs_futex_wake(uint32_t *word, int n, int shared);

#define RS_FUTEX_WAITV_MAX 128
/* Sleep while every words[i] == expected[i] (n <= RS_FUTEX_WAITV_MAX); shared[i] as above.
 * Returns the index of a woken word (>= 0), RS_EBUSY when a word differed on entry,
 * RS_ETIMEDOUT, RS_ENOTSUP when the kernel lacks futex_waitv, RS_EINVAL/RS_EIO otherwise. */
int rs_futex_waitv(uint32_t *const *words, const uint32_t *expected, const uint8_t *shared, int n,
                   uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif
