/* test_recstore_wire.c — RecStore's wire pieces in C: CityHash64 v1.1 against the published test
 * vectors (CityHash v1.1 city-test.cc, first column: CityHash64(data + i*i, i) over its
 * pseudo-random data), RecStore's shard routing, the row block (validation naming offsets, the
 * worked example of docs/recstore-wire.md, the writer, the client's reader), the engine's strided
 * row gather the GET reply is built with, and the ParameterService semantics on a real shard: GET
 * misses as dim 0 (also between hits), SGD updates, tags, tables, commands. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recstore/recstore_wire.h"
#include "rs_test.h"
#include "support/engine_dir.h"

/* CityHash64 of city-test.cc's data at offset i*i, length i, for i = 0..82 (the v1.1 test table's
 * first column; covers the 0..16, 17..32, 33..64 and > 64 byte paths). */
static const uint64_t city_vectors[] = {
    0x9ae16a3b2f90404full, 0x541150e87f415e96ull, 0x0f3786a4b25827c1ull, 0xef923a7a1af78eabull,
    0x11df592596f41d88ull, 0x831f448bdc5600b3ull, 0x3eca803e70304894ull, 0x1b5a063fb4c7f9f1ull,
    0xa0f10149a0e538d6ull, 0xfb8d9c70660b910bull, 0x236827beae282a46ull, 0xc385e435136ecf7cull,
    0xe3f6828b6017086dull, 0x851fff285561dca0ull, 0x61152a63595a96d9ull, 0x44473e03be306c88ull,
    0x03ead5f21d344056ull, 0x6abbfde37ee03b5bull, 0x0943e7ed63b3c080ull, 0xd72ce05171ef8a1aull,
    0x4182832b52d63735ull, 0xd6cdae892584a2cbull, 0x5c8e90bc267c5ee4ull, 0xbbd7f30ac310a6f3ull,
    0x36a097aa49519d97ull, 0x0dc78cb032c49217ull, 0x441593e0da922dfeull, 0x2ba3883d71cc2133ull,
    0xf2b6d2adf8423600ull, 0x38fffe7f3680d63cull, 0xb7477bf0b9ce37c6ull, 0x55bdb0e71e3edebdull,
    0x0782fa1b08b475e7ull, 0xc5dc19b876d37a80ull, 0x5e1141711d2d6706ull, 0x782edf6da001234full,
    0xd26285842ff04d44ull, 0xc6ab830865a6bae6ull, 0x044b3a1929232892ull, 0x4b603d7932a8de4full,
    0x4ec0b54cf1566affull, 0xed8b7a4b34954ff7ull, 0x5d28b43694176c26ull, 0x6a1ef3639e1d202eull,
    0x159f4d9e0307b111ull, 0xcc0a840725a7e25bull, 0xa2b27ee22f63c3f1ull, 0xd8f2f234899bcab3ull,
    0x584f28543864844full, 0xa94be46dd9aa41afull, 0x9a87bea227491d20ull, 0x27688c24958d1a5cull,
    0x5d1d37790a1873adull, 0x1f03fd18b711eea9ull, 0xf0316f286cf527b6ull, 0x297008bcb3e3401dull,
    0x043c6252411ee3beull, 0xce38a9a54fad6599ull, 0x0270a9305fef70cfull, 0xe71be7c28e84d119ull,
    0xb5b58c24b53aaa19ull, 0x44dd59bd301995cfull, 0xb4d4789eb6f2630bull, 0x12807833c463737cull,
    0xe88419922b87176full, 0x105191e0ec8f7f60ull, 0xa5b88bf7399a9f07ull, 0xd08c3f5747d84f50ull,
    0x2f72d12a40044b4bull, 0xaa1f61fdc5c2e11eull, 0x9489b36fe2246244ull, 0x358d7c0476a044cdull,
    0xb0c48df14275265aull, 0xdaa70bb300956588ull, 0x4ec97a20b6c4c7c2ull, 0x5c3323628435a2e8ull,
    0xc1ef26bea260abdbull, 0x6be7381b115d653aull, 0xae3eece1711b2105ull, 0x376c28588b8fb389ull,
    0x58d943503bb6748full, 0xdfff5989f5cfd9a1ull, 0x7fb19eb1a496e8f5ull,
};

