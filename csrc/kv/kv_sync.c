/*
 * kv_sync.c — the durability modes of a file-backed engine (rs_kv_sync_mode, recstore/kv.h):
 * parsing "none | interval:MS | always", forcing both files to disk (index, then values), and the
 * thread of interval mode, which does that every MS milliseconds until the engine closes. The
 * thread sleeps on a condition variable, so close wakes it at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "kv_internal.h"

struct rs_kv_syncer {
    rs_kv *kv;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    uint32_t interval_ms;
    int stop;
};

int rs_kv_sync_parse(const char *s, rs_kv_sync_mode *mode, uint32_t *interval_ms, rs_error *err) {
    *interval_ms = 0;
    if (s && strcasecmp(s, "none") == 0) {
        *mode = RS_KV_SYNC_NONE;
        return 0;
    }
    if (s && strcasecmp(s, "always") == 0) {
        *mode = RS_KV_SYNC_ALWAYS;
        return 0;
    }
    if (s && strncasecmp(s, "interval:", 9) == 0) {
        char *end;
        errno = 0;
        unsigned long ms = strtoul(s + 9, &end, 10);
        if (!errno && end != s + 9 && !*end && ms >= 1 && ms <= 3600000) {
            *mode = RS_KV_SYNC_INTERVAL;
            *interval_ms = (uint32_t)ms;
            return 0;
        }
    }
    return rs_error_set(err, RS_EINVAL,
                        "sync '%s': use none, interval:MS (1..3600000 milliseconds) or always",
                        s ? s : "(null)");
}

int rs_kv_sync_now(rs_kv *kv, rs_error *err) {
    int rc = kv->ops->sync ? kv->ops->sync(kv->ix, err) : 0;
    if (!rc) rc = rs_kv_vs_sync(&kv->vs, err);
    return rc;
}

static void *syncer_main(void *arg) {
    rs_kv_syncer *y = arg;
    pthread_mutex_lock(&y->lock);
    while (!y->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)y->interval_ms * 1000000ull;
        dl.tv_sec += (time_t)(ns / 1000000000ull);
        dl.tv_nsec = (long)(ns % 1000000000ull);
        while (!y->stop && pthread_cond_timedwait(&y->cv, &y->lock, &dl) != ETIMEDOUT) {
        }
        if (y->stop) break;
        pthread_mutex_unlock(&y->lock);
        rs_kv_sync_now(y->kv, NULL); /* an error repeats at close, where it is reported */
        pthread_mutex_lock(&y->lock);
    }
    pthread_mutex_unlock(&y->lock);
    return NULL;
}

int rs_kv_syncer_start(rs_kv *kv, uint32_t interval_ms, rs_error *err) {
    rs_kv_syncer *y = calloc(1, sizeof *y);
    if (!y) return rs_error_set(err, RS_ENOMEM, "sync thread");
    y->kv = kv;
    y->interval_ms = interval_ms;
    pthread_mutex_init(&y->lock, NULL);
    pthread_cond_init(&y->cv, NULL);
    int rc = pthread_create(&y->thread, NULL, syncer_main, y);
    if (rc) {
        pthread_cond_destroy(&y->cv);
        pthread_mutex_destroy(&y->lock);
        free(y);
        return rs_error_errno(err, RS_ENOMEM, rc, "sync thread");
    }
    kv->syncer = y;
    return 0;
}

void rs_kv_syncer_stop(rs_kv *kv) {
    rs_kv_syncer *y = kv->syncer;
    if (!y) return;
    pthread_mutex_lock(&y->lock);
    y->stop = 1;
    pthread_cond_signal(&y->cv);
    pthread_mutex_unlock(&y->lock);
    pthread_join(y->thread, NULL);
    pthread_cond_destroy(&y->cv);
    pthread_mutex_destroy(&y->lock);
    free(y);
    kv->syncer = NULL;
}
