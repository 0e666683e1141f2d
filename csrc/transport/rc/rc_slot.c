/*
 * rc_slot.c — validation of a request descriptor found in a request slot.
 *
 * The server trusts nothing a client wrote: every field that steers a read or a write (payload
 * bounds, response size, the response and status addresses) is checked against what the server
 * itself knows about the slot (its lane's client id and QP, the slot geometry, and the addresses
 * of the matching response slot in the client's registered region). Only then is the payload
 * decoded. Checks run cheapest and most fundamental first, so the status names the first problem.
 */
#include <inttypes.h>
#include <stdio.h>

#include "recstore/rc.h"

int rs_rc_desc_check(const rs_rc_desc *d, const rs_rc_slot_expect *x, char *why, size_t why_len) {
#define BAD(status, ...)                                                                           \
    do {                                                                                           \
        snprintf(why, why_len, __VA_ARGS__);                                                       \
        return status;                                                                             \
    } while (0)
    if (d->magic != RS_RC_MAGIC)
        BAD(RS_PS_INVALID_PAYLOAD, "descriptor magic 0x%08x, expected 0x%08x", d->magic,
            RS_RC_MAGIC);
    if (d->version != RS_RC_VERSION)
        BAD(RS_PS_INVALID_PAYLOAD, "descriptor version %u, server speaks %u", d->version,
            RS_RC_VERSION);
    if (d->op < RS_PS_GET || d->op > RS_PS_COMMAND)
        BAD(RS_PS_INVALID_PAYLOAD,
            "descriptor op %u is not GET(1), PUT(2), UPDATE(3) or COMMAND(4)", d->op);
    if (d->client_id != x->client_id || d->qp_index != x->qp_index)
        BAD(RS_PS_INVALID_PAYLOAD,
            "descriptor names client %u qp %u, found in a slot of client %u qp %u", d->client_id,
            d->qp_index, x->client_id, x->qp_index);
    if (d->payload_offset != RS_RC_DESC_BYTES)
        BAD(RS_PS_INVALID_PAYLOAD, "payload_offset %u, expected %u", d->payload_offset,
            RS_RC_DESC_BYTES);
    uint64_t room = (uint64_t)x->request_slot_bytes - RS_RC_DESC_BYTES - RS_RC_TAIL_BYTES;
    if (d->payload_bytes > room)
        BAD(RS_PS_INVALID_PAYLOAD, "payload_bytes %u exceed the request slot's %" PRIu64,
            d->payload_bytes, room);
    if (d->msg_bytes > d->payload_bytes)
        BAD(RS_PS_INVALID_PAYLOAD, "msg_bytes %u > payload_bytes %u", d->msg_bytes,
            d->payload_bytes);
    if (d->client_response_addr != x->response_addr || d->client_status_addr != x->status_addr ||
        d->client_response_rkey != x->rkey || d->client_status_rkey != x->rkey)
        BAD(RS_PS_INVALID_PAYLOAD,
            "response/status address or rkey does not match the slot's response slot");
    if (d->response_bytes > x->response_room)
        BAD(RS_PS_INVALID_PAYLOAD, "response_bytes %u exceed the response slot's %u",
            d->response_bytes, x->response_room);
    if (d->shard_id != x->shard_id)
        BAD(RS_PS_WRONG_SHARD, "request for shard %u reached shard %u", d->shard_id, x->shard_id);
    if (d->value_size != 0 && d->value_size != x->value_size)
        BAD(RS_PS_VALUE_SIZE_MISMATCH, "request value_size %u, this shard stores %u-byte rows",
            d->value_size, x->value_size);
    if (x->max_keys && d->key_count > x->max_keys)
        BAD(RS_PS_BATCH_TOO_LARGE, "%u keys in one request, the server accepts at most %u",
            d->key_count, x->max_keys);
    if (d->op == RS_PS_GET &&
        (uint64_t)d->key_count * x->value_size + RS_RC_RESP_HDR_ROOM > d->response_bytes)
        BAD(RS_PS_BATCH_TOO_LARGE,
            "%u keys x %u B rows (+%u header) do not fit the %u-byte response room", d->key_count,
            x->value_size, RS_RC_RESP_HDR_ROOM, d->response_bytes);
    if ((uint64_t)d->key_count * 8 > d->payload_bytes - d->msg_bytes)
        BAD(RS_PS_INVALID_PAYLOAD, "key_count %u needs %u key bytes, the attachment has %u",
            d->key_count, d->key_count * 8, d->payload_bytes - d->msg_bytes);
#undef BAD
    if (why_len) why[0] = '\0';
    return RS_PS_OK;
}