static void test_cityhash_published_vectors(void) {
    enum { SIZE = 1 << 20 };
    static uint8_t data[SIZE];
    const uint64_t k0 = 0xc3a5c85c97cb3127ull;
    uint64_t a = 9, b = 777;
    for (int i = 0; i < SIZE; i++) {
        a += b;
        b += a;
        a = (a ^ (a >> 41)) * k0;
        b = (b ^ (b >> 41)) * k0 + (uint64_t)i;
        data[i] = (uint8_t)(b >> 37);
    }
    for (size_t i = 0; i < sizeof city_vectors / sizeof city_vectors[0]; i++) {
        uint64_t h = rs_cityhash64(data + i * i, i);
        if (h != city_vectors[i]) {
            fprintf(stderr, "CityHash64 length %zu: got %016llx want %016llx\n", i,
                    (unsigned long long)h, (unsigned long long)city_vectors[i]);
            rs_test_failed_checks++;
        }
    }
}

static void test_recstore_shard_routing(void) {
    /* keys hash as their 8 little-endian bytes */
    uint64_t k = 1;
    RS_CHECK_EQ(rs_recstore_shard_of(1, 2, RS_RS_HASH_CITY), rs_cityhash64(&k, 8) % 2);
    RS_CHECK_EQ(rs_recstore_shard_of(12345, 1, RS_RS_HASH_CITY), 0);
    RS_CHECK(rs_cityhash64(&k, 8) == 0x523be90bb03b5a61ull);
    /* keys 1..20 over 2 and 4 shards, 1001..1003 and 100..107 over 2 (RecStore's test keys) */
    static const int two[20] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0};
    static const int four[20] = {1, 1, 0, 3, 0, 3, 3, 3, 1, 1, 1, 0, 0, 3, 1, 3, 0, 3, 2, 0};
    for (uint64_t key = 1; key <= 20; key++) {
        RS_CHECK_EQ(rs_recstore_shard_of(key, 2, RS_RS_HASH_CITY), two[key - 1]);
        RS_CHECK_EQ(rs_recstore_shard_of(key, 4, RS_RS_HASH_CITY), four[key - 1]);
    }
    static const int k100[8] = {1, 0, 0, 1, 0, 1, 0, 1};
    for (uint64_t key = 100; key < 108; key++)
        RS_CHECK_EQ(rs_recstore_shard_of(key, 2, RS_RS_HASH_CITY), k100[key - 100]);
    RS_CHECK_EQ(rs_recstore_shard_of(1001, 2, RS_RS_HASH_CITY), 0);
    RS_CHECK_EQ(rs_recstore_shard_of(1003, 2, RS_RS_HASH_CITY), 1);
    RS_CHECK_EQ(rs_recstore_shard_of(7, 4, RS_RS_HASH_SIMPLE_MOD), 3);
    rs_rs_hash_method m;
    rs_error e = {0};
    RS_CHECK_EQ(rs_rs_hash_method_parse("simple_mod", &m, &e), 0);
    RS_CHECK_EQ(m, RS_RS_HASH_SIMPLE_MOD);
    RS_CHECK_EQ(rs_rs_hash_method_parse("rs_mix64", &m, &e), RS_EINVAL);
    RS_CHECK(strstr(e.msg, "rs_mix64") != NULL);
}

static void put32(uint8_t *p, int32_t v) {
    memcpy(p, &v, 4);
}

static void test_block_worked_example(void) {
    /* keys 1 -> [1.0, 2.0] and 7 -> missing: 44 bytes (docs/recstore-wire.md) */
    static const uint8_t want[44] = {2, 0,    0, 0, 20, 0, 0, 0, 32, 0, 0, 0,    1,    0, 0,
                                     0, 0,    0, 0, 0,  2, 0, 0, 0,  0, 0, 0x80, 0x3f, 0, 0,
                                     0, 0x40, 7, 0, 0,  0, 0, 0, 0,  0, 0, 0,    0,    0};
    uint64_t keys[2] = {1, 7};
    float rows[4] = {1.0f, 2.0f, 9.0f, 9.0f};
    uint8_t found[2] = {1, 0};
    uint8_t out[64];
    RS_CHECK(rs_rsblock_max_size(2, 2) >= 44);
    rs_rsblock_writer w;
    rs_rsblock_writer_init(&w, out, 2);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, 1, 2, rows, found);
    rs_rsblock_writer_add(&w, (const uint8_t *)(keys + 1), 1, 2, rows + 2, found + 1);
    RS_CHECK_EQ(rs_rsblock_writer_len(&w), 44);
    RS_CHECK(memcmp(out, want, 44) == 0);
    uint32_t n = 0;
    rs_error e = {0};
    RS_CHECK_EQ(rs_rsblock_validate(out, 44, &n, &e), 0);
    RS_CHECK_EQ(n, 2);
    uint64_t key;
    int32_t dim;
    const uint8_t *v = rs_rsblock_item(out, n, 1, &key, &dim);
    RS_CHECK_EQ(key, 7);
    RS_CHECK_EQ(dim, 0);
    v = rs_rsblock_item(out, n, 0, &key, &dim);
    float f;
    memcpy(&f, v + 4, 4);
    RS_CHECK(key == 1 && dim == 2 && f == 2.0f);
}

