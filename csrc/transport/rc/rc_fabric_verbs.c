/*
 * rc_fabric_verbs.c — the RC fabric on libibverbs: one RC QP + CQ per endpoint, MRs for regions,
 * InfiniBand (LID) and RoCE (GID, GRH) addressing.
 *
 * open() picks the device by name (or the first one), checks that the port is ACTIVE and reads its
 * LID, MTU, link layer and the selected GID. Without a device, or with a kernel without RDMA
 * support, it fails with RS_ENODEV and a one-line reason; callers turn that into a skip (exit 77).
 * Endpoints follow rc_pingpong: create CQ and QP, move the QP to INIT; connect() moves it to RTR
 * with the peer's QPN/PSN/LID/GID and to RTS. Writes are IBV_WR_RDMA_WRITE with up to
 * RS_RC_MAX_SGE SGEs; a full send queue is RS_EBUSY. RS_RC_WR_PUBLISH needs nothing extra here:
 * writes on one RC QP are placed in order, and words end with their seq. Sources of writes must
 * be registered memory (the slot staging areas) unless the write is inline. direct_sg registers
 * the whole address space as one implicit on-demand-paging MR where the device supports it
 * (elsewhere the server pins the value store instead, rc_kv_mr.c). open() reads the device limits
 * (max_sge, max_qp_wr, implicit ODP) and prints them as one component=rdma_fabric line; a device
 * that cannot inline gets QPs without inline data rather than an error.
 * Completion events: with recv_events, an endpoint's QP gets its own receive CQ on its own
 * completion channel and that many zero-length receives; a peer's RS_RC_WR_NOTIFY write is an
 * RDMA WRITE WITH IMM, which consumes one and completes it on that CQ, and wait_event() blocks on
 * the channel's fd for it (arm, poll the CQ again, then poll(2) the fd), re-posting every receive
 * it takes. ep_create_on() gives an endpoint such a CQ on a channel shared with others
 * (evch_open): a server poller arms each of its lanes' CQs (arm_events: arm, then drain once
 * more) and sleeps in evch_wait() on the one channel fd plus a wake-up fd of its own.
 * Built without libibverbs, open() fails with RS_ENOTSUP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recstore/hash.h"
#include "recstore/rc.h"

#ifdef RS_HAVE_VERBS
#include <infiniband/verbs.h>
#ifdef RS_HAVE_NUMA
#include <numa.h>
#endif

struct rs_rc_fabric {
    rs_rc_fabric_config cfg;
    uint32_t max_qp_wr; /* device limits read at open */
    int odp_implicit;
    int software;        /* rxe/siw: no PCI device behind it (sysfs has no `device` link) */
    uint8_t ack_timeout; /* QP local ACK timeout exponent: 4.096 us << it, times retry_cnt */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_port_attr pattr;
    union ibv_gid gid;
    int gid_index; /* -1: LID addressing */
    char devname[64];
};

struct rs_rc_ep {
    rs_rc_fabric *f;
    struct ibv_cq *cq;
    struct ibv_comp_channel *chan; /* recv_events: the receive CQ's completion channel */
    struct ibv_cq *rcq;            /* recv_events: receive CQ (else receives share cq) */
    uint32_t recvs;                /* zero-length receives kept posted (recv_events) */
    struct ibv_qp *qp;
    uint32_t psn;
    rs_rc_ep_meta peer;
    int connected;
    int failed; /* first failed completion's ibv_wc_status + 1 (0: none): the QP is in error */
};

