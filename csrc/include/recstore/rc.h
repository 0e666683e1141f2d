/*
 * rc.h — the RC slot protocol (transports "rdma" and "shm"): its wire structures, the fabric
 * interface it runs on, the TCP control plane, and the server and client engines.
 *
 * Layers, bottom up:
 *   fabric     register memory, connect an endpoint to a peer's region, one-sided write (signaled
 *              or not, inline hint, scatter-gather), poll completions. Two tables:
 *              rs_rc_fabric_shm (POSIX shared memory, same host) and rs_rc_fabric_verbs
 *              (libibverbs RC QPs; IB and RoCE).
 *   ctrl       TCP control plane: a client attaches (sends its lanes' metadata, gets the server's),
 *              the server keeps the TCP connection as the lifetime of the client's lanes.
 *   slot       request descriptor + commit word, response + status word (below).
 *   server     poll threads scan request slots, answer through the shard handler.
 *   client     one logical client to one shard: a pool of QPs x slots.
 *
 * Request slot (request_slot_bytes, in the server's lane region, written by the client):
 *   [0,192)            rs_rc_desc
 *   [192, 192+P)       payload: encoded PSRequest (attachment form, desc.msg_bytes bytes), then the
 *                      attachment (keys, then rows)
 *   [slot-64, slot)    tail; rs_rc_commit_word occupies its last 16 bytes (seq is the last 8)
 * Response slot (response_slot_bytes, in the client's region, written by the server):
 *   [0, R)             GET rows (R = response_bytes - msg_bytes)
 *   [R, R+msg_bytes)   encoded PSResponse header (attachment form: rows travel before it)
 *   [slot-64, slot)    tail; rs_rc_status_word occupies its last 24 bytes (seq is the last 8)
 *
 * Ordering invariant: a word's seq is its highest-addressed 8 bytes and is stored last, as a
 * release store (shm) or as the last bytes of the last write on the RC QP (verbs, where writes on
 * one QP are placed in order). A reader that sees the expected seq with an acquire load therefore
 * sees the whole word and everything written before it on that lane.
 *
 * Sleep words (shm only, rs_rc_fabric_ops.shared_futex; rc_poll.c): the first 4 bytes of a tail.
 *   response slot tail [slot-64, slot-60)  waiter: 1 while the client sleeps on the futex of the
 *                      status seq's low half; the server, after publishing the status, wakes it
 *   request slot 0's tail [slot-64, slot-60)  the lane's doorbell: 1 while the lane's poller
 *                      sleeps; a client that commits a request and finds it 1 clears it and wakes
 *                      the poller (futex on the doorbell)
 *                      [slot-60, slot-56)  bell lane: the QP index of the client's lane whose
 *                      doorbell stands for this one (its poller watches one doorbell per client;
 *                      written by the server before the attach reply, read by the client once)
 * Both sides publish, fence (seq_cst), then read the other's word, so one of them always sees the
 * other: a wake-up cannot be lost. Verbs peers never touch these words (a NIC cannot wake a futex).
 *
 * Completion events (verbs, rs_rc_fabric_ops.notify_events): a client whose recent waits ended in
 * naps sets RS_RC_FLAG_NOTIFY in a request's descriptor; the server then writes that response's
 * status word with an immediate (RDMA WRITE WITH IMM), which consumes one of the zero-length
 * receives the client keeps posted on the QP and puts a completion on the QP's receive CQ, so the
 * client can block on the CQ's completion channel instead of napping. The data is placed before
 * the completion, so the status seq is visible once the event is. A server that ignores the flag
 * (one built before it) costs the client a 1 ms slice per wait, after which it stops asking.
 * Doorbells on verbs (RS_RC_CAP_RING): a server lane that keeps zero-length receives posted on its
 * QP says so in its endpoint record's caps; a client that announced the same in its own record
 * then writes every request's commit word with an immediate (RDMA WRITE WITH IMM), which
 * completes one of those receives on the lane's receive CQ. A poller all of whose lanes ring can
 * therefore block on one completion channel (shared by its lanes' receive CQs) after arming every
 * lane's CQ, draining it and rescanning the slots once, instead of napping. Peers that do not
 * know the caps byte leave it 0 (the encoder zeroes the record), so old clients and old servers
 * keep napping pollers. A client rings in either poll mode (as it rings shm doorbells).
 *
 * Sequence numbers are per lane (one client QP), start at 1 and grow by one per request. The
 * server answers a slot when its commit seq is non-zero and differs from the last seq it saw in
 * that slot; a seq lower than the last one handled in the slot is a duplicate: counted, ignored.
 */
