/*
 * ps_budget.c — the process's budget of PS bytes in flight (see recstore/ps_budget.h).
 *
 * State: one process-wide atomic counter, the active clients, and the default budget, computed
 * once. The bytes each client has out are its own (ps_client.c), so nothing shared is touched
 * per chunk. A share is read without a lock: a client that enters or leaves changes what the
 * others may send next, not what they have sent, so the process can pass the budget for as long
 * as the clients that were active before finish their requests.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "recstore/ps_budget.h"

static uint32_t active;
static uint64_t default_bytes;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void compute_default(void) {
    cpu_set_t set;
    int cpus = 0;
    /* the process's mask (its main thread's), not a client thread's that may be bound to one */
    if (sched_getaffinity(getpid(), sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
    if (cpus < 1) cpus = 1;
    default_bytes = RS_PS_BUDGET_BYTES_PER_CPU * (uint64_t)cpus;
}

uint64_t rs_ps_budget_default(void) {
    pthread_once(&default_once, compute_default);
    return default_bytes;
}

void rs_ps_budget_enter(void) {
    __atomic_add_fetch(&active, 1, __ATOMIC_RELAXED);
}

void rs_ps_budget_leave(void) {
    __atomic_sub_fetch(&active, 1, __ATOMIC_RELAXED);
}

uint64_t rs_ps_budget_share(uint64_t budget) {
    if (budget == RS_PS_BUDGET_NONE) return budget;
    uint32_t n = __atomic_load_n(&active, __ATOMIC_RELAXED);
    return budget / (n ? n : 1);
}

uint32_t rs_ps_budget_active(void) {
    return __atomic_load_n(&active, __ATOMIC_RELAXED);
}
