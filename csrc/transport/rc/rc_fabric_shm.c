/*
 * rc_fabric_shm.c — the RC fabric over POSIX shared memory (same host only).
 *
 * A region is a POSIX shm object ("/recbench-rc-<pid>-<n>") mapped MAP_SHARED by its owner. The
 * peer maps it when its endpoint connects and then unlinks the name at once, so a crash of either
 * process later leaves nothing in /dev/shm; the owner unlinks too when it frees the region (the
 * peer may never have connected). A "one-sided write" is a copy into the peer's mapping; with
 * RS_RC_WR_PUBLISH its last 8 bytes (a seq word) are stored last with a release store, which gives
 * a reader that acquire-loads the seq the same guarantee as RC in-order placement. Writes are
 * checked against the peer region's bounds and rkey, as a NIC would. Completions of signaled
 * writes are immediate: they wait in a per-endpoint ring for poll(); a full ring is a full send
 * queue (RS_EBUSY). An endpoint is used by one thread at a time (callers serialise per lane).
 * Because a write is a CPU store into a MAP_SHARED mapping, both processes may sleep on futex
 * words of a region and wake each other (shared_futex; the sleep words of rc.h, rc_poll.c).
 * Both mappings of every region are guarded against a peer that truncates the shm object
 * (rc_shm_guard.c): the process survives, and writes into a truncated peer region fail RS_ECONN.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recstore/hash.h"
#include "recstore/rc.h"
#include "transport/rc/rc_shm_guard.h"
#ifdef RS_HAVE_NUMA
#include <numa.h>
#endif

#define SHM_WC_RING 1024u

struct rs_rc_fabric {
    rs_rc_fabric_config cfg;
    _Atomic uint64_t next_id;
    uint64_t key_salt;
};

typedef struct shm_region {
    char name[RS_RC_NAME_MAX];
    int guard;
} shm_region;

struct rs_rc_ep {
    rs_rc_fabric *f;
    uint8_t *peer_map;
    int peer_guard;
    uint64_t peer_addr, peer_len;
    uint32_t peer_rkey;
    uint32_t wc_head, wc_tail;
    uint64_t wc_ring[SHM_WC_RING];
};

static int shm_open_fabric(const rs_rc_fabric_config *cfg, rs_rc_fabric **out, rs_error *err) {
    rs_rc_fabric *f = calloc(1, sizeof *f);
    if (!f) return rs_error_set(err, RS_ENOMEM, "shm fabric: out of memory");
    if (cfg)
        f->cfg = *cfg;
    else
        f->cfg.numa_node = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    f->key_salt = rs_mix64((uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^ (uintptr_t)f);
    *out = f;
    return 0;
}

static void shm_close_fabric(rs_rc_fabric *f) {
    free(f);
}

static int shm_alloc_region(rs_rc_fabric *f, size_t len, rs_rc_region *out, rs_error *err) {
    memset(out, 0, sizeof *out);
    shm_region *impl = calloc(1, sizeof *impl);
    if (!impl) return rs_error_set(err, RS_ENOMEM, "shm fabric: out of memory");
    uint64_t id = atomic_fetch_add(&f->next_id, 1);
    snprintf(impl->name, sizeof impl->name, "/recbench-rc-%d-%" PRIu64 "-%08x", (int)getpid(), id,
             (unsigned)(rs_mix64(f->key_salt + id) & 0xffffffffu));
    int fd = shm_open(impl->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        int e = errno;
        rs_error_errno(err, RS_EIO, e, "shm fabric: shm_open(%s)", impl->name);
        free(impl);
        return RS_EIO;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(impl->name);
        free(impl);
        return rs_error_errno(err, RS_EIO, e, "shm fabric: ftruncate to %zu bytes", len);
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(impl->name);
        free(impl);
        return rs_error_errno(err, RS_ENOMEM, e, "shm fabric: mmap of %zu bytes", len);
    }
    impl->guard = rs_rc_shm_guard_add(p, len);
    if (impl->guard < 0) {
        munmap(p, len);
        shm_unlink(impl->name);
        free(impl);
        return rs_error_set(err, RS_ENOMEM,
                            "shm fabric: cannot guard another shared region (4096 per process)");
    }
#ifdef RS_HAVE_NUMA
    if (f->cfg.numa_node >= 0 && numa_available() >= 0 && f->cfg.numa_node <= numa_max_node())
        numa_tonode_memory(p, len, f->cfg.numa_node);
#endif
    out->addr = p;
    out->len = len;
    out->rkey = (uint32_t)(rs_mix64(f->key_salt ^ (id * 0x9e3779b97f4a7c15ull)) | 1u);
    out->lkey = out->rkey;
    out->impl = impl;
    return 0;
}

static void shm_free_region(rs_rc_fabric *f, rs_rc_region *r) {
    (void)f;
    if (!r || !r->impl) return;
    shm_region *impl = r->impl;
    shm_unlink(impl->name); /* ENOENT when the peer already unlinked it */
    rs_rc_shm_guard_remove(impl->guard);
    munmap(r->addr, r->len);
    free(impl);
    memset(r, 0, sizeof *r);
}