#ifndef RECSTORE_RC_H
#define RECSTORE_RC_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/auth.h"
#include "recstore/copy.h"
#include "recstore/error.h"
#include "recstore/kv.h"
#include "recstore/ps.h"
#include "recstore/spin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- wire constants and structures --------------------------------------------------------- */

#define RS_RC_MAGIC       0x52435053u /* "RCPS" */
#define RS_RC_VERSION     1
#define RS_RC_DESC_BYTES  192
#define RS_RC_TAIL_BYTES  64
#define RS_RC_STATE_READY 1u
#define RS_RC_STATE_DONE  2u
#define RS_RC_STATE_DONE_SG                                                                        \
    3u /* DONE; the GET rows were gathered from the value store (direct_sg) */
#define RS_RC_FLAG_GET_DIRECT_SG           (1u << 0)
#define RS_RC_FLAG_GET_ALLOW_FALLBACK_COPY (1u << 1)
#define RS_RC_FLAG_NOTIFY                  (1u << 2) /* verbs: answer with an immediate */
#define RS_RC_MAX_SGE                      32
#define RS_RC_RESP_HDR_ROOM                64 /* response room a GET keeps for its PSResponse header */

/* Request descriptor: RecStore's 192-byte layout. `op` holds rs_ps_op values (GET 1, PUT 2,
 * UPDATE 3, COMMAND 4); `msg_bytes` (RecStore's reserved0) is the length of the encoded PSRequest
 * at payload_offset; the attachment follows it. Status values are rs_ps_status. */
typedef struct rs_rc_desc {
    uint32_t magic;                /*   0 */
    uint16_t version;              /*   4 */
    uint16_t op;                   /*   6 */
    uint64_t seq;                  /*   8 */
    uint32_t shard_id;             /*  16 */
    uint32_t client_id;            /*  20 */
    uint32_t qp_index;             /*  24 */
    uint32_t key_count;            /*  28 */
    uint32_t value_size;           /*  32 */
    uint32_t embedding_dim;        /*  36 */
    uint32_t payload_offset;       /* 40: always RS_RC_DESC_BYTES */
    uint32_t payload_bytes;        /*  44 */
    uint32_t response_bytes;       /* 48: room the client has for the response payload */
    uint32_t msg_bytes;            /*  52 */
    uint64_t client_response_addr; /* 56 */
    uint32_t client_response_rkey; /* 64 */
    uint32_t client_status_rkey;   /* 68 */
    uint64_t client_status_addr;   /* 72 */
    uint32_t flags;                /*  80 */
    uint32_t reserved1;            /*  84 */
    char table_name[64];           /*  88 */
    uint8_t pad[40];               /* 152..191 */
} rs_rc_desc;
_Static_assert(sizeof(rs_rc_desc) == RS_RC_DESC_BYTES, "descriptor is 192 bytes");

typedef struct rs_rc_commit_word {
    uint32_t state;    /* RS_RC_STATE_READY */
    uint32_t checksum; /* reserved, 0 */
    uint64_t seq;      /* last 8 bytes of the request slot */
} rs_rc_commit_word;

typedef struct rs_rc_status_word {
    int32_t status;          /* rs_ps_status of the request, or of descriptor validation */
    uint32_t response_bytes; /* rows + msg_bytes written at the start of the response slot */
    uint32_t msg_bytes;      /* encoded PSResponse header length */
    uint32_t state;          /* RS_RC_STATE_DONE, or RS_RC_STATE_DONE_SG (direct_sg rows) */
    uint64_t seq;            /* last 8 bytes of the response slot */
} rs_rc_status_word;

/* Check a descriptor against the slot it was found in. Returns an rs_ps_status; on error, why
 * says what is wrong ("bad magic 0x...", "client_id 3 in a slot of client 2", ...). */
typedef struct rs_rc_slot_expect {
    uint32_t shard_id, client_id, qp_index, value_size, max_keys;
    uint32_t request_slot_bytes; /* payload must fit before the tail */
    uint32_t response_room;      /* response slot bytes minus the tail */
    uint64_t response_addr, status_addr;
    uint32_t rkey;
} rs_rc_slot_expect;
int rs_rc_desc_check(const rs_rc_desc *d, const rs_rc_slot_expect *x, char *why, size_t why_len);

/* ---- fabric interface ------------------------------------------------------------------------ */