static int verbs_open(const rs_rc_fabric_config *cfg, rs_rc_fabric **out, rs_error *err) {
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list)
        return rs_error_errno(
            err, RS_ENODEV, errno ? errno : ENOSYS,
            "no RDMA verbs device: ibv_get_device_list failed (kernel without RDMA support?)");
    if (n == 0) {
        ibv_free_device_list(list);
        return rs_error_set(err, RS_ENODEV, "no RDMA verbs device: ibv_get_device_list found none");
    }
    struct ibv_device *dev = NULL;
    const char *want = cfg && cfg->device && *cfg->device ? cfg->device : NULL;
    for (int i = 0; i < n; i++)
        if (!want || !strcmp(ibv_get_device_name(list[i]), want)) {
            dev = list[i];
            break;
        }
    if (!dev) {
        char names[256] = "";
        for (int i = 0; i < n; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, ibv_get_device_name(list[i]), sizeof names - strlen(names) - 1);
        }
        ibv_free_device_list(list);
        return rs_error_set(err, RS_ENODEV, "RDMA device '%s' not found (devices: %s)", want,
                            names);
    }
    rs_rc_fabric *f = calloc(1, sizeof *f);
    int rc;
    if (!f) {
        ibv_free_device_list(list);
        return rs_error_set(err, RS_ENOMEM, "verbs fabric: out of memory");
    }
    if (cfg) f->cfg = *cfg;
    if (!f->cfg.port) f->cfg.port = 1;
    snprintf(f->devname, sizeof f->devname, "%s", ibv_get_device_name(dev));
    f->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!f->ctx) {
        rc = rs_error_errno(err, RS_ENODEV, errno, "ibv_open_device(%s)", f->devname);
        goto fail;
    }
    if (!(f->pd = ibv_alloc_pd(f->ctx))) {
        rc = rs_error_errno(err, RS_ENODEV, errno, "ibv_alloc_pd(%s)", f->devname);
        goto fail;
    }
    if (ibv_query_port(f->ctx, f->cfg.port, &f->pattr)) {
        rc = rs_error_errno(err, RS_ENODEV, errno, "ibv_query_port(%s, port %u)", f->devname,
                            f->cfg.port);
        goto fail;
    }
    if (f->pattr.state != IBV_PORT_ACTIVE) {
        rc = rs_error_set(err, RS_ENODEV, "RDMA device %s port %u is %s, not ACTIVE", f->devname,
                          f->cfg.port, ibv_port_state_str(f->pattr.state));
        goto fail;
    }
    /* device limits: say what this device lacks instead of failing later in create_qp/reg_mr */
    struct ibv_device_attr_ex dx;
    memset(&dx, 0, sizeof dx);
    if (ibv_query_device_ex(f->ctx, NULL, &dx)) {
        rc = rs_error_errno(err, RS_ENODEV, errno, "ibv_query_device_ex(%s)", f->devname);
        goto fail;
    }
    if (dx.orig_attr.max_sge < RS_RC_MAX_SGE) {
        rc = rs_error_set(err, RS_ENOTSUP,
                          "RDMA device %s supports %d SGEs per work request; the RC protocol needs "
                          "%d",
                          f->devname, dx.orig_attr.max_sge, RS_RC_MAX_SGE);
        goto fail;
    }
    f->max_qp_wr = (uint32_t)dx.orig_attr.max_qp_wr;
    /* A software device's ACKs come from a kernel thread of a possibly emulated, loaded host: a
     * peer that is not scheduled for half a second would exhaust the usual budget (timeout 14 =
     * 67 ms, 7 retries) and put the QP in error for good. There, allow ~7.5 s (timeout 18). */
    {
        char path[4200];
        snprintf(path, sizeof path, "%s/device", f->ctx->device->ibdev_path);
        f->software = access(path, F_OK) != 0;
        f->ack_timeout = f->software ? 18 : 14;
    }
    f->odp_implicit = !!(dx.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
    f->gid_index = f->cfg.gid_index;
    if (f->gid_index < 0 && f->pattr.link_layer == IBV_LINK_LAYER_ETHERNET)
        f->gid_index = 0; /* RoCE needs a GID */
    if (f->gid_index >= (int)f->pattr.gid_tbl_len) {
        rc = rs_error_set(err, RS_ENODEV,
                          "RDMA device %s port %u has %d GIDs: gid_index %d is out of range",
                          f->devname, f->cfg.port, f->pattr.gid_tbl_len, f->gid_index);
        goto fail;
    }
    if (f->gid_index >= 0 && ibv_query_gid(f->ctx, f->cfg.port, f->gid_index, &f->gid)) {
        rc = rs_error_errno(err, RS_ENODEV, errno, "ibv_query_gid(%s, port %u, index %d)",
                            f->devname, f->cfg.port, f->gid_index);
        goto fail;
    }
    static const uint8_t zero_gid[16];
    if (f->gid_index >= 0 && memcmp(f->gid.raw, zero_gid, 16) == 0) {
        /* an empty table entry: a QP addressed with it never connects (the peer's replies go
         * nowhere), so refuse it here instead of timing out later */
        rc = rs_error_set(err, RS_ENODEV,
                          "RDMA device %s port %u: gid_index %d is an empty GID table entry "
                          "(ibv_devinfo -v lists the valid ones)",
                          f->devname, f->cfg.port, f->gid_index);
        goto fail;
    }
    fprintf(stderr,
            "component=rdma_fabric event=device_open device=%s port=%u link_layer=%s "
            "active_mtu=%d gid_index=%d odp_implicit=%d max_sge=%d max_qp_wr=%d max_cqe=%d "
            "max_mr_size=%" PRIu64 " software=%d ack_timeout=%u\n",
            f->devname, f->cfg.port,
            f->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
            128 << f->pattr.active_mtu, f->gid_index, f->odp_implicit, dx.orig_attr.max_sge,
            dx.orig_attr.max_qp_wr, dx.orig_attr.max_cqe, (uint64_t)dx.orig_attr.max_mr_size,
            f->software, f->ack_timeout);
    *out = f;
    return 0;
fail:
    if (f->pd) ibv_dealloc_pd(f->pd);
    if (f->ctx) ibv_close_device(f->ctx);
    free(f);
    return rc;
}

