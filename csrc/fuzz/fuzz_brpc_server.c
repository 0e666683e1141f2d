/*
 * fuzz_brpc_server.c — libFuzzer target for what a brpc (baidu_std) server reads from a client:
 * the 12-byte frame header, RpcMeta (protobuf-c), the PSRequest and its attachment, and then the
 * shard handler that executes the decoded request against a real KV engine.
 * fuzz-requires: protobuf_c
 *
 * brpc_server.c is #included so the connection's frame loop (conn_process / handle_frame /
 * in_make_room, all static) runs exactly as in the server, without sockets or threads: the input is
 * the byte stream a client sent, held in an exact-size buffer so ASan sees any read past what
 * arrived. The fuzz build links the core archive, whose brpc_server.o is never pulled in because
 * nothing here references the registry.
 *
 * Checked beyond "no crash": every response the server queued is a well-formed baidu_std frame
 * (header parses, RpcMeta unpacks with a response part, PSResponse decodes, attachment sizes agree)
 * — a server must never send what its own clients cannot parse.
 */
#include "transport/brpc_server.c"

#include "fuzz/fuzz_input.h"

#define FUZZ_VS 16

static brpc_server fsrv;
static brpc_worker fworker;

static void fuzz_setup(void) {
    static int ready;
    if (ready) return;
    rs_error err = {0};
    rs_ps_shard_config sc = {
        .shard_id = 0,
        .num_shards = 2,
        .kv = {.index_type = RS_KV_INDEX_PET_HASH, .value_size = FUZZ_VS, .capacity = 4096},
        .max_keys_per_request = 64};
    if (rs_ps_shard_open(&sc, &fsrv.shard, &err)) {
        fprintf(stderr, "fuzz setup: %s\n", err.msg);
        abort();
    }
    fsrv.lfd = fsrv.stopfd = -1;
    fsrv.max_body = RS_PS_DEFAULT_MAX_BODY_BYTES;
    fsrv.nworkers = 1;
    fsrv.workers = &fworker;
    fworker.srv = &fsrv;
    fworker.epfd = -1;
    rs_brpc_arena_init(&fworker.arena);
    ready = 1;
}

/* Every queued response must parse as a baidu_std response frame. */
static void check_output(brpc_sconn *c) {
    size_t i = 0;
    rs_brpc_arena arena;
    rs_brpc_arena_init(&arena);
    while (i < c->nsegs) {
        const uint8_t *h = c->out + c->segs[i].off;
        size_t hlen = c->segs[i].len;
        rs_brpc_header hdr;
        rs_error err = {0};
        FUZZ_CHECK(hlen >= RS_BRPC_HEADER_BYTES);
        FUZZ_CHECK(rs_brpc_header_parse(h, RS_PS_DEFAULT_MAX_BODY_BYTES, &hdr, &err) == 0);
        FUZZ_CHECK(hdr.meta_size <= hlen - RS_BRPC_HEADER_BYTES);
        Brpc__Policy__RpcMeta *meta = NULL;
        FUZZ_CHECK(
            rs_brpc_meta_unpack(&arena, h + RS_BRPC_HEADER_BYTES, hdr.meta_size, &meta, &err) == 0);
        size_t att = meta->has_attachment_size ? (size_t)meta->attachment_size : 0;
        size_t msg_len = hlen - RS_BRPC_HEADER_BYTES - hdr.meta_size;
        FUZZ_CHECK(hdr.body_size == hdr.meta_size + msg_len + att);
        FUZZ_CHECK(!meta->request);
        int rpc_error =
            meta->response && meta->response->has_error_code && meta->response->error_code;
        rs_brpc_meta_free(&arena, meta);
        i++;
        const uint8_t *rows = NULL;
        if (att) {
            FUZZ_CHECK(i < c->nsegs && c->segs[i].len == att);
            rows = c->out + c->segs[i].off;
            fuzz_touch(rows, att);
            i++;
        }
        rs_ps_response *resp = malloc(sizeof *resp);
        int rc = rs_ps_response_decode(h + RS_BRPC_HEADER_BYTES + hdr.meta_size, msg_len, rows, att,
                                       resp, &err);
        FUZZ_CHECK(rc == 0);
        FUZZ_CHECK(!rpc_error || msg_len == 0);
        free(resp);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    brpc_sconn *c = calloc(1, sizeof *c);
    c->fd = -1;
    c->w = &fworker;
    c->in = fuzz_dup(data, size);
    c->in_len = c->in_cap = size;
    int closed = conn_process(c);
    check_output(c);
    /* the buffer sizing for the next read (what recv would be given): bounded by max_body */
    if (!closed) {
        int rc = in_make_room(c);
        if (!rc)
            FUZZ_CHECK(c->in_cap > c->in_len && c->in_cap <= RS_BRPC_IN_INITIAL * 2 +
                                                                 RS_BRPC_HEADER_BYTES +
                                                                 fsrv.max_body * 2);
    }
    free(c->in);
    free(c->out);
    free(c->segs);
    free(c);
    return 0;
}
