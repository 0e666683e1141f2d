/*
 * rc_server_profile.c — the RC server's profile thread: every --rdma_rc_profile_interval_ms it sums
 * the per-poller and per-worker counters (read racily with relaxed loads; each is written by its
 * own thread only), subtracts the previous interval and prints RecStore's
 * component=rdma_rc_server_profile, rdma_rc_server_poller_profile and rdma_rc_transport_profile
 * role=server lines.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "recstore/clock.h"
#include "transport/rc/rc_server_internal.h"

/* ---- profile thread ---------------------------------------------------------------------------
 */

#define AVG(sum, cnt) ((cnt) ? (double)(sum) / (double)(cnt) : 0.0)

void rs_rc_server_prof_sum(rs_rc_server *s, rc_prof *tot) {
    memset(tot, 0, sizeof *tot);
    uint32_t nw = s->o.get_workers;
    for (uint32_t i = 0; i < s->nthreads + nw; i++) {
        const rc_prof *p =
            i < s->nthreads ? &s->pollers[i].prof : &s->workers[i - s->nthreads].prof;
        const uint64_t *src = (const uint64_t *)p;
        uint64_t *dst = (uint64_t *)tot;
        for (size_t k = 0; k < sizeof *p / 8; k++) {
            uint64_t v = __atomic_load_n(&src[k], __ATOMIC_RELAXED);
            if (&dst[k] == &tot->max_ready_per_round)
                dst[k] = v > dst[k] ? v : dst[k];
            else
                dst[k] += v;
        }
    }
}

static void prof_delta(rc_prof *d, const rc_prof *now, const rc_prof *prev) {
    const uint64_t *a = (const uint64_t *)now, *b = (const uint64_t *)prev;
    uint64_t *o = (uint64_t *)d;
    for (size_t k = 0; k < sizeof *d / 8; k++)
        o[k] = a[k] - b[k];
    d->max_ready_per_round = now->max_ready_per_round;
}

