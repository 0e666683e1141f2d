/*
 * clock.c — process CPU accounting through getrusage, and an EINTR-safe sleep.
 */
#define _GNU_SOURCE
#include "recstore/clock.h"

#include <errno.h>
#include <sys/resource.h>

static double tv_s(struct timeval tv) {
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void rs_process_cpu(rs_cpu_times *out) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    out->user_s = tv_s(ru.ru_utime);
    out->sys_s = tv_s(ru.ru_stime);
}

void rs_sleep_ns(uint64_t ns) {
    struct timespec req = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)}, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}
