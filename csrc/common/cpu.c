/*
 * cpu.c — how many CPUs the process may run on (cpu.h), for the choices that depend on whether
 * its threads outnumber them: the PS client's default budget, gRPC's streams, RC waiters' spinning.
 */
#define _GNU_SOURCE
#include "recstore/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

static unsigned cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;

static void count_cpus(void) {
    cpu_set_t set;
    long n = sched_getaffinity(getpid(), sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                : sysconf(_SC_NPROCESSORS_ONLN);
    cpus = n < 1 ? 1u : (unsigned)n;
}

unsigned rs_cpu_count(void) {
    pthread_once(&cpus_once, count_cpus);
    return cpus;
}
