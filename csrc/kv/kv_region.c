/*
 * kv_region.c — address-space regions for the KV engine: one mapping reserved up front, made
 * usable in place as it grows, so pointers into it stay valid for the engine's lifetime (readers
 * never take a lock to follow them).
 *
 * Anonymous regions reserve PROT_NONE address space and mprotect() the usable prefix (pages are
 * zero-filled on first touch). Pages (rs_kv_huge_pages, kv.h): explicit 2 MiB pages (MAP_HUGETLB)
 * when the hugetlb pool has room for the whole reservation — the pool's pages are then reserved
 * at mmap time, so no later fault can fail, and growth is in whole 2 MiB pages; otherwise 2 MiB
 * aligned 4 KiB-page memory marked MADV_HUGEPAGE (transparent huge pages where the kernel grants
 * them) or, with huge pages off, MADV_NOHUGEPAGE. Huge pages matter for random row and chunk
 * accesses: a 4 KiB-page table of gigabytes misses the TLB on nearly every access. File regions
 * map the whole reservation MAP_SHARED and grow the file with ftruncate(); only the prefix below
 * the file size is ever touched (beyond it the kernel would raise SIGBUS). Growth is serialised by
 * the caller.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_internal.h"

#define RS_KV_PAGE            4096ull
#define RS_KV_HUGE_PAGE_BYTES (2ull << 20)

static size_t round_page(size_t n) {
    return (n + RS_KV_PAGE - 1) & ~(size_t)(RS_KV_PAGE - 1);
}

/* Map `len` bytes of explicit 2 MiB pages (the pool's pages are reserved for the whole length at
 * mmap time, so a later fault cannot fail); MAP_FAILED when the pool lacks them. */
static void *map_hugetlb(size_t len) {
#ifdef MAP_HUGETLB
    return mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
#else
    (void)len;
    return MAP_FAILED;
#endif
}

int rs_kv_region_open_anon(rs_kv_region *r, size_t reserve, size_t initial, rs_kv_huge_pages huge,
                           rs_error *err) {
    reserve = round_page(reserve);
    initial = round_page(initial);
    r->fd = -1;
    r->backed = 0;
    r->grain = RS_KV_PAGE;
    void *p = MAP_FAILED;
    if (huge == RS_KV_HUGE_AUTO || huge == RS_KV_HUGE_EXPLICIT) {
        size_t len = (reserve + RS_KV_HUGE_PAGE_BYTES - 1) & ~(size_t)(RS_KV_HUGE_PAGE_BYTES - 1);
        p = map_hugetlb(len);
        if (p != MAP_FAILED) {
            r->reserved = len;
            r->grain = RS_KV_HUGE_PAGE_BYTES;
            r->pages = "hugetlb";
        } else if (huge == RS_KV_HUGE_EXPLICIT) {
            return rs_error_errno(err, RS_ENOMEM, errno,
                                  "%zu bytes of explicit 2 MiB pages (MAP_HUGETLB): the hugetlb "
                                  "pool has fewer free pages (raise /proc/sys/vm/nr_hugepages, "
                                  "or use huge_pages auto/thp)",
                                  len);
        }
    }
    if (p == MAP_FAILED) {
        r->reserved = reserve;
        size_t slack = reserve >= RS_KV_HUGE_PAGE_BYTES ? RS_KV_HUGE_PAGE_BYTES : 0;
        p = mmap(NULL, reserve + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                 0);
        if (p == MAP_FAILED)
            return rs_error_errno(err, RS_ENOMEM, errno, "reserving %zu bytes of address space",
                                  reserve);
        r->pages = "4k";
        if (slack) { /* keep the 2 MiB-aligned part */
            uintptr_t a = ((uintptr_t)p + RS_KV_HUGE_PAGE_BYTES - 1) &
                          ~(uintptr_t)(RS_KV_HUGE_PAGE_BYTES - 1);
            size_t head = a - (uintptr_t)p;
            if (head) munmap(p, head);
            if (slack - head) munmap((uint8_t *)a + reserve, slack - head);
            p = (void *)a;
        }
        if (huge == RS_KV_HUGE_OFF) {
            madvise(p, reserve, MADV_NOHUGEPAGE);
        } else if (slack && madvise(p, reserve, MADV_HUGEPAGE) == 0) {
            r->pages = "thp"; /* advised: the kernel grants them where THP is not "never" */
        }
    }
    r->base = p;
    int rc = rs_kv_region_grow(r, initial, err);
    if (rc) {
        munmap(r->base, r->reserved);
        r->base = NULL;
    }
    return rc;
}

