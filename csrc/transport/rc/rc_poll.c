/*
 * rc_poll.c — how RC pollers and waiters spend idle time, and where their threads run.
 *
 * Adaptive backoff (the default): after an idle round the caller spins (cpu pause) for
 * idle_spin_rounds rounds (2000), then yields for idle_yield_rounds rounds (256), both within
 * idle_spin_us (100 us) of the first idle round, then sleeps with
 * naps that double from 2 us up to 1 ms. Work found resets it. So a loaded poller never sleeps, an
 * idle one costs about a thousand short wake-ups per second (well under 0.02 CPU-s/s), and new work
 * is seen within one nap (<= 1 ms, microseconds while the backoff is still spinning or yielding).
 * A client waiting for a request it has in flight caps its naps lower (RS_RC_CLIENT_NAP_NS in
 * rc_client.c): the answer is coming, and a 1 ms nap there would be pure latency.
 * Busy mode only pauses.
 *
 * On a fabric whose peers can wake a futex (shm), the nap phase is replaced by a real sleep:
 * a client waiting for a response sleeps on the status seq word (rs_rc_wait_seq_block, woken by
 * the server's rs_rc_wake_waiter), a poller on its lanes' doorbells (rc_server.c, woken by the
 * client's rs_rc_doorbell_ring). Each pair publishes its own word, fences, then reads the other's
 * (Dekker): either the sleeper sees the work or the waker sees the sleeper, and the futex compares
 * the word in the kernel, so a wake that comes before the sleep makes the sleep return at once.
 * The awake fast path of a waker is one fence and one load. When threads outnumber cores this
 * hands the core to a thread with work instead of to a napping thread's timer.
 *
 * Spin slots (recstore/spin.h): the process's shm waiters spin by turns, at most half its CPUs
 * at once (at least one); a waiter that finds every slot taken sleeps at once, and its answer
 * wakes it. Without the cap, with more client threads than cores and quick answers, every waiter
 * kept spinning: the ones on a CPU were answered within their spin again and again, the others
 * waited for a time slice with their answers ready (p50 below a millisecond and p99 tens of ms at
 * once), and the spinners took CPU from the poller they waited for (docs/scale.md).
 *
 * On verbs the peer's NIC wakes nobody, so the sleep is on a completion channel instead: a client
 * asks for its answer with an immediate (RS_RC_FLAG_NOTIFY, rc_client.c), and a poller whose lanes
 * all ring gets one with every request (RS_RC_CAP_RING, rc_server.c).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "recstore/clock.h"
#include "recstore/cpu.h"
#include "recstore/futex.h"
#include "recstore/rc.h"
#ifdef RS_HAVE_NUMA
#include <numa.h>
#endif

#define RS_RC_NAP_MIN_NS 2000ull
#define RS_RC_NAP_MAX_NS 1000000ull

void rs_rc_backoff_init(rs_rc_backoff *b, const rs_rc_options *o) {
    b->mode = o->poll_mode;
    b->spin_rounds = o->idle_spin_rounds;
    b->yield_rounds = o->idle_yield_rounds;
    b->budget_ns = (uint64_t)o->idle_spin_us * 1000u;
    b->idle_t0 = 0;
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
    uint32_t awake = b->spin_rounds + b->yield_rounds;
    if (b->budget_ns && r <= awake) {
        /* the time budget ends spinning and yielding early: a round of a poller with many lanes
         * is long, and a yield on a busy CPU lasts another thread's time slice */
        if (r == 1)
            b->idle_t0 = rs_now_ns();
        else if ((r & 15) == 0 && rs_now_ns() - b->idle_t0 >= b->budget_ns)
            r = b->idle_rounds = awake;
    }
    if (r <= b->spin_rounds) {
        rs_cpu_relax();
    } else if (r <= b->spin_rounds + b->yield_rounds) {
        sched_yield();
    } else {
        b->sleep_ns = b->sleep_ns ? b->sleep_ns * 2 : RS_RC_NAP_MIN_NS;
        if (b->sleep_ns > b->max_nap_ns) b->sleep_ns = b->max_nap_ns;
        b->sleeps++;
        rs_sleep_ns(b->sleep_ns);
    }
}

void rs_rc_backoff_shorten(rs_rc_backoff *b, unsigned shift, uint32_t *extra_spins) {
    b->spin_rounds >>= shift;
    b->yield_rounds = 0;
    if (extra_spins) *extra_spins >>= shift;
}

int rs_rc_backoff_should_block(const rs_rc_backoff *b) {
    return b->mode == RS_RC_POLL_ADAPTIVE &&
           (uint64_t)b->idle_rounds >= (uint64_t)b->spin_rounds + b->yield_rounds;
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the futex on a seq word sleeps on its low half, the first 4 bytes on little-endian hosts"
#endif

int rs_rc_wait_seq_block(const uint64_t *seq, uint64_t want, uint32_t *waiter,
                         uint64_t timeout_ns) {
    __atomic_store_n(waiter, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t seen = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    int slept = 0;
    if (seen != want) {
        /* sleeps only while the low half still holds what we saw (a seq written meanwhile makes
         * the kernel return at once); woken by the server or by the timeout */
        int rc = rs_futex_wait((uint32_t *)(uintptr_t)seq, (uint32_t)seen, timeout_ns, 1);
        slept = rc == RS_ETIMEDOUT ? 2 : 1;
    }
    __atomic_store_n(waiter, 0, __ATOMIC_RELAXED);
    return slept;
}

int rs_rc_wake_waiter(uint32_t *waiter, uint64_t *seq) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!__atomic_load_n(waiter, __ATOMIC_RELAXED)) return 0;
    rs_futex_wake((uint32_t *)seq, 1, 1);
    return 1;
}

int rs_rc_doorbell_ring(uint32_t *bell) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!__atomic_load_n(bell, __ATOMIC_RELAXED)) return 0;
    if (!__atomic_exchange_n(bell, 0, __ATOMIC_RELAXED)) return 0; /* another client rang it */
    rs_futex_wake(bell, 1, 1);
    return 1;
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
            /* bound to the node's CPUs (or left as it was): no single core to report */
            (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
            return -1;
        }
        if (cpus) numa_free_cpumask(cpus);
    }
#else
    (void)numa_node;
#endif
    return -1;
}
