/*
 * brpc_frame.c — baidu_std header parsing/writing and the RpcMeta unpack arena (see
 * brpc_frame.h for the frame picture). Used by both ends of the brpc transport.
 */
#if RS_HAVE_PROTOBUF_C
#include "transport/brpc_frame.h"

#include <stdlib.h>
#include <string.h>

static uint32_t get_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int rs_brpc_header_parse(const uint8_t *p, uint64_t max_body, rs_brpc_header *h, rs_error *err) {
    if (memcmp(p, "PRPC", 4) != 0)
        return rs_error_set(err, RS_EPROTO,
                            "bad baidu_std magic %02x %02x %02x %02x (expected \"PRPC\")", p[0],
                            p[1], p[2], p[3]);
    h->body_size = get_be32(p + 4);
    h->meta_size = get_be32(p + 8);
    if (h->body_size > max_body)
        return rs_error_set(err, RS_EPROTO, "body_size %u exceeds the limit of %llu bytes",
                            h->body_size, (unsigned long long)max_body);
    if (h->meta_size > h->body_size)
        return rs_error_set(err, RS_EPROTO, "meta_size %u is larger than body_size %u",
                            h->meta_size, h->body_size);
    return 0;
}

void rs_brpc_header_write(uint8_t *p, uint32_t body_size, uint32_t meta_size) {
    memcpy(p, "PRPC", 4);
    put_be32(p + 4, body_size);
    put_be32(p + 8, meta_size);
}

static void *arena_alloc(void *data, size_t size) {
    rs_brpc_arena *a = data;
    size_t at = (a->used + 15) & ~(size_t)15;
    if (at + size <= sizeof a->buf) {
        a->used = at + size;
        return a->buf + at;
    }
    return malloc(size ? size : 1);
}

static void arena_free(void *data, void *ptr) {
    rs_brpc_arena *a = data;
    uint8_t *p = ptr;
    if (p >= a->buf && p < a->buf + sizeof a->buf) return;
    free(ptr);
}

void rs_brpc_arena_init(rs_brpc_arena *a) {
    a->allocator.alloc = arena_alloc;
    a->allocator.free = arena_free;
    a->allocator.allocator_data = a;
    a->used = 0;
}

int rs_brpc_meta_unpack(rs_brpc_arena *a, const uint8_t *p, size_t len, Brpc__Policy__RpcMeta **out,
                        rs_error *err) {
    rs_brpc_arena_reset(a);
    *out = brpc__policy__rpc_meta__unpack(&a->allocator, len, p);
    if (!*out) return rs_error_set(err, RS_EPROTO, "RpcMeta of %zu bytes does not parse", len);
    return 0;
}

void rs_brpc_meta_free(rs_brpc_arena *a, Brpc__Policy__RpcMeta *m) {
    if (m) brpc__policy__rpc_meta__free_unpacked(m, &a->allocator);
}
#endif
