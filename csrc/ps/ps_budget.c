/*
 * ps_budget.c — the process's budget of PS bytes in flight (see recstore/ps_budget.h).
 *
 * State: one process-wide atomic counter, the active clients, and the process's CPU count, read
 * once. The bytes each client has out are its own (ps_client.c), so nothing shared is touched
 * per chunk. A share is read without a lock: a client that enters or leaves changes what the
 * others may send next, not what they have sent, so the process can pass the budget for as long
 * as the clients that were active before finish their requests.
 */
#include "recstore/ps_budget.h"
#include "recstore/cpu.h"

static uint32_t active;

uint64_t rs_ps_budget_default(uint64_t per_cpu) {
    if (!per_cpu) return RS_PS_BUDGET_NONE;
    return per_cpu * rs_cpu_count();
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
