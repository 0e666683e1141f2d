/*
 * rc_options.c — the RC transports' options: defaults (RecStore's where it has one) and the parser
 * of the `extra` string that ps_server / ps_bench / PSClient pass down ("k=v;k=v" or "k=v,k=v",
 * split by the transports' shared splitter, transport_options.c).
 * Every key is either applied or rejected by name: nothing is silently ignored.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/rc.h"
#include "recstore/transport.h"
#include "transport/transport_options.h"

#define BIND_CORE_MAX 4096 /* largest bind_core_offset / _stride */

void rs_rc_options_default(rs_rc_options *o) {
    memset(o, 0, sizeof *o);
    o->qps = 16;
    o->slots = 1;
    o->request_slot_bytes = 1u << 20;
    o->response_slot_bytes = 1u << 20;
    o->inline_bytes = 64;
    o->wait_timeout_ms = 60000;
    o->ctrl_timeout_ms = 30000;
    o->max_clients = RS_PS_DEFAULT_MAX_CONNECTIONS;
    o->bind_core_offset = -1;
    o->bind_core_stride = 1;
    o->numa_node = -1;
    o->poll_mode = RS_RC_POLL_ADAPTIVE;
    o->idle_spin_rounds = RS_RC_IDLE_SPIN_ROUNDS;
    o->idle_yield_rounds = RS_RC_IDLE_YIELD_ROUNDS;
    o->idle_spin_us = RS_RC_IDLE_SPIN_US;
    o->get_mode = RS_RC_GET_AUTO;
    o->fake_get = RS_RC_FAKE_NONE;
    o->ib_port = 1;
    o->gid_index = -1;
    const char *env = getenv("RECSTORE_BIND_CORE_OFFSET");
    int64_t v;
    if (env && *env) {
        if (rs_transport_option_i64("RC", "bind_core_offset", env, -1, BIND_CORE_MAX, &v, NULL) ==
            0)
            o->bind_core_offset = (int)v;
        else
            snprintf(o->bad_env, sizeof o->bad_env, "%s", env);
    }
}

const char *rs_rc_get_mode_name(rs_rc_get_mode m) {
    switch (m) {
    case RS_RC_GET_STAGING_COPY: return "staging_copy";
    case RS_RC_GET_DIRECT_SG: return "direct_sg";
    default: return "auto";
    }
}

const char *rs_rc_fake_get_name(rs_rc_fake_get m) {
    switch (m) {
    case RS_RC_FAKE_STATUS_ONLY: return "status_only";
    case RS_RC_FAKE_INDEX_ONLY: return "index_only";
    case RS_RC_FAKE_PAYLOAD_MEMSET: return "payload_memset";
    default: return "none";
    }
}

static int parse_u32(const char *k, const char *v, uint32_t lo, uint32_t hi, uint32_t *out,
                     rs_error *err) {
    uint64_t x;
    int rc = rs_transport_option_u64("RC", k, v, lo, hi, &x, err);
    if (rc == 0) *out = (uint32_t)x;
    return rc;
}

static int parse_int(const char *k, const char *v, int lo, int hi, int *out, rs_error *err) {
    int64_t x;
    int rc = rs_transport_option_i64("RC", k, v, lo, hi, &x, err);
    if (rc == 0) *out = (int)x;
    return rc;
}

static const char *const client_only_keys[] = {"qps_per_client_per_shard",
                                               "slots_per_qp",
                                               "request_slot_bytes",
                                               "response_slot_bytes",
                                               "wait_timeout_ms",
                                               "wait_spin_iterations",
                                               "control_plane_timeout_ms",
                                               "skip_client_copy",
                                               "rows_buffers",
                                               "client_copy"};
static const char *const server_only_keys[] = {"server_get_workers", "max_keys_per_request",
                                               "fake_get_mode"};

static void note_side(rs_rc_options *o, const char *k) {
    for (size_t i = 0; i < sizeof client_only_keys / sizeof *client_only_keys; i++)
        if (!strcmp(k, client_only_keys[i]) && !o->client_only[0])
            snprintf(o->client_only, sizeof o->client_only, "%s", k);
    for (size_t i = 0; i < sizeof server_only_keys / sizeof *server_only_keys; i++)
        if (!strcmp(k, server_only_keys[i]) && !o->server_only[0])
            snprintf(o->server_only, sizeof o->server_only, "%s", k);
}

int rs_rc_options_check_role(const rs_rc_options *o, int server, rs_error *err) {
    if (server && o->client_only[0])
        return rs_error_set(err, RS_EINVAL,
                            "RC option %s is a client option (give it to ps_bench / PSClient, not "
                            "the server)",
                            o->client_only);
    if (!server && o->server_only[0])
        return rs_error_set(
            err, RS_EINVAL,
            "RC option %s is a server option (give it to ps_server, not the client)",
            o->server_only);
    return 0;
}

