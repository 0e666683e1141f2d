/*
 * kv_memory.c — what an engine's memory costs: index and slab bytes per key against the raw row
 * (rs_kv_get_memory), and the names of the huge-page modes (rs_kv_huge_pages, kv.h).
 *
 * Bytes per key at capacity = (index bytes + capacity x row stride) / capacity. PET reserves its
 * whole line array at open, so its figure is exact from the start; EH and CCEH grow their index
 * as keys arrive, so theirs is the index so far plus the full slab (a lower bound until full).
 */
#include <strings.h>

#include "kv_internal.h"

static const char *const huge_names[] = {"auto", "explicit", "thp", "off"};

int rs_kv_huge_pages_parse(const char *name, rs_kv_huge_pages *out, rs_error *err) {
    for (unsigned i = 0; name && i < sizeof huge_names / sizeof *huge_names; i++)
        if (strcasecmp(name, huge_names[i]) == 0) {
            *out = (rs_kv_huge_pages)i;
            return 0;
        }
    return rs_error_set(err, RS_EINVAL, "huge_pages '%s' is unknown (auto, explicit, thp or off)",
                        name ? name : "(null)");
}

const char *rs_kv_huge_pages_name(rs_kv_huge_pages m) {
    return (unsigned)m < sizeof huge_names / sizeof *huge_names ? huge_names[m] : "?";
}

void rs_kv_get_memory(const rs_kv *kv, rs_kv_memory *out) {
    memset(out, 0, sizeof *out);
    out->capacity = kv->capacity;
    out->row_bytes = kv->value_size;
    out->row_stride = kv->vs.variable ? 0 : kv->vs.stride;
    out->index_pages = "?";
    if (kv->ops->memory) kv->ops->memory(kv->ix, &out->index_bytes, &out->index_pages);
    out->slab_pages = kv->vs.region.pages ? kv->vs.region.pages : "?";
    /* bytes handed out (the unused first handle of a DRAM store is not a key's) */
    uint64_t bump = __atomic_load_n(&kv->vs.meta->bump, __ATOMIC_RELAXED) - kv->vs.first;
    out->slab_bytes = kv->vs.variable ? bump * 16 : bump * kv->vs.stride;
    out->slab_bytes_at_capacity = kv->vs.variable ? 0 : kv->capacity * kv->vs.stride;
    if (kv->capacity) {
        out->bytes_per_key =
            (double)(out->index_bytes + out->slab_bytes_at_capacity) / (double)kv->capacity;
        out->overhead_per_key = out->bytes_per_key - (double)kv->value_size;
    }
}