static void verbs_close(rs_rc_fabric *f) {
    if (!f) return;
    ibv_dealloc_pd(f->pd);
    ibv_close_device(f->ctx);
    free(f);
}

static int verbs_alloc_region(rs_rc_fabric *f, size_t len, rs_rc_region *out, rs_error *err) {
    memset(out, 0, sizeof *out);
    void *p = NULL;
    if (posix_memalign(&p, 4096, len) != 0)
        return rs_error_set(err, RS_ENOMEM, "verbs fabric: %zu bytes", len);
#ifdef RS_HAVE_NUMA
    if (f->cfg.numa_node >= 0 && numa_available() >= 0 && f->cfg.numa_node <= numa_max_node())
        numa_tonode_memory(p, len, f->cfg.numa_node);
#endif
    memset(p, 0, len);
    struct ibv_mr *mr = ibv_reg_mr(
        f->pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) {
        int e = errno;
        free(p);
        return rs_error_errno(err, RS_ENOMEM, e, "ibv_reg_mr of %zu bytes on %s", len, f->devname);
    }
    out->addr = p;
    out->len = len;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    out->impl = mr;
    return 0;
}

static void verbs_free_region(rs_rc_fabric *f, rs_rc_region *r) {
    (void)f;
    if (!r || !r->impl) return;
    ibv_dereg_mr(r->impl);
    free(r->addr);
    memset(r, 0, sizeof *r);
}

