/*
 * fuzz_grpc_message.c — libFuzzer target for what the gRPC transport decodes itself: a received
 * message (a grpc_byte_buffer of one or more slices, or a gzip/deflate-compressed one) flattened
 * by rs_grpc_message_span, the PSRequest decode + shard handler + reply encode of the server
 * (rs_grpc_ps_reply, for a unary method or for a Stream message naming its own), and the client's
 * decode of that reply. The PSRequest/PSResponse bytes themselves
 * go through the shared codec (also fuzzed alone by fuzz_ps_codec).
 * fuzz-requires: grpc
 *
 * grpc_server.c is #included so rs_grpc_ps_reply runs as a worker runs it, with the context of a
 * worker struct made by hand with a real shard and slice pool (worker_ctx); no server, channel or
 * completion queue.
 *
 * Input: byte 0 = shape (bits 0-1: op Get/Put/Update/Command; bits 2-4: number of slices - 1;
 * bit 5: hand the bytes to gRPC as a compressed byte buffer — gzip when bit 6, else deflate — so
 * gRPC's own decompression runs on them; bit 7: a Stream message, the op read from the message's
 * method field instead), then the message bytes.
 *
 * Checked beyond "no crash": the server's reply, decoded the way the client decodes it, is a
 * valid PSResponse whose rows fit the GET's rows buffer (num_keys x value_size); an error status
 * carries a message.
 */
#include "transport/grpc_server.c"

#include <grpc/compression.h>

#include "fuzz/fuzz_input.h"

#define FUZZ_VS 16

static rs_grpc_server fsrv;
static rs_grpc_worker fw;
static rs_grpc_scratch client_scratch;

static void fuzz_setup(void) {
    static int ready;
    if (ready) return;
    grpc_init();
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
    fw.srv = &fsrv;
    if (rs_grpc_slice_pool_create(4, &fw.rows) != 0) abort();
    ready = 1;
}

static grpc_byte_buffer *make_message(const uint8_t *p, size_t n, unsigned nslices, int compress,
                                      int gzip) {
    grpc_slice parts[8];
    size_t done = 0;
    for (unsigned i = 0; i < nslices; i++) {
        size_t len = i + 1 == nslices ? n - done : n / nslices;
        parts[i] = grpc_slice_from_copied_buffer((const char *)p + done, len);
        done += len;
    }
    grpc_byte_buffer *bb =
        compress ? grpc_raw_compressed_byte_buffer_create(
                       parts, nslices, gzip ? GRPC_COMPRESS_GZIP : GRPC_COMPRESS_DEFLATE)
                 : grpc_raw_byte_buffer_create(parts, nslices);
    for (unsigned i = 0; i < nslices; i++)
        grpc_slice_unref(parts[i]);
    return bb;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    fuzz_input in = {data, size};
    uint8_t shape = fuzz_u8(&in);
    rs_ps_op op = shape & 128 ? RS_PS_OP_FROM_MESSAGE : (rs_ps_op)((shape & 3) + 1);
    unsigned nslices = ((shape >> 2) & 7) + 1;
    grpc_byte_buffer *req = make_message(in.p, in.left, nslices, shape & 32, shape & 64);

    /* what the server would do with it: the request decodes against its own copy */
    rs_grpc_span span;
    rs_ps_request r;
    rs_error err = {0};
    size_t rows_cap = 0;
    if (rs_grpc_message_span(req, &fw.scratch, &span, &err) == 0 &&
        rs_ps_request_decode(op, span.data ? span.data : (const uint8_t *)"", span.len, NULL, 0, &r,
                             &err) == 0 &&
        r.op == RS_PS_GET)
        rows_cap = (size_t)r.num_keys * FUZZ_VS;
    rs_grpc_call_ctx ctx = worker_ctx(&fw);
    grpc_byte_buffer *reply = rs_grpc_ps_reply(&ctx, op, req);
    grpc_byte_buffer_destroy(req);
    FUZZ_CHECK(reply != NULL);

    /* and what a client makes of the reply */
    rs_ps_response *resp = malloc(sizeof *resp);
    rs_error e2 = {0};
    int rc = rs_grpc_message_span(reply, &client_scratch, &span, &e2);
    FUZZ_CHECK(rc == 0);
    rc = rs_ps_response_decode(span.data ? span.data : (const uint8_t *)"", span.len, NULL, 0, resp,
                               &e2);
    if (rc) fprintf(stderr, "reply does not decode: %s\n", e2.msg);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(resp->rows_len <= rows_cap);
    FUZZ_CHECK(resp->status == RS_PS_OK || resp->error[0]);
    fuzz_touch(resp->rows, resp->rows_len);
    free(resp);
    grpc_byte_buffer_destroy(reply);
    return 0;
}