typedef struct rs_rc_fabric rs_rc_fabric;
typedef struct rs_rc_ep rs_rc_ep;
typedef struct rs_rc_evch rs_rc_evch; /* notify_events: a completion channel shared by endpoints */

/* Registered memory. alloc_region memory can be written by a connected peer; reg_local memory is
 * only a source of local writes (verbs needs an lkey for it, shm does not). */
typedef struct rs_rc_region {
    uint8_t *addr;
    size_t len;
    uint32_t lkey, rkey;
    void *impl; /* fabric-owned */
} rs_rc_region;

/* What a peer needs to write into my region through my endpoint: exchanged over the control
 * plane, encoded field by field (rc_ctrl.c). Unused fields of a fabric are zero. */
#define RS_RC_NAME_MAX 64
typedef struct rs_rc_ep_meta {
    uint64_t region_addr, region_len;
    uint32_t rkey;
    uint32_t qpn, psn;                        /* verbs */
    uint16_t lid;                             /* verbs (IB) */
    uint8_t gid[16];                          /* verbs (RoCE, or IB with GRH) */
    uint8_t port, link_layer, mtu, gid_index; /* verbs */
    uint8_t caps;                             /* RS_RC_CAP_* (record byte 34; 0 from old peers) */
    char shm_name[RS_RC_NAME_MAX];            /* shm: POSIX shm object holding the region */
} rs_rc_ep_meta;

/* caps: server lane — its QP keeps receives posted, so requests may ring (carry an immediate);
 * client lane — it rings every request on a lane whose server record says so. */
#define RS_RC_CAP_RING 0x01u

typedef struct rs_rc_sge {
    const void *addr;
    uint32_t len;
    uint32_t lkey;
} rs_rc_sge;

typedef struct rs_rc_wc {
    uint64_t wr_id;
    int status; /* 0 ok; otherwise a fabric error (verbs wc status) */
} rs_rc_wc;

enum {
    RS_RC_WR_SIGNALED = 1u << 0, /* produce a completion for poll() */
    RS_RC_WR_INLINE = 1u << 1,   /* verbs: IBV_SEND_INLINE (caller checks inline_bytes) */
    RS_RC_WR_PUBLISH = 1u << 2,  /* the write ends with a seq word: store its last 8 bytes last */
    RS_RC_WR_NOTIFY = 1u << 3,   /* notify_events fabrics: the write carries an immediate, which
                                  * completes one of the peer's posted receives */
};

typedef struct rs_rc_fabric_config {
    const char *device;   /* verbs device name; NULL/"" = first device */
    uint8_t port;         /* verbs port (default 1) */
    int gid_index;        /* verbs GID index; -1 = use the LID (IB without GRH) */
    uint32_t max_send_wr; /* per endpoint send queue depth */
    uint32_t inline_bytes;
    int numa_node; /* -1 = no memory policy; else regions are bound to this node */
    /* notify_events fabrics: > 0 gives every endpoint a receive CQ on its own completion channel
     * with this many zero-length receives posted, for the peer's RS_RC_WR_NOTIFY writes */
    uint32_t recv_events;
} rs_rc_fabric_config;