int rs_kv_region_open_file(rs_kv_region *r, const char *path, size_t reserve, size_t initial,
                           int *existed, rs_error *err) {
    struct stat st;
    int rc;
    reserve = round_page(reserve);
    r->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (r->fd < 0) return rs_error_errno(err, RS_EIO, errno, "open %s", path);
    if (fstat(r->fd, &st) < 0) {
        rc = rs_error_errno(err, RS_EIO, errno, "fstat %s", path);
        goto fail_fd;
    }
    *existed = st.st_size > 0;
    r->backed = (size_t)st.st_size;
    r->pages = "file";
    r->grain = RS_KV_PAGE;
    if (r->backed > reserve) reserve = round_page(r->backed);
    r->reserved = reserve;
    void *p = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED) {
        rc = rs_error_errno(err, RS_EIO, errno, "mmap %s (%zu bytes)", path, reserve);
        goto fail_fd;
    }
    r->base = p;
    rc = rs_kv_region_grow(r, initial, err);
    if (rc) goto fail_map;
    return 0;
fail_map:
    munmap(r->base, r->reserved);
    r->base = NULL;
fail_fd:
    close(r->fd);
    r->fd = -1;
    return rc;
}

int rs_kv_region_grow(rs_kv_region *r, size_t need, rs_error *err) {
    if (need <= r->backed) return 0;
    if (need > r->reserved)
        return rs_error_set(err, RS_EFULL, "region of %zu bytes cannot grow to %zu", r->reserved,
                            need);
    size_t to = (need + r->grain - 1) & ~(r->grain - 1); /* hugetlb: whole 2 MiB pages */
    if (to > r->reserved) to = r->reserved;
    if (r->fd >= 0) {
        if (ftruncate(r->fd, (off_t)to) < 0)
            return rs_error_errno(err, RS_EIO, errno, "growing file to %zu bytes", to);
    } else {
        if (mprotect(r->base, to, PROT_READ | PROT_WRITE) < 0)
            return rs_error_errno(err, RS_ENOMEM, errno, "committing %zu bytes", to);
    }
    __atomic_store_n(&r->backed, to, __ATOMIC_RELEASE);
    return 0;
}

int rs_kv_region_sync(rs_kv_region *r, rs_error *err) {
    /* a syncer thread runs this while a writer may grow the region: read `backed` once */
    size_t backed = __atomic_load_n(&r->backed, __ATOMIC_ACQUIRE);
    if (r->fd < 0 || !r->base || !backed) return 0;
    if (msync(r->base, backed, MS_SYNC) < 0)
        return rs_error_errno(err, RS_EIO, errno, "msync of %zu bytes", backed);
    return 0;
}

void rs_kv_region_close(rs_kv_region *r) {
    if (r->base) munmap(r->base, r->reserved);
    if (r->fd >= 0) close(r->fd);
    r->base = NULL;
    r->fd = -1;
}

/* /proc/self/smaps: the AnonHugePages of the mappings inside the region, over its backed bytes. */
double rs_kv_region_huge_share(const rs_kv_region *r) {
    size_t backed = __atomic_load_n(&r->backed, __ATOMIC_ACQUIRE);
    if (!r->base || !backed) return 0.0;
    if (strcmp(r->pages, "hugetlb") == 0) return 1.0;
    if (strcmp(r->pages, "thp") != 0) return 0.0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1.0;
    uintptr_t lo = (uintptr_t)r->base, hi = lo + r->reserved;
    unsigned long long start, end, kb, huge = 0;
    int inside = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%llx-%llx ", &start, &end) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = start >= lo && end <= hi;
        else if (inside && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
            huge += kb << 10;
    }
    fclose(f);
    double share = (double)huge / (double)backed;
    return share > 1.0 ? 1.0 : share;
}
