/*
 * spin.c — the process's spin slots (recstore/spin.h): a counter of waiters spinning now, capped
 * at half the process's CPUs, and the most ever held at once (for tests and profiles); and the
 * count of its waiters (spinning or blocked).
 */
#include "recstore/spin.h"

#include "recstore/cpu.h"

static uint32_t spin_used, spin_peak, waiters;

static uint32_t spin_cap(void) {
    unsigned n = rs_cpu_count() / 2;
    return n ? n : 1;
}

int rs_spin_slot_take(void) {
    const uint32_t cap = spin_cap();
    uint32_t n = __atomic_load_n(&spin_used, __ATOMIC_RELAXED);
    do {
        if (n >= cap) return 0;
    } while (
        !__atomic_compare_exchange_n(&spin_used, &n, n + 1, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    uint32_t peak = __atomic_load_n(&spin_peak, __ATOMIC_RELAXED);
    while (n + 1 > peak && !__atomic_compare_exchange_n(&spin_peak, &peak, n + 1, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return 1;
}

void rs_spin_slot_give(int *held) {
    if (*held) __atomic_sub_fetch(&spin_used, 1, __ATOMIC_RELEASE);
    *held = 0;
}

uint32_t rs_spin_waiters_enter(void) {
    return __atomic_add_fetch(&waiters, 1, __ATOMIC_RELAXED);
}

void rs_spin_waiters_leave(void) {
    __atomic_sub_fetch(&waiters, 1, __ATOMIC_RELAXED);
}

uint32_t rs_spin_waiters(void) {
    return __atomic_load_n(&waiters, __ATOMIC_RELAXED);
}

void rs_spin_slots(uint32_t *cap, uint32_t *peak) {
    *cap = spin_cap();
    *peak = __atomic_load_n(&spin_peak, __ATOMIC_RELAXED);
}
