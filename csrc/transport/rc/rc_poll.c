/*
 * rc_poll.c — how RC pollers and waiters spend idle time, and where their threads run.
 *
 * Adaptive backoff (the default): after an idle round the caller spins (cpu pause) for
 * RS_RC_SPIN_ROUNDS rounds, then yields for RS_RC_YIELD_ROUNDS rounds, then sleeps with naps
 * that double from 2 us up to 1 ms. Work found resets it. So a loaded poller never sleeps, an idle
 * one costs about a thousand short wake-ups per second (well under 0.02 CPU-s/s), and new work is
 * seen within one nap (<= 1 ms, microseconds while the backoff is still spinning or yielding).
 * A client waiting for a request it has in flight caps its naps lower (RS_RC_CLIENT_NAP_NS in
 * rc_client.c): the answer is coming, and a 1 ms nap there would be pure latency.
 * Busy mode only pauses.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/cpu.h"
#include "recstore/rc.h"
#ifdef RS_HAVE_NUMA
#include <numa.h>
#endif

#define RS_RC_SPIN_ROUNDS  2000u
#define RS_RC_YIELD_ROUNDS 256u
#define RS_RC_NAP_MIN_NS   2000ull
#define RS_RC_NAP_MAX_NS   1000000ull

void rs_rc_backoff_init(rs_rc_backoff *b, rs_rc_poll_mode mode) {
    b->mode = mode;
    b->idle_rounds = 0;
    b->sleep_ns = 0;
    b->max_nap_ns = RS_RC_NAP_MAX_NS;
    b->sleeps = 0;
}

void rs_rc_backoff_idle(rs_rc_backoff *b) {
    uint32_t r = b->idle_rounds < UINT32_MAX ? ++b->idle_rounds : b->idle_rounds;
    if (b->mode == RS_RC_POLL_BUSY) {
        rs_cpu_relax();
        return;
    }
    if (r <= RS_RC_SPIN_ROUNDS) {
        rs_cpu_relax();
    } else if (r <= RS_RC_SPIN_ROUNDS + RS_RC_YIELD_ROUNDS) {
        sched_yield();
    } else {
        b->sleep_ns = b->sleep_ns ? b->sleep_ns * 2 : RS_RC_NAP_MIN_NS;
        if (b->sleep_ns > b->max_nap_ns) b->sleep_ns = b->max_nap_ns;
        b->sleeps++;
        rs_sleep_ns(b->sleep_ns);
    }
}

int rs_rc_bind_thread(int offset, int stride, unsigned index, int numa_node) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu <= 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (offset >= 0) {
        int core = (int)((offset + (long)index * (stride > 0 ? stride : 1)) % ncpu);
        CPU_SET(core, &set);
        return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? core : -1;
    }
#ifdef RS_HAVE_NUMA
    if (numa_node >= 0 && numa_available() >= 0 && numa_node <= numa_max_node()) {
        struct bitmask *cpus = numa_allocate_cpumask();
        if (cpus && numa_node_to_cpus(numa_node, cpus) == 0) {
            for (unsigned i = 0; i < cpus->size && i < CPU_SETSIZE; i++)
                if (numa_bitmask_isbitset(cpus, i)) CPU_SET(i, &set);
            numa_free_cpumask(cpus);
            return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? -1 : -1;
        }
        if (cpus) numa_free_cpumask(cpus);
    }
#else
    (void)numa_node;
#endif
    return -1;
}