static void test_block_validation_names_offsets(void) {
    uint8_t b[44];
    uint64_t keys[2] = {1, 7};
    float rows[4] = {1, 2, 3, 4};
    uint8_t found[2] = {1, 1};
    rs_rsblock_writer w;
    rs_rsblock_writer_init(&w, b, 2);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, 2, 1, rows, found);
    size_t len = rs_rsblock_writer_len(&w); /* 4 + 8 + 2 * 16 = 44 */
    RS_CHECK_EQ(len, 44);
    uint32_t n;
    rs_error e = {0};
    RS_CHECK_EQ(rs_rsblock_validate(b, len, &n, &e), 0);
    RS_CHECK_EQ(rs_rsblock_validate(b, 3, &n, &e), RS_EPROTO);
    RS_CHECK_EQ(rs_rsblock_validate(b, len - 1, &n, &e), RS_EPROTO);
    uint8_t bad[44];
    memcpy(bad, b, len);
    put32(bad + 8, 40); /* end[1] smaller than needed */
    RS_CHECK_EQ(rs_rsblock_validate(bad, len, &n, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "byte offset 8") != NULL);
    memcpy(bad, b, len);
    put32(bad + 4, 10); /* end[0] shorter than an item head */
    RS_CHECK_EQ(rs_rsblock_validate(bad, len, &n, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "byte offset 4") != NULL);
    memcpy(bad, b, len);
    put32(bad + 12 + 8, 2); /* dim disagrees with the span */
    RS_CHECK_EQ(rs_rsblock_validate(bad, len, &n, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "dim 2") != NULL);
    memcpy(bad, b, len);
    put32(bad, 1000);
    RS_CHECK_EQ(rs_rsblock_validate(bad, len, &n, &e), RS_EPROTO);
    put32(bad, -1);
    RS_CHECK_EQ(rs_rsblock_validate(bad, len, &n, &e), RS_EPROTO);
    uint8_t empty[4] = {0};
    RS_CHECK_EQ(rs_rsblock_validate(empty, 4, &n, &e), 0);
    RS_CHECK_EQ(n, 0);
}

/* The client's reader of GET replies: the all-found layout (checked in the copy pass), misses,
 * other dims (cut / zero-padded), and every fault rs_rsblock_validate names, including faults the
 * all-found check alone would not see (a dim that disagrees while every offset fits). */
