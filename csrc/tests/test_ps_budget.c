/* test_ps_budget.c — the process's budget of PS bytes in flight (ps_budget.c): the default (the
 * transport's bytes per CPU of the process's affinity mask) and each active client's share. The
 * clients' use of it is in test_ps_client.c. */
#define _GNU_SOURCE
#include <sched.h>

#include "recstore/ps_budget.h"
#include "rs_test.h"

static void test_default_follows_the_cpus(void) {
    cpu_set_t set;
    RS_CHECK_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    RS_CHECK_EQ(rs_ps_budget_default(RS_PS_BUDGET_BRPC_PER_CPU),
                RS_PS_BUDGET_BRPC_PER_CPU * (uint64_t)CPU_COUNT(&set));
    RS_CHECK_EQ(rs_ps_budget_default(3), 3 * (uint64_t)CPU_COUNT(&set));
    RS_CHECK_EQ(rs_ps_budget_default(0), RS_PS_BUDGET_NONE); /* a transport without one */
}

static void test_share_divides_by_the_active_clients(void) {
    RS_CHECK_EQ(rs_ps_budget_active(), 0);
    RS_CHECK_EQ(rs_ps_budget_share(1200), 1200); /* nobody active yet: the whole budget */
    rs_ps_budget_enter();
    RS_CHECK_EQ(rs_ps_budget_share(1200), 1200);
    rs_ps_budget_enter();
    rs_ps_budget_enter();
    RS_CHECK_EQ(rs_ps_budget_share(1200), 400);
    RS_CHECK_EQ(rs_ps_budget_share(RS_PS_BUDGET_NONE), RS_PS_BUDGET_NONE);
    rs_ps_budget_leave();
    RS_CHECK_EQ(rs_ps_budget_share(1200), 600);
    rs_ps_budget_leave();
    rs_ps_budget_leave();
    RS_CHECK_EQ(rs_ps_budget_active(), 0);
}

RS_TEST_MAIN(RS_TEST(test_default_follows_the_cpus),
             RS_TEST(test_share_divides_by_the_active_clients))
