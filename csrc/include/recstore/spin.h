/*
 * spin.h — how a waiter decides to spin before it blocks, shared by the transports whose threads
 * wait for answers (shm and verbs RC clients and pollers, the brpc client).
 *
 * Spin slots: at most half the process's CPUs (rs_cpu_count, at least 1) of its waiters spin at
 * once; a waiter that finds every slot taken blocks at once, and its answer wakes it. Without the
 * cap, with more waiting threads than cores, the spinners take the CPU from the threads (and the
 * server) they wait for (docs/scale.md, "Spin slots").
 *
 * Adaptive spinning: a waiter counts its waits (or idle stretches) in a row that ended blocked.
 * After RS_SPIN_QUICK_AFTER of them the next spins 1/2^RS_SPIN_QUICK_SHIFT of its budget (and
 * yields none); one answered while spinning halves the count, and every 8th short one spins in
 * full anyway (a probe: without it a waiter whose answers now come between the short and the
 * full budget would never find out). So at one thread per core with quick answers nothing
 * changes, and when every wait lasts milliseconds the spins stop costing the cores. A waiter that
 * can tell how long a wait lasted (the brpc client) needs no probes: a full spin that failed puts
 * the count at its top, a wait that blocked but was over within the full budget lowers it by one,
 * and while the count is high it blocks at once, without a short spin (rs_spin_streak_failed,
 * rs_spin_streak_short, rs_spin_streak_high).
 */
#ifndef RECSTORE_SPIN_H
#define RECSTORE_SPIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_SPIN_QUICK_AFTER      4u
#define RS_SPIN_QUICK_SHIFT      4u
#define RS_SPIN_QUICK_PROBE_MASK 7u /* every 8th short spin is a full one */

typedef struct rs_spin_streak {
    uint32_t blocked; /* waits in a row that ended blocked (halved by one answered spinning) */
    uint32_t quick;   /* waits begun with that count high */
} rs_spin_streak;

/* 1 when this wait should spin short (counts it; every 8th such wait returns 0: the probe). */
static inline int rs_spin_streak_quick(rs_spin_streak *s) {
    return s->blocked >= RS_SPIN_QUICK_AFTER && (++s->quick & RS_SPIN_QUICK_PROBE_MASK);
}
/* 1 once the last waits ended blocked (no probe: for a waiter that judges its waits by their
 * length, or a caller's own decision). */
static inline int rs_spin_streak_high(const rs_spin_streak *s) {
    return s->blocked >= RS_SPIN_QUICK_AFTER;
}
/* The wait ended blocked. */
static inline void rs_spin_streak_blocked(rs_spin_streak *s) {
    s->blocked += s->blocked < 2 * RS_SPIN_QUICK_AFTER;
}
/* The wait was answered while spinning. */
static inline void rs_spin_streak_spun(rs_spin_streak *s) {
    s->blocked /= 2;
}
/* A full spin did not pay (a waiter that judges its waits by their length): the count's top. */
static inline void rs_spin_streak_failed(rs_spin_streak *s) {
    s->blocked = 2 * RS_SPIN_QUICK_AFTER;
}
/* A wait blocked but was over within the full budget (a spin might have caught it). */
static inline void rs_spin_streak_short(rs_spin_streak *s) {
    s->blocked -= s->blocked > 0;
}

/* Waiters: a waiter enters when its wait begins and leaves when it ends; enter() returns how
 * many of the process's waiters wait now, itself included. A waiter that finds more of them than
 * the process has CPUs does not spin (the brpc client): with the threads oversubscribed, a spin
 * takes a CPU from a thread that has work, and that work includes the answers being waited for. */
uint32_t rs_spin_waiters_enter(void);
void rs_spin_waiters_leave(void);
/* How many of the process's waiters wait now (for tests and profiles). */
uint32_t rs_spin_waiters(void);

/* Spin slots: take() returns 1 and holds a slot when one is free, else 0 (block at once);
 * give() returns a held slot (before the waiter blocks, and when its wait ends) and clears *held.
 * rs_spin_slots() says the cap and the most slots ever held at once. */
int rs_spin_slot_take(void);
void rs_spin_slot_give(int *held);
void rs_spin_slots(uint32_t *cap, uint32_t *peak);

#ifdef __cplusplus
}
#endif
#endif
