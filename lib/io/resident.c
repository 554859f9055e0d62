/* Is a byte range of a file in the page cache? mincore(2) over a read-only
 * shared mapping of the range: the pages are never touched, so the probe
 * reads nothing from the disk (and a file that shrank meanwhile cannot raise
 * SIGBUS), and the mapping is gone before the function returns. The streaming
 * decomposition asks it whether NVFP4's amax pass keeps the rows it reads
 * (analysis/decompose/reader.c, keep_bytes FP4S_DECOMP_KEEP_AUTO). */
#include "internal.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int forced = FP4S_RESIDENT_PROBE;

void fp4s_file_resident_force(int result)
{
    forced = result;
}

/* The fraction of the npages pages of the mapping of fd from `first`
 * (page-aligned) over span bytes found resident, or -1 when the probe
 * cannot tell. Up to FP4S_RESIDENT_WINDOWS windows of FP4S_RESIDENT_WINDOW
 * pages cover the range; a longer range is sampled in that many windows
 * spread evenly over it (mincore's time grows with the pages asked: about
 * 25 ms for 1 GiB, every page asked, on a 2-core VM). */
static double resident_fraction(int fd, uint64_t first, uint64_t span, uint64_t page, uint64_t npages)
{
    if (span > SIZE_MAX) return -1;
    void *map = mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, fd, (off_t)first);
    if (map == MAP_FAILED) return -1;
    unsigned char vec[FP4S_RESIDENT_WINDOW];
    uint64_t nw = (npages + FP4S_RESIDENT_WINDOW - 1) / FP4S_RESIDENT_WINDOW, in = 0, seen = 0;
    const bool sample = nw > FP4S_RESIDENT_WINDOWS;
    if (sample) nw = FP4S_RESIDENT_WINDOWS;
    for (uint64_t w = 0; w < nw; w++) {
        uint64_t p = sample ? w * (npages - FP4S_RESIDENT_WINDOW) / (FP4S_RESIDENT_WINDOWS - 1)
                            : w * FP4S_RESIDENT_WINDOW;
        uint64_t n = npages - p < FP4S_RESIDENT_WINDOW ? npages - p : FP4S_RESIDENT_WINDOW;
        if (mincore((char *)map + p * page, (size_t)(n * page), vec) != 0) { /* within the mapping's pages */
            seen = 0;
            break;
        }
        for (uint64_t i = 0; i < n; i++) in += vec[i] & 1;
        seen += n;
    }
    munmap(map, (size_t)span);
    return seen ? (double)in / (double)seen : -1;
}

static uint64_t mem_forced = FP4S_MEM_PROBE;

void fp4s_mem_available_force(uint64_t v)
{
    mem_forced = v;
}

uint64_t fp4s_mem_available(void)
{
    if (mem_forced != FP4S_MEM_PROBE) return mem_forced;
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return 0;
    char line[128];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    fclose(f);
    return found && kb <= UINT64_MAX / 1024 ? (uint64_t)kb * 1024 : 0;
}

int fp4s_file_resident(const char *path, uint64_t off, uint64_t len, double *fraction)
{
    if (fraction) *fraction = -1.0;
    if (forced != FP4S_RESIDENT_PROBE) return forced;
    if (!path) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the probe */
    if (fd < 0) return -1;
    struct stat st;
    long pg = sysconf(_SC_PAGESIZE);
    int rc = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pg > 0 && len > 0 && off < (uint64_t)st.st_size) {
        uint64_t size = (uint64_t)st.st_size, page = (uint64_t)pg;
        if (len > size - off) len = size - off;
        uint64_t first = off / page * page, span = off + len - first;
        double f = resident_fraction(fd, first, span, page, (span + page - 1) / page);
        if (f >= 0) {
            if (fraction) *fraction = f;
            rc = f >= FP4S_RESIDENT_MIN;
        }
    }
    close(fd);
    return rc;
}
