/*
 * rc_shm_guard.h — SIGBUS protection for shared-memory mappings a peer could truncate
 * (rc_shm_guard.c). Private to the shm fabric.
 */
#ifndef RS_RC_SHM_GUARD_H
#define RS_RC_SHM_GUARD_H

#include <stddef.h>

/* Guard the mapping [base, base + len): returns a handle >= 0, or -1 when the process already
 * guards the maximum number of mappings (4096) or the handler cannot be installed. */
int rs_rc_shm_guard_add(void *base, size_t len);
/* Stop guarding (before munmap). */
void rs_rc_shm_guard_remove(int handle);
/* 1 once an access beyond the truncated end was repaired (the mapping now ends in zero pages). */
int rs_rc_shm_guard_broken(int handle);

#endif