typedef struct rs_rc_fabric_ops {
    const char *name; /* "shm", "verbs" */
    /* RS_ENODEV with a readable reason when the fabric cannot run here (no verbs device). */
    int (*open)(const rs_rc_fabric_config *cfg, rs_rc_fabric **out, rs_error *err);
    void (*close)(rs_rc_fabric *f);
    int (*alloc_region)(rs_rc_fabric *f, size_t len, rs_rc_region *out, rs_error *err);
    void (*free_region)(rs_rc_fabric *f, rs_rc_region *r);
    int (*reg_local)(rs_rc_fabric *f, void *addr, size_t len, rs_rc_region *out, rs_error *err);
    void (*dereg_local)(rs_rc_fabric *f, rs_rc_region *r);
    /* An endpoint that lets the peer write into `local` and lets me write into the peer's region
     * once connected. *meta describes `local` and the endpoint for the peer. */
    int (*ep_create)(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_ep **out,
                     rs_rc_ep_meta *meta, rs_error *err);
    int (*ep_connect)(rs_rc_ep *ep, const rs_rc_ep_meta *peer, rs_error *err);
    void (*ep_destroy)(rs_rc_ep *ep);
    /* One-sided write of the gathered sg[0..n) (n <= RS_RC_MAX_SGE) to the peer's region at
     * remote_addr. RS_EINVAL if the target lies outside the peer's region; RS_EBUSY if the send
     * queue is full (poll, then retry). */
    int (*write)(rs_rc_ep *ep, const rs_rc_sge *sg, int n, uint64_t remote_addr, uint32_t rkey,
                 unsigned flags, uint64_t wr_id, rs_error *err);
    /* Up to max completions of signaled writes; returns how many (>= 0) or a negative code. */
    int (*poll)(rs_rc_ep *ep, rs_rc_wc *wc, int max);
    /* Where the fabric can expose the peer's memory directly (shm), a pointer to
     * [remote_addr, remote_addr+len) in my address space, else NULL. Writing through it and then
     * publishing with write() is equivalent to a write whose source was built in place. */
    void *(*remote_window)(rs_rc_ep *ep, uint64_t remote_addr, size_t len);
    /* 1 when a peer's write is a CPU store into a shared mapping on this host (shm), so a thread
     * may sleep on a futex word of a region and the peer wakes it (the sleep words above); 0 for
     * verbs, whose writes a NIC places without waking anyone. */
    int shared_futex;
    /* 1 when a write can carry RS_RC_WR_NOTIFY and an endpoint opened with recv_events can wait
     * for it (verbs: WRITE WITH IMM and a completion channel); 0 for shm. */
    int notify_events;
    /* 1 when a gathered write is this host's CPU copying element after element (shm), not a NIC
     * gathering them: the auto GET mode then takes the staging copy, the engine's batch read,
     * which fetches rows ahead of copying them; a row-by-row gather waits for each row's miss. */
    int cpu_gather;
    /* notify_events: take the receive completions that arrived (each re-posts its receive);
     * returns how many, or a negative code. */
    int (*drain_events)(rs_rc_ep *ep);
    /* notify_events: block up to timeout_ns for a receive completion (armed, then checked again,
     * so one that arrives meanwhile is not missed). Returns the completions taken (>= 1), 0 on
     * timeout, or a negative code. */
    int (*wait_event)(rs_rc_ep *ep, uint64_t timeout_ns);
    /* notify_events, for a thread that waits on many endpoints (a server poller): a completion
     * channel; endpoints made by ep_create_on report their receive completions to it. */
    int (*evch_open)(rs_rc_fabric *f, rs_rc_evch **out, rs_error *err);
    void (*evch_close)(rs_rc_evch *ch); /* after every endpoint on it is destroyed */
    /* ep_create with a receive CQ of its own holding `recvs` zero-length receives, whose events
     * go to ch. */
    int (*ep_create_on)(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_evch *ch, uint32_t recvs,
                        rs_rc_ep **out, rs_rc_ep_meta *meta, rs_error *err);
    /* Ask for an event at ep's next receive completion, then take those that came already (each
     * re-posts its receive): returns how many (> 0: do not sleep), or a negative code. */
    int (*arm_events)(rs_rc_ep *ep);
    /* Block up to timeout_ns until ch has an event or wake_fd (-1: none) is readable; takes and
     * acknowledges ch's events (the CQs they name must be armed again). Returns a mask: 1 ch had
     * events, 2 wake_fd is readable (the caller reads it); 0 on timeout; negative on error. */
    int (*evch_wait)(rs_rc_evch *ch, int wake_fd, uint64_t timeout_ns);
} rs_rc_fabric_ops;

extern const rs_rc_fabric_ops rs_rc_fabric_shm;
extern const rs_rc_fabric_ops
    rs_rc_fabric_verbs; /* open() fails with RS_ENOTSUP if built without */

/* "shm" -> &rs_rc_fabric_shm, "verbs"/"rdma" -> &rs_rc_fabric_verbs; NULL otherwise. */
const rs_rc_fabric_ops *rs_rc_fabric_find(const char *name);

/* ---- options shared by server and client ----------------------------------------------------- */

typedef enum rs_rc_poll_mode { RS_RC_POLL_ADAPTIVE = 0, RS_RC_POLL_BUSY = 1 } rs_rc_poll_mode;
typedef enum rs_rc_get_mode {
    RS_RC_GET_AUTO = 0,
    RS_RC_GET_STAGING_COPY = 1,
    RS_RC_GET_DIRECT_SG = 2,
} rs_rc_get_mode;
typedef enum rs_rc_fake_get {
    RS_RC_FAKE_NONE = 0,
    RS_RC_FAKE_STATUS_ONLY = 1,
    RS_RC_FAKE_INDEX_ONLY = 2,
    RS_RC_FAKE_PAYLOAD_MEMSET = 3,
} rs_rc_fake_get;

