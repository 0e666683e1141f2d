/*
 * fuzz_rc_slot.c — libFuzzer target for what an RC (rdma/shm) server reads from a client's request
 * slot: the 192-byte descriptor, the encoded PSRequest and attachment after it, and the commit
 * word; then everything the server does with them (descriptor checks, payload decode, the shard
 * handler against a real KV engine, GET response modes incl. direct_sg and the fake GET modes,
 * and the response/status writes into the client's region).
 *
 * rs_rc_server_serve_slot() (rc_server_serve.c) runs exactly as a poller runs it, on one lane
 * built by hand over the real shm fabric (both regions live in this process): no threads, no
 * control plane. The server's lane region and the client's region are real shm mappings, so a write
 * outside them is caught by the fabric's bounds check or by ASan/SEGV.
 *
 * Input: byte 0 = mode bits (bit 0: keep the fuzzed slot identity fields — client/qp ids,
 * response/status addresses and rkeys — instead of the lane's true ones, so the checks themselves
 * are fuzzed too; bits 1-2: fake GET mode; bit 3: keep the fuzzed descriptor seq; bit 4: keep the
 * fuzzed commit state), then the request slot's bytes (descriptor, payload, tail).
 *
 * Checked beyond "no crash": every slot gets exactly one answer — a DONE status word carrying the
 * slot's seq — whose response_bytes fit the response slot, whose PSResponse header decodes, and
 * whose status matches the one in the status word.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "recstore/ps.h"
#include "recstore/rc.h"
#include "transport/rc/rc_server_internal.h"

#include "fuzz/fuzz_input.h"

#define FUZZ_VS         16
#define FUZZ_REQ_BYTES  4096u
#define FUZZ_RESP_BYTES 4096u

static rs_rc_server fs;
static srv_lane fl;
static rs_rc_region client_region;
static rs_ps_shard *fshard;
static uint64_t fseq;

static int fuzz_handle(void *ctx, const rs_ps_request *req, rs_ps_response *resp, void *rows_out,
                       size_t rows_cap, unsigned thread_slot) {
    return rs_ps_shard_handle(ctx, req, resp, rows_out, rows_cap, thread_slot);
}

static void fuzz_setup(void) {
    static int ready;
    if (ready) return;
    rs_error err = {0};
    rs_ps_shard_config sc = {
        .shard_id = 0,
        .num_shards = 1,
        .kv = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = FUZZ_VS, .capacity = 4096},
        .max_keys_per_request = 64};
    if (rs_ps_shard_open(&sc, &fshard, &err)) goto fail;
    rs_rc_options_default(&fs.o);
    fs.fab = &rs_rc_fabric_shm;
    fs.h = (rs_rc_handler){.ctx = fshard,
                           .shard_id = 0,
                           .value_size = FUZZ_VS,
                           .max_keys = 64,
                           .index_type = RS_KV_INDEX_PET_HASH,
                           .kv = rs_ps_shard_kv(fshard),
                           .handle = fuzz_handle};
    fs.nthreads = 1;
    if (fs.fab->open(NULL, &fs.f, &err)) goto fail;
    rs_rc_kv_mr_open(&fs); /* direct_sg sources, as rs_rc_server_start sets them up */
    fl.slots = 1;
    fl.req_bytes = FUZZ_REQ_BYTES;
    fl.resp_bytes = FUZZ_RESP_BYTES;
    fl.client_id = 7;
    fl.qp = 3;
    pthread_spin_init(&fl.wlock, PTHREAD_PROCESS_PRIVATE);
    size_t lane_len = (size_t)fl.slots * (fl.req_bytes + fl.resp_bytes);
    rs_rc_ep *cep = NULL;
    rs_rc_ep_meta smeta, cmeta;
    if (fs.fab->alloc_region(fs.f, lane_len, &fl.region, &err) ||
        fs.fab->alloc_region(fs.f, lane_len, &client_region, &err) ||
        fs.fab->ep_create(fs.f, &fl.region, &fl.ep, &smeta, &err) ||
        fs.fab->ep_create(fs.f, &client_region, &cep, &cmeta, &err) ||
        fs.fab->ep_connect(fl.ep, &cmeta, &err))
        goto fail;
    fl.peer = cmeta;
    fs.fab->ep_destroy(cep);    /* the client side only needs its region */
    shm_unlink(smeta.shm_name); /* no client maps the lane here: drop its name now */
    ready = 1;
    return;
fail:
    fprintf(stderr, "fuzz setup: %s\n", err.msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    fuzz_input in = {data, size};
    uint8_t mode = fuzz_u8(&in);
    uint8_t *slot = fl.region.addr; /* slot 0 of the lane */
    memset(slot, 0, fl.req_bytes);
    size_t n;
    const uint8_t *b = fuzz_bytes(&in, fl.req_bytes - sizeof(rs_rc_commit_word), &n);
    memcpy(slot, b, n);
    uint64_t seq = ++fseq;
    rs_rc_desc *d = (rs_rc_desc *)slot;
    uint64_t raddr = lane_resp_addr(&fl, 0);
    if (!(mode & 1)) {
        d->client_id = fl.client_id;
        d->qp_index = fl.qp;
        d->client_response_addr = raddr;
        d->client_status_addr = raddr + fl.resp_bytes - sizeof(rs_rc_status_word);
        d->client_response_rkey = d->client_status_rkey = fl.peer.rkey;
    }
    if (!(mode & 8)) d->seq = seq;
    rs_rc_commit_word *cw = (rs_rc_commit_word *)(slot + fl.req_bytes - sizeof *cw);
    cw->state = (mode & 16) ? (uint32_t)(d->reserved1) : RS_RC_STATE_READY;
    cw->checksum = 0;
    cw->seq = seq;
    fs.o.fake_get = (rs_rc_fake_get)((mode >> 1) & 3);
    memset(client_region.addr, 0xee, fl.resp_bytes); /* the client's response slot 0 */

    rc_prof prof;
    memset(&prof, 0, sizeof prof);
    rs_rc_server_serve_slot(&fs, &fl, 0, seq, 0, &prof, NULL);

    const uint8_t *resp_slot = client_region.addr;
    rs_rc_status_word w;
    memcpy(&w, resp_slot + fl.resp_bytes - sizeof w, sizeof w);
    FUZZ_CHECK(w.seq == seq && (w.state == RS_RC_STATE_DONE || w.state == RS_RC_STATE_DONE_SG));
    FUZZ_CHECK(w.response_bytes <= fl.resp_bytes - RS_RC_TAIL_BYTES);
    FUZZ_CHECK(w.msg_bytes <= w.response_bytes);
    size_t rows_len = w.response_bytes - w.msg_bytes;
    rs_ps_response *r = malloc(sizeof *r);
    rs_error err = {0};
    int rc = rs_ps_response_decode(resp_slot + rows_len, w.msg_bytes, rows_len ? resp_slot : NULL,
                                   rows_len, r, &err);
    if (rc) fprintf(stderr, "response does not decode: %s\n", err.msg);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(r->status == w.status);
    FUZZ_CHECK(r->status == RS_PS_OK || r->error[0]);
    if (getenv("FUZZ_VERBOSE")) /* for checking what seeds reach */
        fprintf(stderr, "status %d rows %zu found %u error '%s' reply '%.40s'\n", r->status,
                rows_len, r->num_found, r->error, r->reply);
    free(r);
    return 0;
}