static void test_block_read_rows(void) {
    enum { N = 5, D = 3 };
    uint64_t keys[N] = {11, 12, 13, 14, 15};
    float src[N * D], rows[N * D];
    uint8_t found[N] = {1, 1, 1, 1, 1};
    for (int i = 0; i < N * D; i++)
        src[i] = (float)i + 0.5f;
    uint8_t b[4 + N * (4 + 12 + 4 * D)];
    rs_rsblock_writer w;
    rs_rsblock_writer_init(&w, b, N);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, N, D, src, found);
    size_t len = rs_rsblock_writer_len(&w);
    RS_CHECK_EQ(len, sizeof b);
    uint32_t got = 0;
    rs_error e = {0};
    memset(rows, 0xff, sizeof rows);
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len, N, 4 * D, (uint8_t *)rows, &got, &e), 0);
    RS_CHECK_EQ(got, N);
    RS_CHECK(memcmp(rows, src, sizeof rows) == 0);
    /* another item count than asked for */
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len, N + 1, 4 * D, (uint8_t *)rows, &got, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "5 items answers 6 keys") != NULL);
    /* every offset fits the all-found layout but item 2's dim does not: validate's error */
    uint8_t bad[sizeof b];
    memcpy(bad, b, len);
    size_t item2 = 4 + 4 * N + 2 * (12 + 4 * D);
    put32(bad + item2 + 8, D - 1);
    RS_CHECK_EQ(rs_rsblock_read_rows(bad, len, N, 4 * D, (uint8_t *)rows, &got, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "item 2") != NULL && strstr(e.msg, "dim 2") != NULL);
    memcpy(bad, b, len);
    put32(bad + 4 + 4 * 3, 1000); /* end[3] past the block */
    RS_CHECK_EQ(rs_rsblock_read_rows(bad, len, N, 4 * D, (uint8_t *)rows, &got, &e), RS_EPROTO);
    RS_CHECK(strstr(e.msg, "byte offset 16") != NULL);
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len - 1, N, 4 * D, (uint8_t *)rows, &got, &e), RS_EPROTO);
    /* misses between hits: dim-0 items read as zero rows */
    uint8_t some[N] = {1, 0, 1, 0, 0};
    rs_rsblock_writer_init(&w, b, N);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, N, D, src, some);
    len = rs_rsblock_writer_len(&w);
    memset(rows, 0xff, sizeof rows);
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len, N, 4 * D, (uint8_t *)rows, &got, &e), 0);
    RS_CHECK_EQ(got, 2);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            RS_CHECK(rows[i * D + j] == (some[i] ? src[i * D + j] : 0.0f));
    /* rows of another dim: a wider item is cut to the row, a narrower one zero-padded */
    rs_rsblock_writer_init(&w, b, N);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, N, D, src, found);
    len = rs_rsblock_writer_len(&w);
    float wide[N * 2];
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len, N, 4 * 2, (uint8_t *)wide, &got, &e), 0);
    for (int i = 0; i < N; i++)
        RS_CHECK(wide[i * 2] == src[i * D] && wide[i * 2 + 1] == src[i * D + 1]);
    float pad[N * 4];
    RS_CHECK_EQ(rs_rsblock_read_rows(b, len, N, 4 * 4, (uint8_t *)pad, &got, &e), 0);
    for (int i = 0; i < N; i++)
        RS_CHECK(pad[i * 4] == src[i * D] && pad[i * 4 + 2] == src[i * D + 2] &&
                 pad[i * 4 + 3] == 0);
    RS_CHECK_EQ(got, N);
}

static rs_ps_shard *open_shard(uint32_t value_size) {
    rs_ps_shard_config cfg = {.shard_id = 0, .num_shards = 1, .max_keys_per_request = 500};
    cfg.kv.index_type = RS_KV_INDEX_PET_HASH;
    cfg.kv.value_size = value_size;
    cfg.kv.capacity = 4096;
    rs_ps_shard *s = NULL;
    rs_error e = {0};
    if (rs_ps_shard_open(&cfg, &s, &e)) fprintf(stderr, "shard: %s\n", e.msg);
    return s;
}

/* A ParameterService on a fresh shard of dim-float rows (NULL after a failed check). */
static rs_rsps *open_service(uint32_t dim, rs_ps_shard **sh) {
    *sh = open_shard(dim * 4);
    RS_CHECK(*sh != NULL);
    if (!*sh) return NULL;
    rs_rsps *s = NULL;
    rs_error e = {0};
    RS_CHECK_EQ(rs_rsps_create(*sh, NULL, &s, &e), 0);
    if (!s) rs_ps_shard_close(*sh);
    return s;
}

/* A block of n items of dim d: key keys[i], values base + i + j/10. */
static size_t make_block(uint8_t *out, const uint64_t *keys, uint32_t n, uint32_t d, float base) {
    float *rows = malloc(sizeof(float) * n * d + 4);
    uint8_t *found = malloc(n + 1);
    for (uint32_t i = 0; i < n; i++) {
        found[i] = 1;
        for (uint32_t j = 0; j < d; j++)
            rows[i * d + j] = base + (float)i + (float)j / 10;
    }
    rs_rsblock_writer w;
    rs_rsblock_writer_init(&w, out, n);
    rs_rsblock_writer_add(&w, (const uint8_t *)keys, n, d, rows, found);
    free(rows);
    free(found);
    return rs_rsblock_writer_len(&w);
}