/* Every RC option, parsed from the transports' `extra` string "k=v;k=v" (rc_options.c). Names
 * are RecStore's flag names without the rdma_/rdma_rc_ prefix where RecStore has one. */
typedef struct rs_rc_options {
    uint32_t qps;                 /* qps_per_client_per_shard (16) */
    uint32_t slots;               /* slots_per_qp (1) */
    uint32_t request_slot_bytes;  /* 1 MiB */
    uint32_t response_slot_bytes; /* 1 MiB */
    uint32_t inline_bytes;        /* 64 */
    uint32_t wait_timeout_ms;     /* 60000 */
    uint32_t wait_spin_iterations;
    uint32_t idle_spin_rounds;    /* adaptive backoff: idle rounds of cpu pause (2000) */
    uint32_t idle_yield_rounds;   /* then rounds of sched_yield (256), then sleep or nap */
    uint32_t idle_spin_us;        /* ... or once this long idle (100 us; 0 = rounds only) */
    uint32_t profile_interval_ms; /* 0 = off */
    uint32_t get_workers;         /* server GET workers (0) */
    uint32_t max_keys;            /* server: largest key_count accepted (0 = slot-limited) */
    uint32_t ctrl_timeout_ms;     /* control plane connect/ready wait (30000) */
    uint32_t max_clients;         /* server: control connections at once (1024); more are closed */
    int bind_core_offset;         /* -1 = no binding (env RECSTORE_BIND_CORE_OFFSET) */
    int bind_core_stride;         /* 1 */
    int numa_node;                /* -1 = none */
    rs_rc_poll_mode poll_mode;
    rs_rc_get_mode get_mode;
    rs_rc_fake_get fake_get;
    int skip_client_copy;
    /* client: response slots kept as the caller's GET row buffers (rs_rc_client_rows_buffers);
     * the other slots carry everything else (0) */
    uint32_t rows_buffers;
    rs_copy_mode client_copy; /* client: how GET rows reach the caller's buffer (copy.h) */
    char device[64];
    uint8_t ib_port;
    int gid_index;
    char client_only[32]; /* first client-only key given (servers refuse it), else "" */
    char server_only[32]; /* first server-only key given (clients refuse it), else "" */
    char bad_env[64];     /* RECSTORE_BIND_CORE_OFFSET's value when it is not an integer in
                           * -1..4096 (rs_rc_options_parse refuses it), else "" */
    rs_auth_token auth;   /* not an option string: the deployment token (rc_transport.c sets it);
                           * clients send it in the attach request, servers require it */
} rs_rc_options;

/* Defaults; bind_core_offset from $RECSTORE_BIND_CORE_OFFSET when set (RecStore's variable). */
void rs_rc_options_default(rs_rc_options *o);
/* Apply "k=v;k=v" (also ',' separated). RS_EINVAL naming the key or value on bad input, or naming
 * RECSTORE_BIND_CORE_OFFSET when the variable held something other than an integer.
 * Keys that only one side uses are remembered in client_only / server_only, so the other side
 * refuses them (rs_rc_options_check_role) instead of ignoring them. */
int rs_rc_options_parse(rs_rc_options *o, const char *extra, rs_error *err);
/* RS_EINVAL naming the key when o holds a key of the other side (server != 0: a server). */
int rs_rc_options_check_role(const rs_rc_options *o, int server, rs_error *err);
const char *rs_rc_get_mode_name(rs_rc_get_mode m);
const char *rs_rc_fake_get_name(rs_rc_fake_get m);

/* ---- adaptive polling (rc_poll.c) ------------------------------------------------------------ */

/* Idle backoff: spin, then yield, then sleep with growing naps up to 1 ms. idle() is called after
 * a round that found nothing, busy() after one that found work. */
#define RS_RC_IDLE_SPIN_ROUNDS  2000u
#define RS_RC_IDLE_YIELD_ROUNDS 256u
#define RS_RC_IDLE_SPIN_US      100u
/* Adaptive spinning (adaptive poll mode; recstore/spin.h): after RS_SPIN_QUICK_AFTER waits
 * (client) or idle stretches (poller) in a row that ended asleep (blocked on a futex or a
 * completion channel, or, where a poller cannot block, in naps), the next spins
 * 1/2^RS_SPIN_QUICK_SHIFT of its rounds and yields none before it sleeps. When threads outnumber
 * cores, a spinning thread takes the CPU the thread it waits for needs. */
