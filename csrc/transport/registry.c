/*
 * registry.c — the list of PS transports and their tables: rs_ps_transport_find(name).
 *
 * Each transport file defines rs_<name>_server_ops / rs_<name>_conn_ops when its libraries were
 * found at build time (RS_HAVE_*); otherwise its entry carries the reason it is absent, which
 * rs_ps_transport_find returns as RS_ENOTSUP and `recbench._ps.transports()` shows.
 */
#include <string.h>
#include <strings.h>

#include "recstore/transport.h"

#if RS_HAVE_PROTOBUF_C
extern const rs_ps_server_ops rs_brpc_server_ops;
extern const rs_ps_conn_ops rs_brpc_conn_ops, rs_brpc_rs_conn_ops;
#endif
#if RS_HAVE_GRPC
extern const rs_ps_server_ops rs_grpc_server_ops;
extern const rs_ps_conn_ops rs_grpc_conn_ops, rs_grpc_rs_conn_ops;
#endif

/* RC slot protocol (csrc/transport/rc): shm always; rdma opens the verbs fabric at start and
 * reports RS_ENODEV (a skip) where no device exists, RS_ENOTSUP when built without libibverbs. */
extern const rs_ps_server_ops rs_shm_server_ops, rs_rdma_server_ops;
extern const rs_ps_conn_ops rs_shm_conn_ops, rs_rdma_conn_ops;

typedef struct transport_entry {
    const char *name;
    const rs_ps_server_ops *server;
    const rs_ps_conn_ops *conn;
    const char *missing; /* why it is not available (NULL when it is) */
} transport_entry;

static const transport_entry transports[] = {
#if RS_HAVE_PROTOBUF_C
    {"brpc", &rs_brpc_server_ops, &rs_brpc_conn_ops, NULL},
#else
    {"brpc", NULL, NULL,
     "built without protobuf-c (install libprotobuf-c-dev and protobuf-c-compiler, then rebuild)"},
#endif
#if RS_HAVE_GRPC
    {"grpc", &rs_grpc_server_ops, &rs_grpc_conn_ops, NULL},
#else
    {"grpc", NULL, NULL, "built without libgrpc-dev (install libgrpc-dev, then rebuild)"},
#endif
#if RS_HAVE_PROTOBUF_C
    /* RecStore's wire (recstoreps_brpc.ParameterService): the brpc server serves it on its port */
    {"recstore+brpc", NULL, &rs_brpc_rs_conn_ops, NULL},
#else
    {"recstore+brpc", NULL, NULL,
     "built without protobuf-c (install libprotobuf-c-dev and protobuf-c-compiler, then rebuild)"},
#endif
#if RS_HAVE_GRPC
    /* RecStore's wire (recstoreps.ParameterService): the gRPC server serves it on its port */
    {"recstore+grpc", NULL, &rs_grpc_rs_conn_ops, NULL},
#else
    {"recstore+grpc", NULL, NULL, "built without libgrpc-dev (install libgrpc-dev, then rebuild)"},
#endif
    {"shm", &rs_shm_server_ops, &rs_shm_conn_ops, NULL},
#if RS_HAVE_VERBS
    {"rdma", &rs_rdma_server_ops, &rs_rdma_conn_ops, NULL},
#else
    {"rdma", NULL, NULL, "built without libibverbs-dev (install it, then rebuild)"},
#endif
};

#define NTRANSPORTS (sizeof transports / sizeof transports[0])

/* Client wires ("recstore+..."): servers are the native transports' (they serve both wires) */
static int client_wire(const transport_entry *t) {
    return strncmp(t->name, "recstore+", 9) == 0;
}

const char *rs_ps_transport_name(size_t i) {
    size_t k = 0;
    for (size_t j = 0; j < NTRANSPORTS; j++)
        if (!client_wire(&transports[j]) && k++ == i) return transports[j].name;
    return NULL;
}

int rs_ps_transport_find(const char *name, const rs_ps_server_ops **server,
                         const rs_ps_conn_ops **conn, rs_error *err) {
    if (server) *server = NULL;
    if (conn) *conn = NULL;
    for (size_t i = 0; i < NTRANSPORTS; i++) {
        const transport_entry *t = &transports[i];
        if (!name || strcasecmp(name, t->name) != 0) continue;
        if (t->missing) return rs_error_set(err, RS_ENOTSUP, "%s: %s", t->name, t->missing);
        if (server && client_wire(t))
            return rs_error_set(err, RS_EINVAL,
                                "%s is a client wire: serve it with the %s server, which answers "
                                "RecStore's ParameterService on its port",
                                t->name, t->name + 9);
        if (server) *server = t->server;
        if (conn) *conn = t->conn;
        return 0;
    }
    return rs_error_set(
        err, RS_EINVAL,
        "unknown transport '%s' (expected brpc, grpc, shm, rdma, recstore+brpc or recstore+grpc)",
        name ? name : "(null)");
}