static int shm_reg_local(rs_rc_fabric *f, void *addr, size_t len, rs_rc_region *out,
                         rs_error *err) {
    (void)f;
    (void)err;
    memset(out, 0, sizeof *out);
    out->addr = addr;
    out->len = len;
    return 0;
}

static void shm_dereg_local(rs_rc_fabric *f, rs_rc_region *r) {
    (void)f;
    memset(r, 0, sizeof *r);
}

static int shm_ep_create(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_ep **out,
                         rs_rc_ep_meta *meta, rs_error *err) {
    rs_rc_ep *ep = calloc(1, sizeof *ep);
    if (!ep) return rs_error_set(err, RS_ENOMEM, "shm fabric: out of memory");
    ep->f = f;
    ep->peer_guard = -1;
    memset(meta, 0, sizeof *meta);
    meta->region_addr = (uint64_t)(uintptr_t)local->addr;
    meta->region_len = local->len;
    meta->rkey = local->rkey;
    snprintf(meta->shm_name, sizeof meta->shm_name, "%s", ((shm_region *)local->impl)->name);
    *out = ep;
    return 0;
}

static int shm_ep_connect(rs_rc_ep *ep, const rs_rc_ep_meta *peer, rs_error *err) {
    if (ep->peer_map) return rs_error_set(err, RS_EBUSY, "shm fabric: endpoint already connected");
    if (strncmp(peer->shm_name, "/recbench-rc-", 13) != 0 ||
        memchr(peer->shm_name, '\0', RS_RC_NAME_MAX) == NULL || strchr(peer->shm_name + 1, '/'))
        return rs_error_set(err, RS_EPROTO,
                            "shm fabric: peer region name is not a recbench shm object");
    if (peer->region_len == 0 || peer->region_len > (1ull << 40))
        return rs_error_set(err, RS_EPROTO, "shm fabric: peer region length %" PRIu64 " is invalid",
                            peer->region_len);
    int fd = shm_open(peer->shm_name, O_RDWR, 0);
    if (fd < 0)
        return rs_error_errno(err, errno == ENOENT ? RS_ECONN : RS_EIO, errno,
                              "shm fabric: cannot open peer region %s (is the peer on this host?)",
                              peer->shm_name);
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != peer->region_len) {
        close(fd);
        return rs_error_set(err, RS_EPROTO,
                            "shm fabric: peer region %s has %lld bytes, metadata says %" PRIu64,
                            peer->shm_name, (long long)st.st_size, peer->region_len);
    }
    void *p = mmap(NULL, peer->region_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return rs_error_errno(err, RS_ENOMEM, e, "shm fabric: mmap of peer region");
    int guard = rs_rc_shm_guard_add(p, peer->region_len);
    if (guard < 0) {
        munmap(p, peer->region_len);
        return rs_error_set(err, RS_ENOMEM,
                            "shm fabric: cannot guard another shared region (4096 per process)");
    }
    shm_unlink(peer->shm_name); /* both sides hold mappings now: nothing can leak after a crash */
    ep->peer_map = p;
    ep->peer_guard = guard;
    ep->peer_addr = peer->region_addr;
    ep->peer_len = peer->region_len;
    ep->peer_rkey = peer->rkey;
    return 0;
}

static void shm_ep_destroy(rs_rc_ep *ep) {
    if (!ep) return;
    if (ep->peer_map) {
        rs_rc_shm_guard_remove(ep->peer_guard);
        munmap(ep->peer_map, ep->peer_len);
    }
    free(ep);
}

