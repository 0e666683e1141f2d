/*
 * rc_server_internal.h — the RC server's private types, shared by rc_server.c (control thread,
 * lanes, pollers, GET workers, lifecycle) and rc_server_profile.c (the profile thread). Nothing
 * outside csrc/transport/rc/ includes it; the invariants of each field are stated in rc_server.c's
 * header comment and beside the fields.
 */
#ifndef RS_RC_SERVER_INTERNAL_H
#define RS_RC_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "recstore/rc.h"

#define CTRL_MSG_TIMEOUT_MS 2000u
#define TASK_RING           4096u

/* ---- per-thread profile counters ------------------------------------------------------------ */

typedef struct rc_prof {
    uint64_t scan_rounds, scanned_slots, ready_slots, not_ready_slots, zero_seq_ready,
        duplicate_seq_ready, inflight_seq_ready, empty_scan_rounds, max_ready_per_round;
    uint64_t handled_get, handled_put, handled_update, handled_command, invalid_descriptor,
        wrong_shard;
    uint64_t handle_get_ns, get_batch_get_ns, get_index_lookup_ns, get_row_copy_ns, get_rows,
        get_value_bytes, get_missing_rows;
    uint64_t get_direct_sg, get_direct_sg_fallback, get_direct_sg_ns, get_direct_sg_wr;
    uint64_t handle_put_ns, handle_update_ns, handle_command_ns, complete_ns, complete_count,
        poll_loop_ns;
    uint64_t found_get; /* GET requests a poller found (served itself or handed to a worker) */
    uint64_t response_payload_writes, response_payload_sg_writes, response_payload_sg_wrs,
        response_status_writes, response_payload_bytes, bytes_in;
    uint64_t client_wakes; /* responses after which a sleeping client was woken (shm) */
    /* answers whose waiter was checked after the passes over a group of clients' lanes */
    uint64_t client_wake_checks_deferred;
} __attribute__((aligned(64))) rc_prof;

/* Wakes a poller makes after its passes over a group of clients' lanes rather than after each
 * answer (shm): a client thread asleep on its oldest answer is woken once, with its other answers
 * of the pass already there, and the group's wakes come back to back (rc_server.c, "Wakes after
 * the client's lanes" and "Wakes after a group of clients' lanes"). RC_WAKES_MAX holds a group's
 * answers (four clients with 64 slots each); an answer past it is checked at once. */
#define RC_WAKES_MAX               256u
#define RC_DEFER_WAKES_MIN_CLIENTS 3u
#define RC_WAKE_GROUP_MAX          4u /* clients per group at most */
typedef struct rc_wake {
    uint32_t *waiter;
    uint64_t *seq;
} rc_wake;
typedef struct rc_wakes {
    uint32_t n;
    rc_wake w[RC_WAKES_MAX];
} rc_wakes;

/* Per-thread counters: written by their one thread, read by the profile thread. Relaxed atomic
 * load+store (plain instructions on x86) so readers see whole values without a locked add. */
#define BUMP(field, n)                                                                             \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (uint64_t)(n),        \
                     __ATOMIC_RELAXED)

static inline void prof_load(rc_prof *dst, const rc_prof *src) {
    const uint64_t *a = (const uint64_t *)src;
    uint64_t *o = (uint64_t *)dst;
    for (size_t k = 0; k < sizeof *dst / 8; k++)
        o[k] = __atomic_load_n(&a[k], __ATOMIC_RELAXED);
}

/* ---- lanes and clients ----------------------------------------------------------------------- */

typedef struct srv_client srv_client;

typedef struct srv_lane {
    srv_client *cl;
    uint32_t client_id, qp, slots, req_bytes, resp_bytes;
    unsigned poller;
    int rings; /* the client rings every request (RS_RC_CAP_RING): receives posted on ep */
    rs_rc_region region; /* slots x request slot, then slots x response staging */
    rs_rc_ep *ep;
    rs_rc_ep_meta
        peer;       /* the client's region for this QP: slots x (response slot, request staging) */
    uint64_t *seen; /* per slot: last seq observed (poller-private) */
    uint64_t *high; /* per slot: highest seq handled (poller-private) */
    _Atomic uint32_t *busy; /* per slot: a GET worker holds it */
    _Atomic uint32_t inflight;
    pthread_spinlock_t wlock; /* serialises fabric writes/polls of this lane's endpoint */
} srv_lane;

