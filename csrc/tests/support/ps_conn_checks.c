/*
 * ps_conn_checks.c — the checks of ps_conn_checks.h: request sequences that several transport
 * tests run the same way. A failed check ends the sequence (goto done) with its text in `why`.
 */
#include "ps_conn_checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(why, why_cap, "%s:%d: %s", __FILE__, __LINE__, #cond);                        \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

int rs_test_recstore_put_get(const rs_ps_conn_ops *ops, void *conn, uint64_t first_key, size_t n,
                             size_t g, size_t value_size, rs_test_row_fn fill, char *why,
                             size_t why_cap) {
    int rc = -1;
    size_t dim = value_size / 4;
    uint64_t *keys = malloc(g * sizeof *keys);
    float *rows = malloc(n * value_size), *got = malloc(g * value_size);
    rs_error e = {0};
    rs_ps_completion out;
    snprintf(why, why_cap, "ok");
    EXPECT(keys && rows && got && n <= g);
    for (size_t i = 0; i < g; i++) {
        keys[i] = first_key + i;
        if (i < n) fill(keys[i], rows + i * dim);
    }
    rs_ps_request put = {.op = RS_PS_PUT,
                         .num_keys = (uint32_t)n,
                         .keys = (const uint8_t *)keys,
                         .rows = (const uint8_t *)rows,
                         .rows_len = n * value_size};
    rs_ps_request get = {.op = RS_PS_GET, .num_keys = (uint32_t)g, .keys = (const uint8_t *)keys};
    EXPECT(ops->submit(conn, &put, 1, NULL, 0, &e) == 0);
    EXPECT(ops->submit(conn, &get, 2, got, g * value_size, &e) == 0);
    EXPECT(ops->submit(conn, &get, 3, got, g * value_size, &e) == RS_EBUSY);
    EXPECT(ops->next(conn, &out, &e) == 0);
    EXPECT(out.tag == 1 && out.resp.status == RS_PS_OK);
    EXPECT(ops->next(conn, &out, &e) == 0);
    EXPECT(out.tag == 2 && out.resp.status == RS_PS_OK);
    EXPECT(out.resp.num_found == n);
    EXPECT(memcmp(got, rows, n * value_size) == 0);
    for (size_t i = n * dim; i < g * dim; i++)
        EXPECT(got[i] == 0.0f);
    rs_ps_request upd = put;
    upd.op = RS_PS_UPDATE;
    EXPECT(ops->submit(conn, &upd, 4, NULL, 0, &e) == 0);
    EXPECT(ops->next(conn, &out, &e) == 0);
    EXPECT(out.tag == 4 && out.resp.status == RS_PS_INVALID_PAYLOAD);
    rc = 0;
done:
    if (rc && e.msg[0]) {
        size_t len = strlen(why);
        snprintf(why + len, why_cap - len, " (%s)", e.msg);
    }
    free(keys);
    free(rows);
    free(got);
    return rc;
}
