/*
 * test_rc_parts.c — the pieces of the RC slot protocol tested on their own: option parsing,
 * descriptor checks, control-plane frames, the shm fabric (bounds, rkeys, publish writes, the
 * completion ring, surviving a peer that truncates a region) and the verbs fabric's no-device
 * path. test_rc_shm.c runs them together: a real server and clients over shm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recstore/rc.h"
#include "rs_test.h"

#define VS 128u /* value size in descriptors */

static void test_options(void) {
    rs_rc_options o;
    rs_rc_options_default(&o);
    RS_CHECK_EQ(o.qps, 16);
    RS_CHECK_EQ(o.slots, 1);
    RS_CHECK_EQ(o.request_slot_bytes, 1u << 20);
    RS_CHECK_EQ(o.poll_mode, RS_RC_POLL_ADAPTIVE);
    rs_error e = {0};
    RS_CHECK(rs_rc_options_parse(
                 &o,
                 "qps_per_client_per_shard=4;slots_per_qp=2,poll_mode=busy;"
                 "get_response_mode=direct_sg;fake_get_mode=index_only;skip_client_copy=1",
                 &e) == 0);
    RS_CHECK_EQ(o.qps, 4);
    RS_CHECK_EQ(o.slots, 2);
    RS_CHECK_EQ(o.poll_mode, RS_RC_POLL_BUSY);
    RS_CHECK_EQ(o.get_mode, RS_RC_GET_DIRECT_SG);
    RS_CHECK_EQ(o.fake_get, RS_RC_FAKE_INDEX_ONLY);
    RS_CHECK_EQ(o.skip_client_copy, 1);
    /* both sides' keys were given: each side refuses the other's */
    RS_CHECK(rs_rc_options_check_role(&o, 1, &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "qps_per_client_per_shard") != NULL);
    RS_CHECK(rs_rc_options_check_role(&o, 0, &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "fake_get_mode") != NULL);
    rs_rc_options srv;
    rs_rc_options_default(&srv);
    RS_CHECK(rs_rc_options_parse(&srv, "poll_mode=busy;server_get_workers=1", &e) == 0);
    RS_CHECK(rs_rc_options_check_role(&srv, 1, &e) == 0);
    RS_CHECK(rs_rc_options_parse(&o, "poll_mode", &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "key=value") != NULL);
    RS_CHECK(rs_rc_options_parse(&o, " slots_per_qp=3 ,", &e) == RS_EINVAL); /* value "3 " */
    RS_CHECK(rs_rc_options_parse(&o, "slots_per_qp=3, poll_mode=adaptive;;", &e) == 0);
    RS_CHECK_EQ(o.slots, 3);
    RS_CHECK(rs_rc_options_parse(&o, "bogus=1", &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "bogus") != NULL);
    RS_CHECK(rs_rc_options_parse(&o, "slots_per_qp=0", &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "slots_per_qp") != NULL);
    RS_CHECK(rs_rc_options_parse(&o, "poll_mode=lazy", &e) == RS_EINVAL);
    RS_CHECK_EQ(o.client_copy, RS_COPY_AUTO);
    RS_CHECK(rs_rc_options_parse(&o, "client_copy=stream", &e) == 0);
    RS_CHECK_EQ(o.client_copy, RS_COPY_STREAM);
    RS_CHECK(rs_rc_options_parse(&o, "client_copy=plain", &e) == 0);
    RS_CHECK_EQ(o.client_copy, RS_COPY_PLAIN);
    RS_CHECK(rs_rc_options_parse(&o, "client_copy=nt", &e) == RS_EINVAL);
    RS_CHECK(strstr(e.msg, "client_copy=nt") != NULL && strstr(e.msg, "auto, plain or stream"));
    RS_CHECK(rs_rc_options_check_role(&o, 1, &e) == RS_EINVAL); /* a client key */
    RS_CHECK(rs_rc_options_parse(&o, "request_slot_bytes=5000", &e) == RS_EINVAL);
}