void *rs_rc_server_profile_main(void *arg) {
    rs_rc_server *s = arg;
    uint32_t nt = s->nthreads;
    rc_prof prev, now, d;
    rc_prof *pprev = calloc(nt, sizeof *pprev);
    if (!pprev) return NULL;
    /* the counters start at zero with the server, so the first interval covers everything since
     * start (summing here instead would drop work done before this thread got to run) */
    memset(&prev, 0, sizeof prev);
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&s->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)s->o.profile_interval_ms * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        if (atomic_load(&s->stop)) break;
        pthread_mutex_unlock(&s->lock);
        rs_rc_server_prof_sum(s, &now);
        prof_delta(&d, &now, &prev);
        prev = now;
        uint64_t min_get = UINT64_MAX, max_get = 0, active = 0, total_get = 0;
        unsigned min_t = 0, max_t = 0;
        for (uint32_t t = 0; t < nt; t++) {
            rc_prof pd;
            rc_prof cur;
            prof_load(&cur, &s->pollers[t].prof);
            prof_delta(&pd, &cur, &pprev[t]);
            pprev[t] = cur;
            if (pd.ready_slots) active++;
            total_get += pd.found_get;
            if (pd.found_get < min_get) {
                min_get = pd.found_get;
                min_t = t;
            }
            if (pd.found_get >= max_get) {
                max_get = pd.found_get;
                max_t = t;
            }
            printf(
                "component=rdma_rc_server_poller_profile shard=%u thread_id=%u scan_rounds=%" PRIu64
                " scanned_slots=%" PRIu64 " ready_slots=%" PRIu64
                " scan_hit_pct=%.3f not_ready_slots=%" PRIu64 " duplicate_seq_ready=%" PRIu64
                " inflight_seq_ready=%" PRIu64 " handled_get=%" PRIu64 " poll_loop_avg_ns=%.1f\n",
                s->h.shard_id, t, pd.scan_rounds, pd.scanned_slots, pd.ready_slots,
                100.0 * AVG(pd.ready_slots, pd.scanned_slots), pd.not_ready_slots,
                pd.duplicate_seq_ready, pd.inflight_seq_ready, pd.found_get,
                AVG(pd.poll_loop_ns, pd.scan_rounds));
        }
        uint64_t ready_rounds = d.scan_rounds - d.empty_scan_rounds;
        printf("component=rdma_rc_server_profile shard=%u threads=%u transport=%s "
               "get_response_mode=%s "
               "fake_get_mode=%s"
               " scan_rounds=%" PRIu64 " scanned_slots=%" PRIu64 " ready_slots=%" PRIu64
               " not_ready_slots=%" PRIu64 " zero_seq_ready=%" PRIu64
               " duplicate_seq_ready=%" PRIu64 " inflight_seq_ready=%" PRIu64
               " empty_scan_rounds=%" PRIu64
               " scan_hit_pct=%.3f ready_round_pct=%.3f avg_ready_per_round=%.3f"
               " max_ready_per_round=%" PRIu64 " handled_get=%" PRIu64 " handled_put=%" PRIu64
               " handled_update=%" PRIu64 " handled_command=%" PRIu64 " invalid_descriptor=%" PRIu64
               " wrong_shard=%" PRIu64 " handle_get_avg_ns=%.1f get_batch_get_avg_ns=%.1f"
               " get_index_lookup_avg_ns=%.1f get_rows=%" PRIu64 " get_value_bytes=%" PRIu64
               " get_missing_rows=%" PRIu64 " get_direct_sg=%" PRIu64
               " get_direct_sg_fallback=%" PRIu64
               " get_direct_sg_avg_ns=%.1f get_direct_sg_wr=%" PRIu64 " handle_put_avg_ns=%.1f"
               " handle_update_avg_ns=%.1f handle_command_avg_ns=%.1f complete_response_avg_ns=%.1f"
               " poll_loop_avg_ns=%.1f poller_active=%" PRIu64 " poller_total_get=%" PRIu64
               " poller_min_get=%" PRIu64 " poller_min_get_thread=%u poller_max_get=%" PRIu64
               " poller_max_get_thread=%u\n",
               s->h.shard_id, nt, s->fab->name, rs_rc_get_mode_name(s->o.get_mode),
               rs_rc_fake_get_name(s->o.fake_get), d.scan_rounds, d.scanned_slots, d.ready_slots,
               d.not_ready_slots, d.zero_seq_ready, d.duplicate_seq_ready, d.inflight_seq_ready,
               d.empty_scan_rounds, 100.0 * AVG(d.ready_slots, d.scanned_slots),
               100.0 * AVG(ready_rounds, d.scan_rounds), AVG(d.ready_slots, d.scan_rounds),
               d.max_ready_per_round, d.handled_get, d.handled_put, d.handled_update,
               d.handled_command, d.invalid_descriptor, d.wrong_shard,
               AVG(d.handle_get_ns, d.handled_get),
               AVG(d.get_batch_get_ns, d.handled_get - d.get_direct_sg),
               AVG(d.get_index_lookup_ns, d.get_direct_sg + d.get_direct_sg_fallback), d.get_rows,
               d.get_value_bytes, d.get_missing_rows, d.get_direct_sg, d.get_direct_sg_fallback,
               AVG(d.get_direct_sg_ns, d.get_direct_sg), d.get_direct_sg_wr,
               AVG(d.handle_put_ns, d.handled_put), AVG(d.handle_update_ns, d.handled_update),
               AVG(d.handle_command_ns, d.handled_command), AVG(d.complete_ns, d.complete_count),
               AVG(d.poll_loop_ns, d.scan_rounds), active, total_get,
               min_get == UINT64_MAX ? 0 : min_get, min_t, max_get, max_t);
        printf("component=rdma_rc_transport_profile role=server transport=%s shard=%u "
               "complete_count=%" PRIu64 " response_payload_writes=%" PRIu64
               " response_payload_sg_writes=%" PRIu64 " response_payload_sg_wrs=%" PRIu64
               " response_status_writes=%" PRIu64 " response_payload_bytes=%" PRIu64
               " complete_avg_ns=%.1f client_wakes=%" PRIu64 " client_wake_checks_deferred=%" PRIu64
               "\n",
               s->fab->name, s->h.shard_id, d.complete_count, d.response_payload_writes,
               d.response_payload_sg_writes, d.response_payload_sg_wrs, d.response_status_writes,
               d.response_payload_bytes, AVG(d.complete_ns, d.complete_count), d.client_wakes,
               d.client_wake_checks_deferred);
        fflush(stdout);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    free(pprev);
    return NULL;
}
