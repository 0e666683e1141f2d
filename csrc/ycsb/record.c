/*
 * record.c — YCSB records as bytes, read results, and the key mapping of the hash engines.
 *
 * Encoded record (the value bindings store when an engine keeps one blob per key):
 *
 *     repeat { u32le name_len | name bytes | u32le value_len | value bytes }
 *
 * Field order is the writer's order; a merge (partial update) keeps old fields in place, replaces
 * the ones named in the update and appends new ones. A read result owns an arena into which
 * field names and values are copied, so bindings may hand out views of engine buffers that die
 * right after the call. Result pointers are rebased when the arena grows: fields keep offsets
 * until rs_ycsb_result_add returns.
 */
#include <stdlib.h>
#include <string.h>

#include "recstore/hash.h"
#include "recstore/ycsb.h"

void rs_ycsb_result_init(rs_ycsb_result *r) {
    memset(r, 0, sizeof *r);
}

void rs_ycsb_result_free(rs_ycsb_result *r) {
    free(r->fields);
    free(r->rec);
    free(r->arena);
    memset(r, 0, sizeof *r);
}

void rs_ycsb_result_reset(rs_ycsb_result *r) {
    r->n = 0;
    r->used = 0;
    r->nrec = 0;
}

void rs_ycsb_result_begin(rs_ycsb_result *r) {
    r->nrec++;
}

int rs_ycsb_result_add(rs_ycsb_result *r, const char *name, size_t name_len, const char *value,
                       size_t value_len) {
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 16;
        rs_ycsb_field *nf = realloc(r->fields, nc * sizeof *nf);
        if (!nf) return RS_ENOMEM;
        r->fields = nf;
        uint32_t *nr = realloc(r->rec, nc * sizeof *nr);
        if (!nr) return RS_ENOMEM;
        r->rec = nr;
        r->cap = nc;
    }
    size_t need = r->used + name_len + value_len;
    if (need > r->arena_cap) {
        size_t nc = r->arena_cap ? r->arena_cap : 4096;
        while (nc < need)
            nc *= 2;
        char *na = realloc(r->arena, nc);
        if (!na) return RS_ENOMEM;
        if (na != r->arena) /* rebase earlier fields onto the moved arena */
            for (size_t i = 0; i < r->n; i++) {
                r->fields[i].name = na + (r->fields[i].name - r->arena);
                r->fields[i].value = na + (r->fields[i].value - r->arena);
            }
        r->arena = na;
        r->arena_cap = nc;
    }
    char *dst = r->arena + r->used;
    memcpy(dst, name, name_len);
    memcpy(dst + name_len, value, value_len);
    r->used = need;
    r->fields[r->n] = (rs_ycsb_field){dst, (uint32_t)name_len, dst + name_len, (uint32_t)value_len};
    r->rec[r->n] = r->nrec ? r->nrec - 1 : 0;
    r->n++;
    return RS_OK;
}

int rs_ycsb_fieldset_wants(const rs_ycsb_fieldset *fs, const char *name, size_t name_len) {
    if (!fs || !fs->names) return 1;
    for (size_t i = 0; i < fs->n; i++)
        if (fs->names[i].name_len == name_len && !memcmp(fs->names[i].name, name, name_len))
            return 1;
    return 0;
}

static void put_u32(char *p, uint32_t v) {
    p[0] = (char)v;
    p[1] = (char)(v >> 8);
    p[2] = (char)(v >> 16);
    p[3] = (char)(v >> 24);
}

static uint32_t get_u32(const char *p) {
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

size_t rs_ycsb_record_size(const rs_ycsb_field *f, size_t n) {
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += 8 + f[i].name_len + f[i].value_len;
    return s;
}

size_t rs_ycsb_record_encode(const rs_ycsb_field *f, size_t n, char *out) {
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        put_u32(p, f[i].name_len);
        memcpy(p + 4, f[i].name, f[i].name_len);
        p += 4 + f[i].name_len;
        put_u32(p, f[i].value_len);
        memcpy(p + 4, f[i].value, f[i].value_len);
        p += 4 + f[i].value_len;
    }
    return (size_t)(p - out);
}

