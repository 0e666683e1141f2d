/*
 * generators.c — YCSB's stateful generators that zipf.h and rng.h do not already provide:
 *
 *  - the acknowledged insert counter (AcknowledgedCounterGenerator): next() is one atomic
 *    increment; ack() marks a slot of a 2^20-entry ring and whoever gets the lock advances `limit`
 *    over the contiguous acknowledged prefix, so readers of last() never see a keynum whose insert
 *    has not finished. In-flight inserts are bounded by the thread count, far below the ring size.
 *  - the skewed-latest generator: a zipfian rank over the current record count whose zeta is
 *    extended incrementally (sum of i^-theta for the new items only) as inserts arrive;
 *    value = last - rank, so the newest records are the most popular.
 *  - the hotspot generator over [lo, hi].
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "recstore/ycsb.h"
#include "recstore/zipf.h"

#define ACK_WINDOW (1u << 20)
#define ACK_MASK   (ACK_WINDOW - 1)

struct rs_ycsb_ack_counter {
    _Atomic uint64_t counter; /* next keynum to hand out */
    _Atomic uint64_t limit;   /* every keynum <= limit is acknowledged */
    pthread_mutex_t lock;
    _Atomic uint8_t window[ACK_WINDOW];
};

int rs_ycsb_ack_counter_new(uint64_t start, rs_ycsb_ack_counter **out) {
    rs_ycsb_ack_counter *c = calloc(1, sizeof *c);
    if (!c) return RS_ENOMEM;
    atomic_init(&c->counter, start);
    atomic_init(&c->limit, start - 1); /* start == 0 wraps to UINT64_MAX: "nothing yet" */
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return RS_OK;
}

void rs_ycsb_ack_counter_free(rs_ycsb_ack_counter *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

uint64_t rs_ycsb_ack_counter_next(rs_ycsb_ack_counter *c) {
    return atomic_fetch_add_explicit(&c->counter, 1, memory_order_relaxed);
}

void rs_ycsb_ack_counter_ack(rs_ycsb_ack_counter *c, uint64_t v) {
    atomic_store_explicit(&c->window[v & ACK_MASK], 1, memory_order_release);
    if (pthread_mutex_trylock(&c->lock) != 0)
        return; /* the holder will advance past us, or the next ack will */
    uint64_t lim = atomic_load_explicit(&c->limit, memory_order_relaxed);
    for (;;) {
        uint64_t idx = (lim + 1) & ACK_MASK;
        if (!atomic_load_explicit(&c->window[idx], memory_order_acquire)) break;
        atomic_store_explicit(&c->window[idx], 0, memory_order_relaxed);
        lim++;
    }
    atomic_store_explicit(&c->limit, lim, memory_order_release);
    pthread_mutex_unlock(&c->lock);
}

uint64_t rs_ycsb_ack_counter_last(const rs_ycsb_ack_counter *c) {
    return atomic_load_explicit(&((rs_ycsb_ack_counter *)c)->limit, memory_order_acquire);
}

void rs_ycsb_latest_init(rs_ycsb_latest *g, double theta) {
    g->theta = theta;
    g->zeta2 = 1.0 + pow(2.0, -theta);
    g->zetan = 0.0;
    g->count_for_zeta = 0;
}

/* zeta(n) grows one term per insert; a larger jump (the first call, or a count that went down)
 * is recomputed with rs_zeta, whose cost is bounded (exact head, Euler-Maclaurin tail): summing
 * term by term from 1 to a recordcount of 10^15 would never finish. */
#define LATEST_ZETA_MAX_STEP 65536u

uint64_t rs_ycsb_latest_next(rs_ycsb_latest *g, uint64_t last, rs_rng *r) {
    uint64_t items = last; /* ranks 0..last-1 map to keynums last..1 */
    if (items == 0) return 0;
    if (items != g->count_for_zeta) {
        if (items < g->count_for_zeta || items - g->count_for_zeta > LATEST_ZETA_MAX_STEP) {
            g->zetan = rs_zeta(items, g->theta);
        } else {
            for (uint64_t i = g->count_for_zeta + 1; i <= items; i++)
                g->zetan += pow((double)i, -g->theta);
        }
        g->count_for_zeta = items;
    }
    double theta = g->theta, zetan = g->zetan;
    double u = rs_rng_double(r), uz = u * zetan;
    uint64_t rank;
    if (uz < 1.0)
        rank = 0;
    else if (uz < 1.0 + pow(0.5, theta))
        rank = 1;
    else {
        double eta = (1.0 - pow(2.0 / (double)items, 1.0 - theta)) / (1.0 - g->zeta2 / zetan);
        rank = (uint64_t)((double)items * pow(eta * u - eta + 1.0, 1.0 / (1.0 - theta)));
    }
    if (rank >= items) rank = items - 1;
    return last - rank;
}

int rs_ycsb_hotspot_init(rs_ycsb_hotspot *g, uint64_t lo, uint64_t hi, double hot_data_fraction,
                         double hot_opn_fraction, rs_error *err) {
    if (hi < lo)
        return rs_error_set(err, RS_EINVAL, "hotspot range [%llu, %llu] is empty",
                            (unsigned long long)lo, (unsigned long long)hi);
    if (!(hot_data_fraction >= 0 && hot_data_fraction <= 1))
        return rs_error_set(err, RS_EINVAL, "hotspotdatafraction=%g must be in [0, 1]",
                            hot_data_fraction);
    if (!(hot_opn_fraction >= 0 && hot_opn_fraction <= 1))
        return rs_error_set(err, RS_EINVAL, "hotspotopnfraction=%g must be in [0, 1]",
                            hot_opn_fraction);
    uint64_t interval = hi - lo + 1;
    g->lo = lo;
    g->hot_interval = (uint64_t)((double)interval * hot_data_fraction);
    g->cold_interval = interval - g->hot_interval;
    g->hot_opn_fraction = hot_opn_fraction;
    return RS_OK;
}

uint64_t rs_ycsb_hotspot_next(const rs_ycsb_hotspot *g, rs_rng *r) {
    if (g->cold_interval == 0 || (g->hot_interval && rs_rng_double(r) < g->hot_opn_fraction))
        return g->lo + rs_rng_below(r, g->hot_interval);
    return g->lo + g->hot_interval + rs_rng_below(r, g->cold_interval);
}