struct srv_client {
    int fd;
    uint32_t id, qps;
    int attached;
    srv_lane *lanes;
    srv_client *next;
    /* the control frame being received, a piece per readable event (rc_server_ctrl.c) */
    uint8_t hdr[RS_RC_CTRL_HDR];
    uint32_t hdr_got;
    uint16_t type;
    uint8_t *body;
    uint32_t body_len, body_got;
};

typedef struct poller {
    rs_rc_server *s;
    unsigned idx;
    pthread_t th;
    int started;
    srv_lane **lanes; /* private snapshot of s->plist[idx] */
    uint32_t nlanes, cap;
    uint64_t gen_seen;
    _Atomic uint64_t acked_gen;
    rc_prof prof;
    /* idle behaviour, exported in the server stats: where the backoff is, naps taken, idle
     * rounds spent spinning or yielding (a poller asleep for good adds naps, never those) */
    _Atomic int idle_state; /* RC_POLLER_WORKING .. RC_POLLER_BLOCKED */
    _Atomic uint64_t naps, awake_idle_rounds;
    /* shm: futex sleeps on the lanes' doorbells entered, and those a client's doorbell ended */
    _Atomic uint64_t blocks, doorbell_wakes;
    _Atomic uint64_t quick_idles; /* idle stretches begun with the short spin (rc.h) */
    uint32_t kick;    /* futex word (private, __atomic): bumped to wake a blocked poller */
    int waitv_absent; /* the kernel has no futex_waitv: nap instead */
    int waitv_full;   /* more clients than futex_waitv takes (until the lanes change): nap */
    /* verbs: the completion channel of its ringing lanes' receive CQs and an eventfd that kicks
     * wake (NULL / -1 without); it blocks there when all its lanes ring (rc.h) */
    rs_rc_evch *evch;
    int wake_fd;
    int evch_broken;     /* arming or waiting failed once (said so): nap from then on */
    uint32_t nringing;   /* lanes of the snapshot that ring */
    uint32_t nclients;   /* clients whose lanes the snapshot holds (a client's lanes adjacent) */
    uint32_t wake_group; /* clients' lanes passed over before the wake checks (rc_server.c) */
} poller;
enum {
    RC_POLLER_WORKING = 0,
    RC_POLLER_SPINNING = 1,
    RC_POLLER_NAPPING = 2,
    RC_POLLER_PARKED = 3,
    RC_POLLER_BLOCKED = 4
};

typedef struct task {
    srv_lane *lane;
    uint32_t slot;
    uint64_t seq;
} task;

typedef struct worker {
    rs_rc_server *s;
    unsigned idx;
    pthread_t th;
    int started;
    rc_prof prof;
} worker;

/* The value store as a direct_sg write source (rc_kv_mr.c). */
#define RC_KV_MR_CHUNKS 64
enum { RC_KV_MR_NONE = 0, RC_KV_MR_ODP = 1, RC_KV_MR_PINNED = 2 };
typedef struct rc_kv_mr {
    int mode;
    rs_rc_region odp;     /* RC_KV_MR_ODP: the implicit MR */
    pthread_mutex_t lock; /* registration of a new chunk */
    _Atomic uint32_t n;   /* RC_KV_MR_PINNED: chunks registered (published with release) */
    struct {
        uintptr_t lo, hi;
        rs_rc_region r;
    } chunk[RC_KV_MR_CHUNKS];
} rc_kv_mr;
int rs_rc_kv_mr_open(rs_rc_server *s);
/* 0 and *lkey when [p, p+len) is registered (registering newly grown store memory if needed);
 * 1 when direct_sg cannot source it. */
int rs_rc_kv_mr_lkey(rs_rc_server *s, const void *p, uint32_t len, uint32_t *lkey);
void rs_rc_kv_mr_close(rs_rc_server *s);