/* Walk an encoded record; calls fn for each field. RS_EPROTO on a truncated record. */
typedef int (*field_fn)(void *arg, const char *name, uint32_t nl, const char *val, uint32_t vl);

static int walk(const char *buf, size_t len, field_fn fn, void *arg) {
    size_t off = 0;
    while (off < len) {
        if (len - off < 4) return RS_EPROTO;
        uint32_t nl = get_u32(buf + off);
        if (len - off - 4 < (size_t)nl + 4) return RS_EPROTO;
        const char *name = buf + off + 4;
        uint32_t vl = get_u32(name + nl);
        if (len - off - 8 - nl < vl) return RS_EPROTO;
        int rc = fn(arg, name, nl, name + nl + 4, vl);
        if (rc) return rc;
        off += 8 + (size_t)nl + vl;
    }
    return RS_OK;
}

typedef struct {
    const rs_ycsb_fieldset *fs;
    rs_ycsb_result *out;
} decode_arg;

static int decode_one(void *a, const char *name, uint32_t nl, const char *val, uint32_t vl) {
    decode_arg *d = a;
    if (!rs_ycsb_fieldset_wants(d->fs, name, nl)) return RS_OK;
    return rs_ycsb_result_add(d->out, name, nl, val, vl);
}

int rs_ycsb_record_decode(const char *buf, size_t len, const rs_ycsb_fieldset *fs,
                          rs_ycsb_result *out) {
    decode_arg d = {fs, out};
    return walk(buf, len, decode_one, &d);
}

typedef struct {
    const rs_ycsb_field *upd;
    size_t n;
    uint8_t *used; /* which update fields replaced an old one */
    char *p;       /* output cursor (NULL: size pass) */
    size_t size;
} merge_arg;

static int merge_one(void *a, const char *name, uint32_t nl, const char *val, uint32_t vl) {
    merge_arg *m = a;
    for (size_t i = 0; i < m->n; i++)
        if (m->upd[i].name_len == nl && !memcmp(m->upd[i].name, name, nl)) {
            m->used[i] = 1;
            val = m->upd[i].value;
            vl = m->upd[i].value_len;
            break;
        }
    rs_ycsb_field f = {name, nl, val, vl};
    if (m->p) m->p += rs_ycsb_record_encode(&f, 1, m->p);
    m->size += 8 + (size_t)nl + vl;
    return RS_OK;
}

int rs_ycsb_record_merge(const char *old, size_t old_len, const rs_ycsb_field *upd, size_t n,
                         char **out, size_t *out_len) {
    uint8_t used_small[64];
    uint8_t *used = n <= 64 ? used_small : calloc(n, 1);
    if (!used) return RS_ENOMEM;
    memset(used, 0, n <= 64 ? sizeof used_small : 0);
    merge_arg m = {upd, n, used, NULL, 0};
    int rc = walk(old, old_len, merge_one, &m);
    if (rc) goto done;
    size_t total = m.size;
    for (size_t i = 0; i < n; i++)
        if (!used[i]) total += 8 + (size_t)upd[i].name_len + upd[i].value_len;
    char *buf = malloc(total ? total : 1);
    if (!buf) {
        rc = RS_ENOMEM;
        goto done;
    }
    memset(used, 0, n);
    m = (merge_arg){upd, n, used, buf, 0};
    walk(old, old_len, merge_one, &m);
    for (size_t i = 0; i < n; i++)
        if (!used[i]) m.p += rs_ycsb_record_encode(&upd[i], 1, m.p);
    *out = buf;
    *out_len = total;
done:
    if (used != used_small) free(used);
    return rc;
}

uint64_t rs_ycsb_key_u64(const char *key, size_t len) {
    if (len == 0 || len > 20) return rs_fnv1a64(key, len);
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)key[i] - '0';
        if (d > 9) return rs_fnv1a64(key, len);
        if (v > (UINT64_MAX - d) / 10) return rs_fnv1a64(key, len); /* does not fit a u64 */
        v = v * 10 + d;
    }
    return v;
}