static void test_service_get_put_update(void) {
    enum { D = 4, N = 600 };
    rs_ps_shard *sh = NULL;
    rs_rsps *s = open_service(D, &sh);
    if (!s) return;
    rs_error e = {0};
    static uint64_t keys[N];
    for (int i = 0; i < N; i++)
        keys[i] = 1000 + (uint64_t)i;
    size_t cap = rs_rsblock_max_size(N, D);
    uint8_t *blk = malloc(cap), *out = malloc(cap);
    size_t len = make_block(blk, keys, N / 2, D, 1.0f); /* first half stored */
    rs_rsps_result res;
    RS_CHECK_EQ(rs_rsps_put(s, blk, len, 0, &res), RS_RSPS_OK);
    size_t olen = 0;
    RS_CHECK_EQ(rs_rsps_get_reply_max(s, N * 8), cap);
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)keys, N * 8, out, cap, &olen, 0, &res), RS_RSPS_OK);
    uint32_t n = 0;
    RS_CHECK_EQ(rs_rsblock_validate(out, olen, &n, &e), 0);
    RS_CHECK_EQ(n, N);
    RS_CHECK_EQ(olen, 4 + 4 * N + N * 12 + (N / 2) * D * 4);
    uint64_t key;
    int32_t dim;
    const uint8_t *v = rs_rsblock_item(out, n, 10, &key, &dim);
    float f[D];
    memcpy(f, v, sizeof f);
    RS_CHECK(key == keys[10] && dim == D && f[0] == 11.0f && fabsf(f[3] - 11.3f) < 1e-6f);
    rs_rsblock_item(out, n, N - 1, &key, &dim);
    RS_CHECK(key == keys[N - 1] && dim == 0);

    /* errors keep the service alive */
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)keys, 0, out, cap, &olen, 0, &res),
                RS_RSPS_INVALID);
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)keys, 13, out, cap, &olen, 0, &res),
                RS_RSPS_INVALID);
    RS_CHECK(strstr(res.msg, "13 bytes") != NULL);
    size_t wlen = make_block(blk, keys, 2, D + 1, 0.0f);
    RS_CHECK_EQ(rs_rsps_put(s, blk, wlen, 0, &res), RS_RSPS_INVALID);
    RS_CHECK(strstr(res.msg, "dim 5") != NULL);

    /* update needs a registered table */
    len = make_block(blk, keys, 4, D, 1.0f);
    RS_CHECK_EQ(rs_rsps_update(s, "t", 1, blk, len, 0, &res), RS_RSPS_PRECONDITION);
    int32_t tag = 7;
    const char *json = "{\"embedding_dim\":4,\"num_embeddings\":100,\"table_id\":0}";
    RS_CHECK_EQ(rs_rsps_init_table(s, "t", 1, (const uint8_t *)json, strlen(json), 1, &tag, &res),
                RS_RSPS_OK);
    RS_CHECK_EQ(tag, 0);
    RS_CHECK_EQ(rs_rsps_init_table(s, "t", 1, (const uint8_t *)json, strlen(json), 1, &tag, &res),
                RS_RSPS_OK); /* same config: same tag */
    const char *other = "{\"embedding_dim\":4,\"num_embeddings\":101,\"table_id\":0}";
    RS_CHECK_EQ(rs_rsps_init_table(s, "t", 1, (const uint8_t *)other, strlen(other), 1, &tag, &res),
                RS_RSPS_INVALID);
    RS_CHECK_EQ(tag, -1);
    const char *wrongdim = "{\"embedding_dim\":8,\"num_embeddings\":1,\"table_id\":3}";
    RS_CHECK_EQ(
        rs_rsps_init_table(s, "u", 1, (const uint8_t *)wrongdim, strlen(wrongdim), 1, &tag, &res),
        RS_RSPS_INVALID);
    RS_CHECK_EQ(rs_rsps_init_table(s, "u", 1, (const uint8_t *)"{oops", 5, 1, &tag, &res),
                RS_RSPS_INVALID);
    /* keys 1000..1003 exist (w = 1+i+j/10), 299 + 1000 too; gradient g = 1 + i + j/10 */
    uint64_t ukeys[2] = {1001, 5000}; /* one stored, one missing */
    len = make_block(blk, ukeys, 2, D, 1.0f);
    RS_CHECK_EQ(rs_rsps_update(s, "t", 1, blk, len, 0, &res), RS_RSPS_OK);
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)ukeys, 16, out, cap, &olen, 0, &res), RS_RSPS_OK);
    RS_CHECK_EQ(rs_rsblock_validate(out, olen, &n, &e), 0);
    v = rs_rsblock_item(out, n, 0, &key, &dim);
    memcpy(f, v, sizeof f);
    for (int j = 0; j < D; j++) {
        float w0 = 2.0f + (float)j / 10, g = 1.0f + (float)j / 10;
        RS_CHECK(f[j] == w0 - 0.01f * g);
    }
    v = rs_rsblock_item(out, n, 1, &key, &dim);
    memcpy(f, v, sizeof f);
    RS_CHECK_EQ(dim, D);
    for (int j = 0; j < D; j++) {
        float g = 2.0f + (float)j / 10;
        RS_CHECK(f[j] == -(0.01f * g));
    }
    /* a second table with tag 3: its keys must carry 3 << 56 */
    const char *t3 = "{\"embedding_dim\":4,\"num_embeddings\":1,\"table_id\":3}";
    RS_CHECK_EQ(rs_rsps_init_table(s, "u", 1, (const uint8_t *)t3, strlen(t3), 1, &tag, &res),
                RS_RSPS_OK);
    RS_CHECK_EQ(tag, 3);
    RS_CHECK_EQ(rs_rsps_update(s, "u", 1, blk, len, 0, &res), RS_RSPS_INVALID);
    RS_CHECK(strstr(res.msg, "tag") != NULL);
    uint64_t tkeys[1] = {(3ull << 56) | 42};
    len = make_block(blk, tkeys, 1, D, 1.0f);
    RS_CHECK_EQ(rs_rsps_update(s, "u", 1, blk, len, 0, &res), RS_RSPS_OK);

    /* commands */
    rs_rsps_command_args a = {.command = RS_RSPS_LOAD_FAKE_DATA, .n_arg1 = 1};
    int64_t nbytes = 100;
    a.arg1[0].data = (const uint8_t *)&nbytes;
    a.arg1[0].len = 8;
    const char *reply;
    size_t rlen, fake;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_OK);
    RS_CHECK_EQ(fake, 100);
    a.command = RS_RSPS_DUMP_FAKE_DATA;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_OK);
    RS_CHECK(rlen == 2 && memcmp(reply, "ok", 2) == 0);
    a.command = RS_RSPS_RELOAD_PS;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_INVALID);
    a.n_arg2 = 1;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_UNSUPPORTED);
    a.command = 99;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_INVALID);
    a.command = RS_RSPS_CLEAR_PS;
    RS_CHECK_EQ(rs_rsps_command(s, &a, &reply, &rlen, &fake, 0, &res), RS_RSPS_OK);
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)keys, 8, out, cap, &olen, 0, &res), RS_RSPS_OK);
    rs_rsblock_item(out, 1, 0, &key, &dim);
    RS_CHECK_EQ(dim, 0);

    rs_ps_shard_stats st;
    rs_ps_shard_get_stats(sh, &st);
    RS_CHECK(st.handled_get >= 3 && st.handled_error >= 4 && st.keys_update == 3);
    free(blk);
    free(out);
    rs_rsps_destroy(s);
    rs_ps_shard_close(sh);
}

