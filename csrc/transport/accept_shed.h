/*
 * accept_shed.h — what a TCP server does when accept() fails for lack of descriptors.
 *
 * With EMFILE/ENFILE the pending connection stays in the backlog, the listening socket stays
 * readable and an event loop spins on it. A server keeps one reserve descriptor (/dev/null);
 * shedding gives it up, accepts the pending connection, closes it at once (the peer sees the
 * close instead of waiting) and takes the reserve back. Used by the brpc server and the RC
 * control plane.
 */
#ifndef RS_ACCEPT_SHED_H
#define RS_ACCEPT_SHED_H

/* A reserve descriptor for rs_accept_shed_one (-1 if none could be opened). */
int rs_accept_reserve_open(void);

/* Shed one pending connection of listen_fd using the reserve in *reserve, which is taken
 * atomically (several threads may shed at once; only one holds the reserve) and replaced.
 * Returns 0 when a connection was shed, -1 if no reserve was free or nothing was accepted. */
int rs_accept_shed_one(int listen_fd, int *reserve);

#endif