static int verbs_reg_local(rs_rc_fabric *f, void *addr, size_t len, rs_rc_region *out,
                           rs_error *err) {
    memset(out, 0, sizeof *out);
    struct ibv_mr *mr;
    if (addr == NULL) {
        /* the whole address space: an implicit ODP MR */
        if (!f->odp_implicit)
            return rs_error_set(err, RS_ENOTSUP, "%s has no implicit on-demand paging", f->devname);
        mr = ibv_reg_mr(f->pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
    } else {
        mr = ibv_reg_mr(f->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
    }
    if (!mr)
        return rs_error_errno(err, RS_ENOTSUP, errno, "ibv_reg_mr (local source) on %s",
                              f->devname);
    out->addr = addr;
    out->len = len;
    out->lkey = mr->lkey;
    out->impl = mr;
    return 0;
}

static void verbs_dereg_local(rs_rc_fabric *f, rs_rc_region *r) {
    (void)f;
    if (r && r->impl) ibv_dereg_mr(r->impl);
    if (r) memset(r, 0, sizeof *r);
}

/* One zero-length receive: a WRITE WITH IMM consumes it and places nothing in it. */
static int post_recv(rs_rc_ep *ep) {
    struct ibv_recv_wr wr = {.wr_id = 0, .sg_list = NULL, .num_sge = 0}, *bad = NULL;
    return ibv_post_recv(ep->qp, &wr, &bad);
}

/* Events are acknowledged as they are taken (wait_event), so the CQs can be destroyed here. */
static void ep_release(rs_rc_ep *ep) {
    if (ep->qp) ibv_destroy_qp(ep->qp);
    if (ep->rcq) ibv_destroy_cq(ep->rcq);
    if (ep->chan) ibv_destroy_comp_channel(ep->chan);
    if (ep->cq) ibv_destroy_cq(ep->cq);
    free(ep);
}

struct rs_rc_evch {
    struct ibv_comp_channel *chan; /* non-blocking fd: evch_wait polls it, then reads it dry */
};

/* An endpoint; with recvs > 0 its QP gets a receive CQ holding that many zero-length receives,
 * whose events go to ch, or to a channel of the endpoint's own when ch is NULL. */
static int ep_create(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_evch *ch, uint32_t recvs,
                     rs_rc_ep **out, rs_rc_ep_meta *meta, rs_error *err) {
    rs_rc_ep *ep = calloc(1, sizeof *ep);
    if (!ep) return rs_error_set(err, RS_ENOMEM, "verbs fabric: out of memory");
    int rc;
    uint32_t depth = f->cfg.max_send_wr ? f->cfg.max_send_wr : 1024;
    if (f->max_qp_wr && depth > f->max_qp_wr) depth = f->max_qp_wr; /* the device's limit */
    ep->f = f;
    if (!(ep->cq = ibv_create_cq(f->ctx, (int)depth, NULL, NULL, 0))) {
        rc = rs_error_errno(err, RS_ENOMEM, errno, "ibv_create_cq(%u) on %s", depth, f->devname);
        goto fail;
    }
    ep->recvs = recvs;
    if (ep->recvs && f->max_qp_wr && ep->recvs > f->max_qp_wr) ep->recvs = f->max_qp_wr;
    if (ep->recvs) {
        if (!ch && !(ep->chan = ibv_create_comp_channel(f->ctx))) {
            rc = rs_error_errno(err, RS_ENOMEM, errno, "ibv_create_comp_channel on %s", f->devname);
            goto fail;
        }
        if (!(ep->rcq = ibv_create_cq(f->ctx, (int)ep->recvs, ep, ch ? ch->chan : ep->chan, 0))) {
            rc = rs_error_errno(err, RS_ENOMEM, errno, "ibv_create_cq(%u, receive) on %s",
                                ep->recvs, f->devname);
            goto fail;
        }
    }
    struct ibv_qp_init_attr ia = {
        .send_cq = ep->cq,
        .recv_cq = ep->rcq ? ep->rcq : ep->cq,
        .cap = {.max_send_wr = depth,
                .max_recv_wr = ep->recvs ? ep->recvs : 1,
                .max_send_sge = RS_RC_MAX_SGE,
                .max_recv_sge = 1,
                .max_inline_data = f->cfg.inline_bytes},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    ep->qp = ibv_create_qp(f->pd, &ia);
    if (!ep->qp && ia.cap.max_inline_data) {
        /* the device cannot inline that much: go on without inline writes, and say so once */
        fprintf(stderr,
                "component=rdma_fabric event=inline_unavailable device=%s inline_bytes=%u "
                "reason=\"ibv_create_qp refused max_inline_data %u: writes are not inlined\"\n",
                f->devname, f->cfg.inline_bytes, f->cfg.inline_bytes);
        f->cfg.inline_bytes = 0;
        ia.cap.max_inline_data = 0;
        ep->qp = ibv_create_qp(f->pd, &ia);
    }
    if (!ep->qp) {
        rc = rs_error_errno(err, RS_ENOMEM, errno, "ibv_create_qp on %s (too many QPs or slots?)",
                            f->devname);
        goto fail;
    }
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = f->cfg.port,
        .qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        rc = rs_error_errno(err, RS_EIO, errno, "ibv_modify_qp(INIT) on %s", f->devname);
        goto fail;
    }
    for (uint32_t i = 0; i < ep->recvs; i++)
        if ((rc = post_recv(ep)) != 0) {
            rc = rs_error_errno(err, RS_EIO, rc, "ibv_post_recv (%u of %u receives) on %s", i + 1,
                                ep->recvs, f->devname);
            goto fail;
        }
    ep->psn = (uint32_t)(rs_mix64((uint64_t)getpid() ^ ep->qp->qp_num ^ (uintptr_t)ep) & 0xffffff);
    memset(meta, 0, sizeof *meta);
    meta->region_addr = (uint64_t)(uintptr_t)local->addr;
    meta->region_len = local->len;
    meta->rkey = local->rkey;
    meta->qpn = ep->qp->qp_num;
    meta->psn = ep->psn;
    meta->lid = f->pattr.lid;
    meta->port = f->cfg.port;
    meta->link_layer = f->pattr.link_layer;
    meta->mtu = (uint8_t)f->pattr.active_mtu;
    meta->gid_index = (uint8_t)(f->gid_index < 0 ? 0xff : f->gid_index);
    memcpy(meta->gid, f->gid.raw, 16);
    *out = ep;
    return 0;
fail:
    ep_release(ep);
    return rc;
}

static int verbs_ep_create(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_ep **out,
                           rs_rc_ep_meta *meta, rs_error *err) {
    return ep_create(f, local, NULL, f->cfg.recv_events, out, meta, err);
}

static int verbs_ep_create_on(rs_rc_fabric *f, const rs_rc_region *local, rs_rc_evch *ch,
                              uint32_t recvs, rs_rc_ep **out, rs_rc_ep_meta *meta, rs_error *err) {
    if (!ch || !recvs)
        return rs_error_set(err, RS_EINVAL,
                            "verbs fabric: ep_create_on needs a channel and receives");
    return ep_create(f, local, ch, recvs, out, meta, err);
}

static int verbs_ep_connect(rs_rc_ep *ep, const rs_rc_ep_meta *peer, rs_error *err) {
    rs_rc_fabric *f = ep->f;
    if (peer->link_layer != f->pattr.link_layer)
        return rs_error_set(err, RS_EINVAL, "peer link layer %u differs from %s's %u (IB vs RoCE)",
                            peer->link_layer, f->devname, f->pattr.link_layer);
    enum ibv_mtu mtu = f->pattr.active_mtu < (enum ibv_mtu)peer->mtu ? f->pattr.active_mtu
                                                                     : (enum ibv_mtu)peer->mtu;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = mtu,
        .dest_qp_num = peer->qpn,
        .rq_psn = peer->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = peer->lid, .sl = 0, .src_path_bits = 0, .port_num = f->cfg.port},
    };
    if (f->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)f->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return rs_error_errno(err, RS_ECONN, errno, "ibv_modify_qp(RTR) to qpn %u on %s", peer->qpn,
                              f->devname);
    struct ibv_qp_attr b = {
        .qp_state = IBV_QPS_RTS,
        .timeout = f->ack_timeout,
        .retry_cnt = 7,
        /* RNR NAKs come only for a WRITE WITH IMM to a peer with no receive posted: our clients
         * never let that happen (rc_client.c), so a peer that does misbehaves, and a finite count
         * (6 x min_rnr_timer 0.64 ms) puts only its own QP in error; 7 would retry forever while
         * this side's send queue fills */
        .rnr_retry = 6,
        .sq_psn = ep->psn,
        .max_rd_atomic = 1,
    };
    if (ibv_modify_qp(ep->qp, &b,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        return rs_error_errno(err, RS_ECONN, errno, "ibv_modify_qp(RTS) on %s", f->devname);
    ep->peer = *peer;
    ep->connected = 1;
    return 0;
}

static void verbs_ep_destroy(rs_rc_ep *ep) {
    if (ep) ep_release(ep);
}

static int verbs_write(rs_rc_ep *ep, const rs_rc_sge *sg, int n, uint64_t remote_addr,
                       uint32_t rkey, unsigned flags, uint64_t wr_id, rs_error *err) {
    if (!ep->connected) return rs_error_set(err, RS_ECONN, "verbs fabric: endpoint not connected");
    if (ep->failed)
        return rs_error_set(err, RS_ECONN,
                            "verbs fabric: QP %u on %s is in error since a '%s' completion",
                            ep->qp->qp_num, ep->f->devname,
                            ibv_wc_status_str((enum ibv_wc_status)(ep->failed - 1)));
    if (n < 1 || n > RS_RC_MAX_SGE)
        return rs_error_set(err, RS_EINVAL, "verbs fabric: %d SGEs (1..%d)", n, RS_RC_MAX_SGE);
    struct ibv_sge s[RS_RC_MAX_SGE];
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        s[i] = (struct ibv_sge){
            .addr = (uint64_t)(uintptr_t)sg[i].addr, .length = sg[i].len, .lkey = sg[i].lkey};
        total += sg[i].len;
    }
    if (rkey != ep->peer.rkey || remote_addr < ep->peer.region_addr ||
        total > ep->peer.region_len ||
        remote_addr - ep->peer.region_addr > ep->peer.region_len - total)
        return rs_error_set(err, RS_EINVAL,
                            "verbs fabric: write of %" PRIu64 " bytes at 0x%" PRIx64
                            " is outside the peer region",
                            total, remote_addr);
    struct ibv_send_wr wr =
                           {
                               .wr_id = wr_id,
                               .sg_list = s,
                               .num_sge = n,
                               .opcode = (flags & RS_RC_WR_NOTIFY) ? IBV_WR_RDMA_WRITE_WITH_IMM
                                                                   : IBV_WR_RDMA_WRITE,
                               .imm_data = 0,
                               .send_flags =
                                   ((flags & RS_RC_WR_SIGNALED) ? IBV_SEND_SIGNALED : 0u) |
                                   ((flags & RS_RC_WR_INLINE) && total <= ep->f->cfg.inline_bytes
                                        ? IBV_SEND_INLINE
                                        : 0u),
                               .wr.rdma = {.remote_addr = remote_addr, .rkey = rkey},
                           },
                       *bad = NULL;
    int rc = ibv_post_send(ep->qp, &wr, &bad);
    if (rc == ENOMEM) return rs_error_set(err, RS_EBUSY, "verbs fabric: send queue full");
    if (rc) return rs_error_errno(err, RS_EIO, rc, "ibv_post_send");
    return 0;
}

static int verbs_poll(rs_rc_ep *ep, rs_rc_wc *wc, int max) {
    struct ibv_wc w[16];
    int got = 0;
    while (got < max) {
        int want = max - got < 16 ? max - got : 16;
        int k = ibv_poll_cq(ep->cq, want, w);
        if (k < 0) return RS_EIO;
        for (int i = 0; i < k; i++) {
            wc[got + i].wr_id = w[i].wr_id;
            wc[got + i].status = (int)w[i].status;
            if (w[i].status != IBV_WC_SUCCESS && !ep->failed) {
                /* the QP is in error now: every later write fails; say why, once */
                ep->failed = (int)w[i].status + 1;
                fprintf(stderr,
                        "component=rdma_fabric event=completion_error device=%s qpn=%u "
                        "peer_qpn=%u status=\"%s\" vendor_err=%u\n",
                        ep->f->devname, ep->qp->qp_num, ep->peer.qpn,
                        ibv_wc_status_str(w[i].status), w[i].vendor_err);
            }
        }
        got += k;
        if (k < want) break;
    }
    return got;
}

static int verbs_drain_events(rs_rc_ep *ep) {
    if (!ep->rcq) return 0;
    struct ibv_wc w[16];
    int got = 0;
    for (;;) {
        int k = ibv_poll_cq(ep->rcq, 16, w);
        if (k < 0) return RS_EIO;
        for (int i = 0; i < k; i++) {
            if (w[i].status != IBV_WC_SUCCESS) {
                /* flushed (the QP is in error): nothing to re-post into */
                if (!ep->failed) ep->failed = (int)w[i].status + 1;
                continue;
            }
            if (post_recv(ep) != 0) return RS_EIO;
            got++;
        }
        if (k < 16) return got;
    }
}

static int verbs_arm_events(rs_rc_ep *ep) {
    if (!ep->rcq) return RS_EINVAL;
    if (ibv_req_notify_cq(ep->rcq, 0)) return RS_EIO;
    return verbs_drain_events(ep); /* those that completed before the arm took raise no event */
}

static int verbs_wait_event(rs_rc_ep *ep, uint64_t timeout_ns) {
    if (!ep->rcq) return RS_EINVAL;
    int got = verbs_drain_events(ep);
    if (got) return got;
    if ((got = verbs_arm_events(ep)) != 0) return got; /* arrived before the arm took */
    struct pollfd p = {.fd = ep->chan->fd, .events = POLLIN};
    int ms = (int)((timeout_ns + 999999) / 1000000);
    int r = poll(&p, 1, ms);
    if (r < 0) return errno == EINTR ? 0 : RS_EIO;
    if (r == 0) return 0;
    struct ibv_cq *cq;
    void *ctx;
    if (ibv_get_cq_event(ep->chan, &cq, &ctx)) return RS_EIO;
    ibv_ack_cq_events(cq, 1);
    return verbs_drain_events(ep);
}

static int verbs_evch_open(rs_rc_fabric *f, rs_rc_evch **out, rs_error *err) {
    rs_rc_evch *ch = calloc(1, sizeof *ch);
    if (!ch) return rs_error_set(err, RS_ENOMEM, "verbs fabric: out of memory");
    if (!(ch->chan = ibv_create_comp_channel(f->ctx))) {
        free(ch);
        return rs_error_errno(err, RS_ENOMEM, errno, "ibv_create_comp_channel on %s", f->devname);
    }
    int fl = fcntl(ch->chan->fd, F_GETFL);
    if (fl < 0 || fcntl(ch->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int e = errno;
        ibv_destroy_comp_channel(ch->chan);
        free(ch);
        return rs_error_errno(err, RS_EIO, e, "completion channel of %s: O_NONBLOCK", f->devname);
    }
    *out = ch;
    return 0;
}

static void verbs_evch_close(rs_rc_evch *ch) {
    if (!ch) return;
    ibv_destroy_comp_channel(ch->chan);
    free(ch);
}

static int verbs_evch_wait(rs_rc_evch *ch, int wake_fd, uint64_t timeout_ns) {
    struct pollfd p[2] = {{.fd = ch->chan->fd, .events = POLLIN},
                          {.fd = wake_fd, .events = POLLIN}};
    int ms = (int)((timeout_ns + 999999) / 1000000);
    int r = poll(p, wake_fd >= 0 ? 2 : 1, ms);
    if (r < 0) return errno == EINTR ? 0 : RS_EIO;
    int mask = (wake_fd >= 0 && (p[1].revents & POLLIN)) ? 2 : 0;
    if (p[0].revents & POLLIN) {
        struct ibv_cq *cq;
        void *ctx;
        while (ibv_get_cq_event(ch->chan, &cq, &ctx) == 0) { /* until EAGAIN: fd is non-blocking */
            ibv_ack_cq_events(cq, 1);
            mask |= 1;
        }
    }
    return mask;
}

static void *verbs_remote_window(rs_rc_ep *ep, uint64_t remote_addr, size_t len) {
    (void)ep;
    (void)remote_addr;
    (void)len;
    return NULL;
}

const rs_rc_fabric_ops rs_rc_fabric_verbs = {
    .name = "verbs",
    .open = verbs_open,
    .close = verbs_close,
    .alloc_region = verbs_alloc_region,
    .free_region = verbs_free_region,
    .reg_local = verbs_reg_local,
    .dereg_local = verbs_dereg_local,
    .ep_create = verbs_ep_create,
    .ep_connect = verbs_ep_connect,
    .ep_destroy = verbs_ep_destroy,
    .write = verbs_write,
    .poll = verbs_poll,
    .remote_window = verbs_remote_window,
    .notify_events = 1,
    .drain_events = verbs_drain_events,
    .wait_event = verbs_wait_event,
    .evch_open = verbs_evch_open,
    .evch_close = verbs_evch_close,
    .ep_create_on = verbs_ep_create_on,
    .arm_events = verbs_arm_events,
    .evch_wait = verbs_evch_wait,
};

#else /* !RS_HAVE_VERBS */

static int noverbs_open(const rs_rc_fabric_config *cfg, rs_rc_fabric **out, rs_error *err) {
    (void)cfg;
    (void)out;
    return rs_error_set(err, RS_ENOTSUP, "rdma: recbench was built without libibverbs-dev");
}

const rs_rc_fabric_ops rs_rc_fabric_verbs = {.name = "verbs", .open = noverbs_open};

#endif