/* rs_kv_batch_get_strided, which the GET reply gathers rows with: every index, every row-loop
 * build the CPU runs, the 512-byte specialisation and a size with a partial 64-byte block, over
 * many segments (PET reads 512 keys per segment, EH and CCEH 256), present and absent keys
 * interleaved. Row i lands at i * stride; the bytes between rows are left as they were. */
static void strided_one(rs_kv_index_type t, uint32_t vs, const char *kernel) {
    enum { N = 1300, GAP = 12 };
    char dir[] = "/tmp/rs_strided_XXXXXX";
    if (!mkdtemp(dir)) abort();
    rs_kv_config cfg = {.index_type = t, .value_size = vs, .capacity = 2 * N, .path = dir};
    rs_kv *kv = NULL;
    rs_error e = {0};
    RS_CHECK_EQ(rs_kv_open(&cfg, &kv, &e), 0);
    if (!kv) return;
    const size_t stride = vs + GAP;
    uint8_t *row = malloc(vs), *out = malloc(N * stride), *found = malloc(N);
    uint64_t *keys = malloc(N * sizeof *keys);
    for (int i = 0; i < N; i++) {
        keys[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        memset(row, (int)(keys[i] % 251), vs);
        if (i % 3 == 0) RS_CHECK_EQ(rs_kv_put(kv, keys[i], row, vs, &e), 0);
    }
    RS_CHECK_EQ(rs_kv_row_kernel_select(kernel, NULL), 0);
    memset(out, 0xee, N * stride);
    size_t nf = 0;
    RS_CHECK_EQ(rs_kv_batch_get_strided(kv, keys, N, out, stride, found, &nf), 0);
    RS_CHECK_EQ(nf, (N + 2) / 3);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const uint8_t *r = out + i * stride;
        int present = i % 3 == 0;
        bad += found[i] != present;
        for (uint32_t j = 0; j < vs; j++)
            bad += r[j] != (present ? keys[i] % 251 : 0);
        for (uint32_t j = vs; j < stride; j++)
            bad += r[j] != 0xee;
    }
    RS_CHECK_EQ(bad, 0);
    RS_CHECK_EQ(rs_kv_batch_get_strided(kv, keys, N, out, vs - 4, found, &nf), RS_EINVAL);
    rs_kv_row_kernel_select("auto", NULL);
    free(keys);
    free(found);
    free(out);
    free(row);
    rs_kv_close(kv);
    rs_test_rm_engine_dir(dir);
}