struct rs_rc_server {
    const rs_rc_fabric_ops *fab;
    rs_rc_fabric *f;
    rs_rc_options o;
    rs_rc_handler h;
    rc_kv_mr kv_mr; /* the value store as a write source (direct_sg) */
    uint32_t nthreads;
    int listen_fd;
    int ctrl_spare; /* reserved descriptor for shedding connections when out of them (ctrl_main) */
    uint16_t port;
    int wake[2];
    pthread_t ctrl_th, prof_th;
    int ctrl_started, prof_started;
    poller *pollers;
    worker *workers;

    pthread_mutex_t lock; /* guards clients, plist, gen changes, task queue */
    pthread_cond_t cond;  /* lanes changed / stop (pollers without lanes wait here) */
    pthread_cond_t ack;   /* a poller acknowledged a generation / a worker finished a task */
    pthread_cond_t tasks_cv;
    _Atomic uint64_t gen;
    _Atomic int stop;
    uint32_t pollers_ready; /* poll threads that printed their readiness line (under lock) */
    srv_client *clients;
    uint32_t next_client_id;
    srv_lane ***plist; /* per poller: lanes */
    uint32_t *plen, *pcap;

    task ring[TASK_RING];
    uint32_t t_head, t_tail;

    _Atomic uint64_t clients_attached, clients_open, lanes_open, ctrl_rejected, auth_failures,
        lanes_ringing;
};

/* A ringing lane keeps 2 x slots + 8 receives posted: a client has at most `slots` requests in
 * flight on its QP, and a poller takes the completions of a lane whenever it finds a request there
 * (a completion that lands just after is taken at the next), so fewer than slots + 2 are ever
 * consumed and not yet re-posted. Lanes with more slots than this do not ring. */
#define RC_RING_MAX_SLOTS 64u
static inline uint32_t rc_ring_recvs(uint32_t slots) {
    return 2 * slots + 8;
}

/* Where slot `slot`'s response goes in the client's region, and its staging slot in ours. */
static inline uint64_t lane_resp_addr(const srv_lane *ln, uint32_t slot) {
    return ln->peer.region_addr + (uint64_t)slot * (ln->resp_bytes + ln->req_bytes);
}

static inline uint8_t *lane_staging(const srv_lane *ln, uint32_t slot) {
    return ln->region.addr + (size_t)ln->slots * ln->req_bytes + (size_t)slot * ln->resp_bytes;
}

/* Serve the request in slot `slot` of lane ln whose commit word carries seq (rc_server_serve.c):
 * exactly one answer (status word with seq) is written to the client's response slot. tslot is
 * the caller's thread slot for the shard handler; counters go to pf. A sleeping client is woken
 * at once, or, with wk, its waiter is put on wk (when there is room) for the caller to check and
 * wake with rs_rc_server_wake_deferred. */
void rs_rc_server_serve_slot(rs_rc_server *s, srv_lane *ln, uint32_t slot, uint64_t seq,
                             unsigned tslot, rc_prof *pf, rc_wakes *wk);
void rs_rc_server_wake_deferred(rc_wakes *wk, rc_prof *pf);

/* Wake every poller blocked on its doorbells (lanes changed, stop): rc_server.c. */
void rs_rc_server_kick_pollers(rs_rc_server *s);

/* The lane's doorbell: the first tail word of its request slot 0 (rc.h). A client's lanes on one
 * poller share the doorbell of the first of them, QP index qp % thread_num (lanes go to poller
 * (client_id + qp) % thread_num): a poller sleeps on one word per client, not per lane. */
static inline uint32_t *lane_doorbell(const srv_lane *ln) {
    return (uint32_t *)(uintptr_t)(ln->region.addr + RS_RC_SLEEP_WORD_OFFSET(ln->req_bytes));
}
static inline uint32_t lane_bell_qp(const srv_lane *ln, uint32_t nthreads) {
    return ln->qp % nthreads;
}

/* The control plane thread (rc_server_ctrl.c); arg is the rs_rc_server. */
void *rs_rc_server_ctrl_main(void *arg);

/* Sum every poller's and worker's counters into tot (max_ready_per_round: the maximum). */
void rs_rc_server_prof_sum(rs_rc_server *s, rc_prof *tot);

/* The profile thread (rc_server_profile.c): prints the RecStore profile lines every
 * o.profile_interval_ms until stop; arg is the rs_rc_server. */
void *rs_rc_server_profile_main(void *arg);

#endif