static rs_rc_desc good_desc(rs_rc_slot_expect *x) {
    *x = (rs_rc_slot_expect){.shard_id = 1,
                             .client_id = 3,
                             .qp_index = 2,
                             .value_size = VS,
                             .max_keys = 100,
                             .request_slot_bytes = 65536,
                             .response_room = 65536 - 64,
                             .response_addr = 0x10000,
                             .status_addr = 0x10000 + 65536 - 24,
                             .rkey = 77};
    rs_rc_desc d = {.magic = RS_RC_MAGIC,
                    .version = RS_RC_VERSION,
                    .op = RS_PS_GET,
                    .seq = 5,
                    .shard_id = 1,
                    .client_id = 3,
                    .qp_index = 2,
                    .key_count = 10,
                    .value_size = VS,
                    .payload_offset = RS_RC_DESC_BYTES,
                    .payload_bytes = 20 + 80,
                    .response_bytes = 65536 - 64,
                    .msg_bytes = 20,
                    .client_response_addr = 0x10000,
                    .client_response_rkey = 77,
                    .client_status_rkey = 77,
                    .client_status_addr = 0x10000 + 65536 - 24};
    return d;
}

static void test_desc_check(void) {
    rs_rc_slot_expect x;
    char why[256];
    rs_rc_desc d = good_desc(&x);
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_OK);
    d.magic = 1;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(why, "magic") != NULL);
    d = good_desc(&x);
    d.version = 9;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    d = good_desc(&x);
    d.op = 9;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    d = good_desc(&x);
    d.client_id = 4;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    RS_CHECK(strstr(why, "client 4") != NULL);
    d = good_desc(&x);
    d.payload_bytes = 65536;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    d = good_desc(&x);
    d.client_response_addr += 8;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
    d = good_desc(&x);
    d.shard_id = 0;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_WRONG_SHARD);
    d = good_desc(&x);
    d.value_size = 64;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_VALUE_SIZE_MISMATCH);
    d = good_desc(&x);
    d.key_count = 101;
    d.payload_bytes = 20 + 808;
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_BATCH_TOO_LARGE);
    d = good_desc(&x);
    d.key_count = 11; /* 88 key bytes, 80 present */
    RS_CHECK_EQ(rs_rc_desc_check(&d, &x, why, sizeof why), RS_PS_INVALID_PAYLOAD);
}

static void test_ctrl_frames(void) {
    static rs_rc_attach_req rq, back;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.fabric, sizeof rq.fabric, "shm");
    rq.qps = 3;
    rq.slots = 2;
    rq.request_slot_bytes = 8192;
    rq.response_slot_bytes = 4096;
    rq.lanes[2].region_addr = 0x1234;
    rq.lanes[2].rkey = 99;
    snprintf(rq.lanes[2].shm_name, RS_RC_NAME_MAX, "/recbench-rc-1-2-3");
    rq.lanes[1].caps = RS_RC_CAP_RING;
    uint8_t buf[4096];
    int n = rs_rc_ctrl_encode_attach_req(&rq, buf, sizeof buf);
    RS_CHECK(n > RS_RC_CTRL_HDR);
    uint16_t type;
    uint32_t len;
    rs_error e = {0};
    RS_CHECK(rs_rc_ctrl_check_header(buf, &type, &len, &e) == 0);
    RS_CHECK_EQ(type, RS_RC_MSG_ATTACH_REQ);
    RS_CHECK(rs_rc_ctrl_decode_attach_req(buf + RS_RC_CTRL_HDR, len, &back, &e) == 0);
    RS_CHECK_EQ(back.qps, 3);
    RS_CHECK_EQ(back.lanes[2].region_addr, 0x1234);
    RS_CHECK(strcmp(back.lanes[2].shm_name, "/recbench-rc-1-2-3") == 0);
    /* the caps byte is record byte 34, which encoders before it left zero */
    RS_CHECK_EQ(back.lanes[1].caps, RS_RC_CAP_RING);
    RS_CHECK_EQ(back.lanes[2].caps, 0);
    RS_CHECK_EQ(buf[RS_RC_CTRL_HDR + 36 + 128 + 34], RS_RC_CAP_RING);
    /* truncated body, bad magic, bad version, oversized body */
    RS_CHECK(rs_rc_ctrl_decode_attach_req(buf + RS_RC_CTRL_HDR, len - 1, &back, &e) == RS_EPROTO);
    uint8_t h[RS_RC_CTRL_HDR];
    rs_rc_ctrl_put_header(h, 1, 10);
    h[0] ^= 1;
    RS_CHECK(rs_rc_ctrl_check_header(h, &type, &len, &e) == RS_EPROTO);
    RS_CHECK(strstr(e.msg, "magic") != NULL);
    rs_rc_ctrl_put_header(h, 1, 10);
    h[4] = 7;
    RS_CHECK(rs_rc_ctrl_check_header(h, &type, &len, &e) == RS_EPROTO);
    RS_CHECK(strstr(e.msg, "version") != NULL);
    rs_rc_ctrl_put_header(h, 1, RS_RC_CTRL_MAX_BODY + 1);
    RS_CHECK(rs_rc_ctrl_check_header(h, &type, &len, &e) == RS_EPROTO);
    RS_CHECK(strstr(e.msg, "limit") != NULL);
}

