/*
 * accept_shed.c — shedding connections when the process is out of descriptors (accept_shed.h).
 */
#define _GNU_SOURCE
#include "transport/accept_shed.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

int rs_accept_reserve_open(void) {
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int rs_accept_shed_one(int listen_fd, int *reserve) {
    int spare = __atomic_exchange_n(reserve, -1, __ATOMIC_ACQ_REL);
    if (spare < 0) return -1; /* none reserved, or another thread is shedding */
    close(spare);
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    __atomic_store_n(reserve, rs_accept_reserve_open(), __ATOMIC_RELEASE);
    return fd >= 0 ? 0 : -1;
}