typedef struct rs_rc_backoff {
    rs_rc_poll_mode mode;
    uint32_t spin_rounds, yield_rounds; /* from the options */
    uint64_t budget_ns, idle_t0;        /* idle_spin_us; when the idle streak began */
    uint32_t idle_rounds;
    uint64_t sleep_ns;
    uint64_t max_nap_ns; /* longest nap (1 ms; waiters with a request in flight use less) */
    uint64_t sleeps;     /* counters for profiles */
} rs_rc_backoff;
void rs_rc_backoff_init(rs_rc_backoff *b, const rs_rc_options *o);
void rs_rc_backoff_idle(rs_rc_backoff *b);
static inline void rs_rc_backoff_busy(rs_rc_backoff *b) {
    b->idle_rounds = 0;
    b->sleep_ns = 0;
}
/* Nonzero once the backoff sleeps (used to check control sockets while idle). */
static inline int rs_rc_backoff_sleeping(const rs_rc_backoff *b) {
    return b->sleep_ns != 0;
}

/* Spinning and yielding done: the next idle round would nap; a waiter that can sleep on a futex
 * blocks instead (adaptive mode only). */
int rs_rc_backoff_should_block(const rs_rc_backoff *b);
/* Spin 1/2^shift of the rounds (and of *extra_spins, a caller's own spin count), yield none:
 * for a waiter whose recent waits all ended asleep. */
void rs_rc_backoff_shorten(rs_rc_backoff *b, unsigned shift, uint32_t *extra_spins);

/* Offsets of the sleep words inside a slot (see the layout at the top). */
#define RS_RC_SLEEP_WORD_OFFSET(slot_bytes) ((size_t)(slot_bytes)-RS_RC_TAIL_BYTES)
#define RS_RC_BELL_LANE_OFFSET(slot_bytes)  (RS_RC_SLEEP_WORD_OFFSET(slot_bytes) + 4)

/* Client: sleep until the status seq word `seq` equals `want` or timeout_ns passes, announcing
 * the sleep in `waiter` (both in the client's region of a shared_futex fabric). Returns 0 when the
 * seq arrived before the sleep, 1 after a sleep that ended early (woken), 2 after one that timed
 * out. */
int rs_rc_wait_seq_block(const uint64_t *seq, uint64_t want, uint32_t *waiter, uint64_t timeout_ns);
/* Server: after publishing a status word whose seq is at `seq` (the peer's mapping), wake the
 * client if `waiter` says it sleeps. One fence and one load when nobody sleeps; 1 if it woke. */
int rs_rc_wake_waiter(uint32_t *waiter, uint64_t *seq);
/* Client: after committing a request, wake the lane's poller if its doorbell says it sleeps.
 * One fence and one load when the poller is awake; 1 if it woke it. */
int rs_rc_doorbell_ring(uint32_t *bell);

/* Spin slots: client waiters of a shared_futex fabric spin in full only while they hold one of
 * the process's spin slots (recstore/spin.h); waiters in the short spin of adaptive spinning
 * take none. */

/* Bind the calling thread to core `offset + index * stride` (mod online CPUs) when offset >= 0,
 * else to the CPUs of numa_node when >= 0. Returns the core or -1. */
int rs_rc_bind_thread(int offset, int stride, unsigned index, int numa_node);

/* ---- control plane (rc_ctrl.c) --------------------------------------------------------------- */

#define RS_RC_CTRL_MAGIC    0x52444d41u /* "RDMA" */
#define RS_RC_CTRL_VERSION  1
#define RS_RC_CTRL_MAX_BODY 65536u
#define RS_RC_CTRL_MAX_QPS  256u

enum {
    RS_RC_MSG_READY_REQ = 1,  /* client: is the server ready?           body: empty   */
    RS_RC_MSG_READY_REP = 2,  /* server: u32 ready, u32 shard, u32 value_size, u32 max_keys */
    RS_RC_MSG_ATTACH_REQ = 3, /* client: geometry + one ep_meta per QP */
    RS_RC_MSG_ATTACH_REP = 4, /* server: status, reason, client_id, one ep_meta per QP */
    RS_RC_MSG_ATTACHED = 5,   /* client: mapped the server's regions (shm names may go) */
    RS_RC_MSG_ERROR = 6,      /* server: u32 code, reason text (then the server closes) */
};