static inline uint8_t *shm_target(rs_rc_ep *ep, uint64_t addr, uint64_t len) {
    if (!ep->peer_map || addr < ep->peer_addr || len > ep->peer_len ||
        addr - ep->peer_addr > ep->peer_len - len)
        return NULL;
    return ep->peer_map + (addr - ep->peer_addr);
}

static int shm_truncated(rs_error *err) {
    return rs_error_set(err, RS_ECONN,
                        "shm fabric: the peer truncated its shared region (write dropped)");
}

static int shm_write(rs_rc_ep *ep, const rs_rc_sge *sg, int n, uint64_t remote_addr, uint32_t rkey,
                     unsigned flags, uint64_t wr_id, rs_error *err) {
    if (n < 1 || n > RS_RC_MAX_SGE)
        return rs_error_set(err, RS_EINVAL, "shm fabric: %d SGEs (1..%d)", n, RS_RC_MAX_SGE);
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += sg[i].len;
    if (rkey != ep->peer_rkey)
        return rs_error_set(err, RS_EINVAL, "shm fabric: rkey 0x%x does not match the peer region",
                            rkey);
    uint8_t *dst = shm_target(ep, remote_addr, total);
    if (!dst)
        return rs_error_set(err, RS_EINVAL,
                            "shm fabric: write of %" PRIu64 " bytes at 0x%" PRIx64
                            " is outside the peer region",
                            total, remote_addr);
    if ((flags & RS_RC_WR_SIGNALED) && ep->wc_tail - ep->wc_head >= SHM_WC_RING)
        return rs_error_set(err, RS_EBUSY, "shm fabric: completion ring full (poll first)");
    if (rs_rc_shm_guard_broken(ep->peer_guard)) return shm_truncated(err);
    int publish = (flags & RS_RC_WR_PUBLISH) != 0;
    if (publish && (sg[n - 1].len < 8 || ((uintptr_t)(dst + total - 8) & 7)))
        return rs_error_set(err, RS_EINVAL,
                            "shm fabric: a publish write must end with an aligned 8-byte word");
    for (int i = 0; i < n; i++) {
        uint32_t len = sg[i].len;
        if (publish && i == n - 1) len -= 8;
        if (len && dst != sg[i].addr) memcpy(dst, sg[i].addr, len);
        dst += len;
    }
    if (publish) {
        uint64_t word;
        memcpy(&word, (const uint8_t *)sg[n - 1].addr + sg[n - 1].len - 8, 8);
        __atomic_store_n((uint64_t *)dst, word, __ATOMIC_RELEASE);
    }
    if (rs_rc_shm_guard_broken(ep->peer_guard)) /* the copy ran into the truncated end */
        return shm_truncated(err);
    if (flags & RS_RC_WR_SIGNALED) ep->wc_ring[ep->wc_tail++ % SHM_WC_RING] = wr_id;
    return 0;
}

static int shm_poll(rs_rc_ep *ep, rs_rc_wc *wc, int max) {
    int k = 0;
    while (k < max && ep->wc_head != ep->wc_tail) {
        wc[k].wr_id = ep->wc_ring[ep->wc_head++ % SHM_WC_RING];
        wc[k].status = 0;
        k++;
    }
    return k;
}

static void *shm_remote_window(rs_rc_ep *ep, uint64_t remote_addr, size_t len) {
    return shm_target(ep, remote_addr, len);
}

const rs_rc_fabric_ops rs_rc_fabric_shm = {
    .name = "shm",
    .open = shm_open_fabric,
    .close = shm_close_fabric,
    .alloc_region = shm_alloc_region,
    .free_region = shm_free_region,
    .reg_local = shm_reg_local,
    .dereg_local = shm_dereg_local,
    .ep_create = shm_ep_create,
    .ep_connect = shm_ep_connect,
    .ep_destroy = shm_ep_destroy,
    .write = shm_write,
    .poll = shm_poll,
    .remote_window = shm_remote_window,
    .shared_futex = 1,
    .cpu_gather = 1,
};

const rs_rc_fabric_ops *rs_rc_fabric_find(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, "shm")) return &rs_rc_fabric_shm;
    if (!strcmp(name, "verbs") || !strcmp(name, "rdma")) return &rs_rc_fabric_verbs;
    return NULL;
}