static void test_shm_fabric(void) {
    rs_rc_fabric *fa, *fb;
    rs_error e = {0};
    RS_CHECK(rs_rc_fabric_shm.open(NULL, &fa, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.open(NULL, &fb, &e) == 0);
    rs_rc_region ra, rb;
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fa, 8192, &ra, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fb, 8192, &rb, &e) == 0);
    rs_rc_ep *ea, *eb;
    rs_rc_ep_meta ma, mb;
    RS_CHECK(rs_rc_fabric_shm.ep_create(fa, &ra, &ea, &ma, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_create(fb, &rb, &eb, &mb, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(ea, &mb, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(eb, &ma, &e) == 0);
    /* both names are unlinked once mapped */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", ma.shm_name);
    RS_CHECK(access(path, F_OK) != 0);
    uint64_t word = 0x1122334455667788ull;
    char msg[16] = "hello, peer";
    rs_rc_sge sg[2] = {{msg, 8, 0}, {&word, 8, 0}};
    RS_CHECK(rs_rc_fabric_shm.write(ea, sg, 2, mb.region_addr + 64, mb.rkey,
                                    RS_RC_WR_SIGNALED | RS_RC_WR_PUBLISH, 42, &e) == 0);
    RS_CHECK(memcmp(rb.addr + 64, "hello, p", 8) == 0);
    uint64_t got;
    memcpy(&got, rb.addr + 72, 8);
    RS_CHECK_EQ(got, word);
    rs_rc_wc wc[4];
    RS_CHECK_EQ(rs_rc_fabric_shm.poll(ea, wc, 4), 1);
    RS_CHECK_EQ(wc[0].wr_id, 42);
    RS_CHECK_EQ(rs_rc_fabric_shm.poll(ea, wc, 4), 0);
    /* outside the region, wrong rkey */
    RS_CHECK(rs_rc_fabric_shm.write(ea, sg, 1, mb.region_addr + 8190, mb.rkey, 0, 0, &e) ==
             RS_EINVAL);
    RS_CHECK(rs_rc_fabric_shm.write(ea, sg, 1, mb.region_addr - 8, mb.rkey, 0, 0, &e) == RS_EINVAL);
    RS_CHECK(rs_rc_fabric_shm.write(ea, sg, 1, mb.region_addr, mb.rkey + 1, 0, 0, &e) == RS_EINVAL);
    /* the completion ring behaves like a send queue: full -> RS_EBUSY */
    int busy = 0;
    for (int i = 0; i < 2000 && !busy; i++)
        busy = rs_rc_fabric_shm.write(ea, sg, 1, mb.region_addr, mb.rkey, RS_RC_WR_SIGNALED,
                                      (uint64_t)i, &e) == RS_EBUSY;
    RS_CHECK(busy);
    RS_CHECK(rs_rc_fabric_shm.remote_window(ea, mb.region_addr, 8192) != NULL);
    RS_CHECK(rs_rc_fabric_shm.remote_window(ea, mb.region_addr, 8193) == NULL);
    rs_rc_fabric_shm.ep_destroy(ea);
    rs_rc_fabric_shm.ep_destroy(eb);
    rs_rc_fabric_shm.free_region(fa, &ra);
    rs_rc_fabric_shm.free_region(fb, &rb);
    rs_rc_fabric_shm.close(fa);
    rs_rc_fabric_shm.close(fb);
}

/* A peer that keeps a descriptor of a shm object and truncates it must not kill the process
 * that maps it: its writes into the truncated region fail RS_ECONN, reads of a truncated own
 * region see zeros, and other regions keep working. */
static void test_shm_fabric_survives_truncation(void) {
    rs_rc_fabric *fa, *fb;
    rs_error e = {0};
    RS_CHECK(rs_rc_fabric_shm.open(NULL, &fa, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.open(NULL, &fb, &e) == 0);
    enum { LEN = 64 * 1024 };
    rs_rc_region ra, rb;
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fa, LEN, &ra, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fb, LEN, &rb, &e) == 0);
    rs_rc_ep *ea, *eb;
    rs_rc_ep_meta ma, mb;
    RS_CHECK(rs_rc_fabric_shm.ep_create(fa, &ra, &ea, &ma, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_create(fb, &rb, &eb, &mb, &e) == 0);
    /* the "malicious" side keeps descriptors of both objects before the names are unlinked */
    int fd_a = shm_open(ma.shm_name, O_RDWR, 0);
    int fd_b = shm_open(mb.shm_name, O_RDWR, 0);
    RS_CHECK(fd_a >= 0 && fd_b >= 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(ea, &mb, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(eb, &ma, &e) == 0);
    static uint8_t big[LEN / 2];
    memset(big, 0x5a, sizeof big);
    rs_rc_sge sg = {big, sizeof big, 0};
    RS_CHECK(rs_rc_fabric_shm.write(ea, &sg, 1, mb.region_addr + LEN / 2, mb.rkey, 0, 1, &e) == 0);
    /* b's region shrinks to one page under a's mapping: a's next write runs into the end */
    RS_CHECK(ftruncate(fd_b, 4096) == 0);
    int rc = rs_rc_fabric_shm.write(ea, &sg, 1, mb.region_addr + LEN / 2, mb.rkey, 0, 2, &e);
    RS_CHECK_EQ(rc, RS_ECONN);
    RS_CHECK(strstr(e.msg, "truncated") != NULL);
    RS_CHECK_EQ(rs_rc_fabric_shm.write(ea, &sg, 1, mb.region_addr, mb.rkey, 0, 3, &e), RS_ECONN);
    /* a's own region shrinks to nothing: a reads zeros instead of dying */
    RS_CHECK(ftruncate(fd_a, 0) == 0);
    volatile uint8_t *own = ra.addr;
    uint64_t sum = 0;
    for (size_t i = 0; i < LEN; i += 4096)
        sum += own[i];
    RS_CHECK_EQ(sum, 0);
    /* the other direction (b writes into a's truncated region) fails the same way */
    RS_CHECK_EQ(rs_rc_fabric_shm.write(eb, &sg, 1, ma.region_addr, ma.rkey, 0, 4, &e), RS_ECONN);
    /* an untouched pair of regions still works */
    rs_rc_region rc1, rc2;
    rs_rc_ep *e1, *e2;
    rs_rc_ep_meta m1, m2;
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fa, 8192, &rc1, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.alloc_region(fb, 8192, &rc2, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_create(fa, &rc1, &e1, &m1, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_create(fb, &rc2, &e2, &m2, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(e1, &m2, &e) == 0);
    RS_CHECK(rs_rc_fabric_shm.ep_connect(e2, &m1, &e) == 0);
    rs_rc_sge small = {big, 64, 0};
    RS_CHECK(rs_rc_fabric_shm.write(e1, &small, 1, m2.region_addr, m2.rkey, 0, 5, &e) == 0);
    RS_CHECK(((uint8_t *)rc2.addr)[63] == 0x5a);
    close(fd_a);
    close(fd_b);
    rs_rc_fabric_shm.ep_destroy(e1);
    rs_rc_fabric_shm.ep_destroy(e2);
    rs_rc_fabric_shm.ep_destroy(ea);
    rs_rc_fabric_shm.ep_destroy(eb);
    rs_rc_fabric_shm.free_region(fa, &rc1);
    rs_rc_fabric_shm.free_region(fb, &rc2);
    rs_rc_fabric_shm.free_region(fa, &ra);
    rs_rc_fabric_shm.free_region(fb, &rb);
    rs_rc_fabric_shm.close(fa);
    rs_rc_fabric_shm.close(fb);
}

static void test_verbs_absent(void) {
    rs_rc_fabric *f = NULL;
    rs_error e = {0};
    int rc = rs_rc_fabric_verbs.open(NULL, &f, &e);
    if (rc == 0) { /* a host with a device: nothing to check here (tests/test_rc_verbs covers it) */
        rs_rc_fabric_verbs.close(f);
        return;
    }
    RS_CHECK(rc == RS_ENODEV || rc == RS_ENOTSUP);
    RS_CHECK(strlen(e.msg) > 10);
}

RS_TEST_MAIN(RS_TEST(test_options), RS_TEST(test_desc_check), RS_TEST(test_ctrl_frames),
             RS_TEST(test_shm_fabric), RS_TEST(test_shm_fabric_survives_truncation),
             RS_TEST(test_verbs_absent))