/* Frame header: magic u32, version u16, type u16, body_len u32, reserved u32 (16 bytes, LE). */
#define RS_RC_CTRL_HDR 16

typedef struct rs_rc_attach_req {
    char fabric[16];
    uint32_t qps, slots, request_slot_bytes, response_slot_bytes;
    uint32_t shard_id;
    rs_rc_ep_meta lanes[RS_RC_CTRL_MAX_QPS];
    uint32_t token_len; /* after the lanes: u32 length + token bytes; absent when 0 */
    uint8_t token[RS_AUTH_TOKEN_MAX];
} rs_rc_attach_req;

typedef struct rs_rc_attach_rep {
    int32_t status; /* 0 or an RS_E* code */
    char reason[256];
    uint32_t client_id, shard_id, value_size, max_keys, qps;
    rs_rc_ep_meta lanes[RS_RC_CTRL_MAX_QPS];
} rs_rc_attach_rep;

/* Encode one frame (header + body) into buf; returns bytes or RS_EINVAL if it would exceed cap. */
int rs_rc_ctrl_encode_attach_req(const rs_rc_attach_req *r, uint8_t *buf, size_t cap);
int rs_rc_ctrl_encode_attach_rep(const rs_rc_attach_rep *r, uint8_t *buf, size_t cap);
/* Decode a body (header already checked). RS_EPROTO with a reason. */
int rs_rc_ctrl_decode_attach_req(const uint8_t *body, size_t len, rs_rc_attach_req *r,
                                 rs_error *err);
int rs_rc_ctrl_decode_attach_rep(const uint8_t *body, size_t len, rs_rc_attach_rep *r,
                                 rs_error *err);
/* Check a 16-byte header; fills type and body_len. RS_EPROTO naming the bad field. */
int rs_rc_ctrl_check_header(const uint8_t *hdr, uint16_t *type, uint32_t *body_len, rs_error *err);
void rs_rc_ctrl_put_header(uint8_t *hdr, uint16_t type, uint32_t body_len);

/* Blocking frame I/O on a socket with a deadline (ms). recv rejects oversized bodies before
 * allocating. *body is malloc'd (free it). */
int rs_rc_ctrl_send(int fd, uint16_t type, const void *body, uint32_t len, rs_error *err);
int rs_rc_ctrl_recv(int fd, uint32_t timeout_ms, uint16_t *type, uint8_t **body, uint32_t *len,
                    rs_error *err);

/* ---- server (rc_server.c) -------------------------------------------------------------------- */

/* What the server calls to serve a request; the transport tables wrap rs_ps_shard_handle. */
typedef struct rs_rc_handler {
    void *ctx;
    uint32_t shard_id, value_size, max_keys;
    rs_kv_index_type index_type; /* picks the auto GET mode */
    rs_kv *kv; /* direct_sg row refs and index_only probes; NULL = those fall back / fail */
    int (*handle)(void *ctx, const rs_ps_request *req, rs_ps_response *resp, void *rows_out,
                  size_t rows_cap, unsigned thread_slot);
} rs_rc_handler;

typedef struct rs_rc_server rs_rc_server;

typedef struct rs_rc_server_stats {
    uint64_t clients_attached, clients_open, lanes_open, requests, invalid_descriptor,
        duplicate_seq, bytes_in, bytes_out, direct_sg, direct_sg_fallback, ctrl_rejected,
        auth_failures;
    /* idle pollers: napping or parked now; naps taken; idle rounds spent spinning/yielding */
    uint64_t pollers_sleeping, poller_naps, poller_awake_idle_rounds;
    /* poller sleeps: blocked on their lanes' doorbells (shm futexes, or verbs completion events
     * of ringing lanes; entries), of those ended by a client's doorbell; responses after which the
     * server woke a sleeping client (shm), or that it wrote with an immediate for a client that
     * asked (verbs, RS_RC_FLAG_NOTIFY) */
    uint64_t poller_blocks, poller_doorbell_wakes, client_wakes;
    /* answers whose client a poller checked for a wake after its pass over the client's lanes
     * rather than after the answer (shm, a poller with three clients or more) */
    uint64_t client_wake_checks_deferred;
    /* idle stretches a poller began with the short spin of adaptive spinning */
    uint64_t poller_quick_idles;
    /* open lanes whose client rings (verbs, RS_RC_CAP_RING): a poller all of whose lanes ring
     * blocks on their completion events (poller_blocks / poller_doorbell_wakes count those too) */
    uint64_t lanes_ringing;
} rs_rc_server_stats;