static int apply(rs_rc_options *o, const char *k, const char *v, rs_error *err) {
    note_side(o, k);
    uint32_t u = 0;
    int rc;
#define U32(name, field, lo, hi)                                                                   \
    if (!strcmp(k, name)) return parse_u32(k, v, lo, hi, &o->field, err)
    U32("qps_per_client_per_shard", qps, 1, RS_RC_CTRL_MAX_QPS);
    U32("slots_per_qp", slots, 1, 1024);
    U32("request_slot_bytes", request_slot_bytes, 4096, 1u << 30);
    U32("response_slot_bytes", response_slot_bytes, 4096, 1u << 30);
    U32("inline_bytes", inline_bytes, 0, 1024);
    U32("wait_timeout_ms", wait_timeout_ms, 1, RS_TRANSPORT_OPTION_MAX_MS);
    U32("wait_spin_iterations", wait_spin_iterations, 0, 1u << 30);
    U32("idle_spin_rounds", idle_spin_rounds, 0, 1u << 30);
    U32("idle_yield_rounds", idle_yield_rounds, 0, 1u << 30);
    U32("idle_spin_us", idle_spin_us, 0, 10000000u);
    U32("profile_interval_ms", profile_interval_ms, 0, RS_TRANSPORT_OPTION_MAX_MS);
    U32("server_get_workers", get_workers, 0, 64);
    U32("max_keys_per_request", max_keys, 0, 1u << 24);
    U32("rows_buffers", rows_buffers, 0, RS_RC_CTRL_MAX_QPS * 1024u);
    U32("control_plane_timeout_ms", ctrl_timeout_ms, 1, RS_TRANSPORT_OPTION_MAX_MS);
#undef U32
    if (!strcmp(k, "bind_core_offset"))
        return parse_int(k, v, -1, BIND_CORE_MAX, &o->bind_core_offset, err);
    if (!strcmp(k, "bind_core_stride"))
        return parse_int(k, v, 1, BIND_CORE_MAX, &o->bind_core_stride, err);
    if (!strcmp(k, "numa_id")) return parse_int(k, v, -1, 1023, &o->numa_node, err);
    if (!strcmp(k, "gid_index")) return parse_int(k, v, -1, 255, &o->gid_index, err);
    if (!strcmp(k, "ib_port")) {
        if ((rc = parse_u32(k, v, 1, 255, &u, err))) return rc;
        o->ib_port = (uint8_t)u;
        return 0;
    }
    if (!strcmp(k, "device")) {
        if (strlen(v) >= sizeof o->device)
            return rs_error_set(err, RS_EINVAL, "RC option device=%s: name too long", v);
        snprintf(o->device, sizeof o->device, "%s", v);
        return 0;
    }
    if (!strcmp(k, "skip_client_copy"))
        return rs_transport_option_bool("RC", k, v, &o->skip_client_copy, err);
    /* word options: each name list is in its enum's order */
    static const char *const polls[] = {"adaptive", "busy"};
    static const char *const gets[] = {"auto", "staging_copy", "direct_sg"};
    static const char *const fakes[] = {"none", "status_only", "index_only", "payload_memset"};
    int w = 0;
#define CHOICE(name, field, names, type)                                                           \
    if (!strcmp(k, name)) {                                                                        \
        rc = rs_transport_option_choice("RC", k, v, names, sizeof names / sizeof *names, &w, err); \
        if (rc == 0) o->field = (type)w;                                                           \
        return rc;                                                                                 \
    }
    CHOICE("client_copy", client_copy, rs_copy_mode_names, rs_copy_mode)
    CHOICE("poll_mode", poll_mode, polls, rs_rc_poll_mode)
    CHOICE("get_response_mode", get_mode, gets, rs_rc_get_mode)
    CHOICE("fake_get_mode", fake_get, fakes, rs_rc_fake_get)
#undef CHOICE
    return rs_error_set(err, RS_EINVAL,
                        "unknown RC option '%s' (known: qps_per_client_per_shard, slots_per_qp, "
                        "request_slot_bytes, response_slot_bytes, inline_bytes, wait_timeout_ms, "
                        "wait_spin_iterations, idle_spin_rounds, idle_yield_rounds, idle_spin_us, "
                        "profile_interval_ms, "
                        "server_get_workers, "
                        "max_keys_per_request, control_plane_timeout_ms, bind_core_offset, "
                        "bind_core_stride, numa_id, device, ib_port, gid_index, skip_client_copy, "
                        "rows_buffers, client_copy, poll_mode, get_response_mode, fake_get_mode)",
                        k);
}

static int apply_item(void *ctx, const char *key, const char *val, rs_error *err) {
    return apply(ctx, key, val, err);
}

int rs_rc_options_parse(rs_rc_options *o, const char *extra, rs_error *err) {
    if (o->bad_env[0])
        return rs_error_set(err, RS_EINVAL,
                            "environment variable RECSTORE_BIND_CORE_OFFSET=%s: want an integer "
                            "in -1..%d (a core offset, or -1 for no binding)",
                            o->bad_env, BIND_CORE_MAX);
    int rc = rs_transport_options_each_sep(extra, ";,", "RC", apply_item, o, err);
    if (rc == 0 && (o->request_slot_bytes % 64 || o->response_slot_bytes % 64))
        rc = rs_error_set(err, RS_EINVAL,
                          "RC slot sizes must be multiples of 64 (request %u, response %u)",
                          o->request_slot_bytes, o->response_slot_bytes);
    return rc;
}