static void test_kv_batch_get_strided(void) {
    static const rs_kv_index_type types[] = {RS_KV_INDEX_PET_HASH, RS_KV_INDEX_EXTENDIBLE_HASH,
                                             RS_KV_INDEX_CCEH};
    static const char *const kernels[] = {"plain", "avx2", "avx512"};
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 3; k++) {
            if (rs_kv_row_kernel_select(kernels[k], NULL)) continue; /* the CPU lacks it */
            strided_one(types[t], 512, kernels[k]);
            strided_one(types[t], 200, kernels[k]);
        }
    rs_kv_row_kernel_select("auto", NULL);
}

/* GET with misses between hits: the rows after each miss are moved down to their items, every
 * item holds its own key, dim and row (checked item by item, not against the writer). */
static void test_service_get_interleaved_misses(void) {
    enum { D = 128, N = 700 };
    rs_ps_shard *sh = NULL;
    rs_rsps *s = open_service(D, &sh);
    if (!s) return;
    rs_error e = {0};
    static uint64_t keys[N];
    static float rows[N][D];
    static uint8_t found[N];
    for (int i = 0; i < N; i++) {
        keys[i] = 50000 + 7 * (uint64_t)i;
        found[i] = i % 5 != 1 && i % 7 != 3 && (i < 300 || i > 310); /* a run of misses too */
        for (int j = 0; j < D; j++)
            rows[i][j] = (float)i + (float)j / 256;
        if (found[i]) RS_CHECK_EQ(rs_kv_put(rs_ps_shard_kv(sh), keys[i], rows[i], D * 4, &e), 0);
    }
    size_t cap = rs_rsblock_max_size(N, D), olen = 0;
    uint8_t *out = malloc(cap);
    memset(out, 0x5a, cap);
    rs_rsps_result res;
    RS_CHECK_EQ(rs_rsps_get(s, (const uint8_t *)keys, N * 8, out, cap, &olen, 0, &res), RS_RSPS_OK);
    uint32_t n = 0;
    RS_CHECK_EQ(rs_rsblock_validate(out, olen, &n, &e), 0);
    RS_CHECK_EQ(n, N);
    size_t hits = 0;
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t key;
        int32_t dim;
        const uint8_t *v = rs_rsblock_item(out, n, i, &key, &dim);
        bad += key != keys[i] || dim != (found[i] ? D : 0);
        if (found[i]) bad += memcmp(v, rows[i], D * 4) != 0;
        hits += found[i];
    }
    RS_CHECK_EQ(bad, 0);
    RS_CHECK_EQ(olen, 4 + 4 * (size_t)N + 12 * (size_t)N + hits * D * 4);
    free(out);
    rs_rsps_destroy(s);
    rs_ps_shard_close(sh);
}

RS_TEST_MAIN(RS_TEST(test_cityhash_published_vectors), RS_TEST(test_recstore_shard_routing),
             RS_TEST(test_block_worked_example), RS_TEST(test_block_validation_names_offsets),
             RS_TEST(test_block_read_rows), RS_TEST(test_service_get_put_update),
             RS_TEST(test_kv_batch_get_strided), RS_TEST(test_service_get_interleaved_misses))