/* Start the control plane on host:port (0 = free port), num_threads pollers. */
int rs_rc_server_start(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                       uint32_t num_threads, const rs_rc_options *opts, const rs_rc_handler *h,
                       rs_rc_server **out, rs_error *err);
uint16_t rs_rc_server_port(const rs_rc_server *s);
void rs_rc_server_get_stats(rs_rc_server *s, rs_rc_server_stats *out);
void rs_rc_server_stop(rs_rc_server *s);

/* ---- client (rc_client.c) -------------------------------------------------------------------- */

typedef struct rs_rc_client rs_rc_client;

/* Attach one logical client to the shard served at host:port. max_in_flight (prefetch_depth) must
 * be <= qps * slots (RS_EINVAL saying so). */
int rs_rc_client_connect(const rs_rc_fabric_ops *fab, const char *host, uint16_t port,
                         uint32_t max_in_flight, const rs_rc_options *opts, rs_rc_client **out,
                         rs_error *err);
/* Submit (non-blocking while fewer than max_in_flight are pending). GET rows land in rows_out
 * unless skip_client_copy. */
int rs_rc_client_submit(rs_rc_client *c, const rs_ps_request *req, uint64_t tag, void *rows_out,
                        size_t rows_cap, rs_error *err);
/* Wait for the oldest pending request. resp.rows points into the response slot (valid until the
 * next submit). */
int rs_rc_client_next(rs_rc_client *c, uint64_t *tag, rs_ps_response *resp, rs_error *err);
uint32_t rs_rc_client_id(const rs_rc_client *c);
/* How this client's waits went: blocking sleeps entered (shm: on the status word's futex; verbs:
 * on the QP's completion channel, for requests sent with RS_RC_FLAG_NOTIFY), of those the ones
 * that ran out their time slice (without a wake), doorbells that woke a sleeping poller (shm),
 * waits begun with the short spin of adaptive spinning, requests sent with RS_RC_FLAG_NOTIFY,
 * waits that found the process's spin slots taken and slept without spinning (shm), and GETs
 * whose rows landed in the caller's row buffer without a copy (rows_buffers), and copies into
 * the caller's buffers made with streaming stores (client_copy). */
typedef struct rs_rc_client_stats {
    uint64_t wait_blocks, wait_sleep_timeouts, doorbell_rings, wait_quick, notify_requests,
        wait_unspun, rows_in_place, stream_copies;
} rs_rc_client_stats;
void rs_rc_client_get_stats(const rs_rc_client *c, rs_rc_client_stats *out);
/* The caller's row buffers (option rows_buffers=N): N response slots set aside at connect. Fills
 * bufs[0..min(N, max)) and *cap (the row bytes each holds) and returns N. A GET submitted with
 * rows_out = bufs[i] goes on that slot and the server writes its rows there: the wait copies
 * nothing (counted in rows_in_place). The bytes after the rows up to *cap are the transport's
 * (the response header lands there); a buffer takes one GET at a time (RS_EBUSY while its GET is
 * in flight) and keeps its rows until the next GET into it. */
uint32_t rs_rc_client_rows_buffers(rs_rc_client *c, void **bufs, uint32_t max, size_t *cap);
/* Per-request bounds of this client (transport.h): the server's max_keys, the slots in flight, and
 * what a request / response slot holds after the descriptor, tail and message header. */
struct rs_ps_conn_limits;
void rs_rc_client_limits(const rs_rc_client *c, struct rs_ps_conn_limits *out);
void rs_rc_client_close(rs_rc_client *c);

/* Test hook: write `len` raw bytes (a descriptor and payload, possibly corrupt) into the server's
 * request slot (qp, slot), commit them with the QP's next seq, wait up to timeout_ms for the status
 * word and return its status and the server's error text. The slot must be idle. */
int rs_rc_client_debug_inject(rs_rc_client *c, uint32_t qp, uint32_t slot, const void *bytes,
                              size_t len, uint32_t timeout_ms, int32_t *status, char *why,
                              size_t why_len, rs_error *err);
uint64_t rs_rc_client_debug_next_seq(const rs_rc_client *c, uint32_t qp);
/* Test hook: (re)write the commit word of the server's request slot (qp, slot) with `seq`. */
int rs_rc_client_debug_commit(rs_rc_client *c, uint32_t qp, uint32_t slot, uint64_t seq);

#ifdef __cplusplus
}
#endif
#endif
