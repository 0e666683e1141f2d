/*
 * rc_shm_guard.c — the shm fabric survives a peer that shrinks a shared region.
 *
 * Any process that holds a descriptor of a POSIX shm object can ftruncate() it; every other
 * process that maps the object then gets SIGBUS on its next access beyond the new end. A peer can
 * do that to its own region (which we write responses into) or to ours (it opened our object to
 * map it). Shared regions are therefore registered here, and a SIGBUS handler that finds the
 * faulting address inside a registered mapping replaces the rest of that mapping, from the
 * faulting page on, with private zero pages (mmap MAP_FIXED) and marks it broken; the faulting
 * access then completes on the new pages. Readers of the region see zeros (no requests), writers
 * are told by the fabric that the peer region is gone (RS_ECONN), and the process lives on.
 * A SIGBUS anywhere else goes to the handler that was installed before ours, or kills the process
 * as it would have.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/rc/rc_shm_guard.h"

#define GUARD_SLOTS 4096

typedef struct guard_slot {
    uintptr_t base; /* atomic; 0 = free */
    size_t len;     /* atomic */
    int broken;     /* atomic */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static struct sigaction prev_bus;
static int installed;
static uintptr_t page_mask = ~(uintptr_t)4095;

static void chain(int sig, siginfo_t *si, void *uctx) {
    if ((prev_bus.sa_flags & SA_SIGINFO) && prev_bus.sa_sigaction) {
        prev_bus.sa_sigaction(sig, si, uctx);
        return;
    }
    if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN && prev_bus.sa_handler) {
        prev_bus.sa_handler(sig);
        return;
    }
    /* default action: die of SIGBUS, as without us (the access faults again after return) */
    signal(SIGBUS, SIG_DFL);
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx) {
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t base = __atomic_load_n(&slots[i].base, __ATOMIC_ACQUIRE);
        size_t len = __atomic_load_n(&slots[i].len, __ATOMIC_ACQUIRE);
        /* base and len of one registration (add stores len, then base; remove clears base) */
        if (!base || __atomic_load_n(&slots[i].base, __ATOMIC_ACQUIRE) != base) continue;
        if (a < base || a - base >= len) continue;
        uintptr_t from = a & page_mask;
        if (from < base) from = base;
        void *p = mmap((void *)from, base + len - from, PROT_READ | PROT_WRITE,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) break; /* cannot repair: behave as if we were not here */
        __atomic_store_n(&slots[i].broken, 1, __ATOMIC_RELEASE);
        return;
    }
    chain(sig, si, uctx);
}

static void install(void) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg > 0) page_mask = ~(uintptr_t)(pg - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(SIGBUS, &sa, &prev_bus) == 0;
}

int rs_rc_shm_guard_add(void *base, size_t len) {
    pthread_once(&install_once, install);
    if (!installed) return -1;
    pthread_mutex_lock(&slots_lock);
    int idx = -1;
    for (int i = 0; i < GUARD_SLOTS && idx < 0; i++)
        if (!__atomic_load_n(&slots[i].base, __ATOMIC_RELAXED)) idx = i;
    if (idx >= 0) {
        __atomic_store_n(&slots[idx].broken, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[idx].len, len, __ATOMIC_RELAXED);
        __atomic_store_n(&slots[idx].base, (uintptr_t)base, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&slots_lock);
    return idx;
}

void rs_rc_shm_guard_remove(int idx) {
    if (idx < 0 || idx >= GUARD_SLOTS) return;
    __atomic_store_n(&slots[idx].base, 0, __ATOMIC_RELEASE);
}

int rs_rc_shm_guard_broken(int idx) {
    if (idx < 0 || idx >= GUARD_SLOTS) return 0;
    return __atomic_load_n(&slots[idx].broken, __ATOMIC_ACQUIRE);
}
