// SPDX-License-Identifier: GPL-2.0
/*
 * vbpress: a working-set workload for the over-inflation benchmark (bench/guest/pressure.py)
 * and tests/guest/test_pressure.py.  Two processes, so that the measurement survives the
 * workload (an OOM kill takes the big one, not the sampler):
 *
 *   vbpress work FILE COUNTER [--file-mib N] [--anon-mib N] [--read-kib N] [--pread]
 *                             [--no-warm]
 *   vbpress sample COUNTER OUT
 *
 * work: maps COUNTER (a small file in the guest's tmpfs, created if missing; a worker started
 * again on it, after an OOM kill, goes on counting and bumps `starts`), then
 *   - maps --anon-mib MiB (default 256) of private anonymous memory (4 KiB pages,
 *     MADV_NOHUGEPAGE, so each page is its own fault) and writes every page;
 *   - unless --no-warm, reads the first --file-mib MiB (default 1024) of FILE sequentially
 *     (1 MiB reads), so the hot file set starts in the page cache;
 *   - marks the counter ready and loops forever: one operation = reading --read-kib KiB
 *     (default 4) at a uniformly random aligned offset inside the hot file set, plus a
 *     rewrite of the next 4 KiB page of the anonymous set (cyclic).  Each operation
 *     increments the counter.  The file set is read through a shared read-only mapping of
 *     FILE (a page not in the page cache is a major fault, pgmajfault), or with --pread by
 *     buffered pread() (a miss is then a read from the disk that no fault counter sees; only
 *     workingset_refault_file counts what was evicted and came back).
 * FILE is meant to be a block device (/dev/vda): its page cache is evictable, and what was
 * evicted comes back from the disk.
 *
 * sample: once a second (absolute CLOCK_MONOTONIC ticks) writes one line to OUT (a serial
 * port the host logs, e.g. /dev/ttyS2):
 *   VBP t=<s> state=<0 warming|1 ready|2 gone> starts=<workers started> ops=<cumulative>
 *       pgmajfault=<n>
 *       allocstall=<sum of allocstall_*> wrf=<workingset_refault_file>
 *       wra=<workingset_refault_anon> oom_kill=<n> psi_some=<total us> psi_full=<total us>
 *       avail_kib=<MemAvailable> cache_kib=<Cached + Buffers> free_kib=<MemFree>
 *       afile_kib=<Active(file)> ifile_kib=<Inactive(file)> scan_kswapd=<pgscan_kswapd>
 *       scan_direct=<pgscan_direct> thp_kib=<AnonHugePages> dm4k_kib=<DirectMap4k> end
 * Counters are cumulative; the host takes differences.  psi_* are -1 without PSI.
 * state 2: the worker's pid no longer exists (OOM-killed).  The sampler locks itself in
 * memory and sets its oom_score_adj to -1000.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE_BYTES 4096UL
#define MIB_BYTES (1024UL * 1024UL)

struct counter {
	volatile uint64_t ops;
	volatile uint32_t state; /* 0 warming, 1 ready */
	volatile int32_t pid;
	volatile uint32_t starts; /* workers started on this counter */
};

static struct counter *map_counter(const char *path, int create)
{
	/* An existing counter is kept (a restarted worker goes on counting). */
	int fd = open(path, O_RDWR | (create ? O_CREAT : 0), 0644);
	if (fd < 0) {
		perror("vbpress: open counter");
		exit(1);
	}
	if (create && ftruncate(fd, PAGE_BYTES) != 0) {
		perror("vbpress: ftruncate");
		exit(1);
	}
	void *p = mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("vbpress: mmap counter");
		exit(1);
	}
	close(fd);
	return p;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int work(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	const char *file = argv[2];
	const char *cpath = argv[3];
	unsigned long file_mib = 1024, anon_mib = 256, read_kib = 4;
	int warm = 1, use_pread = 0;
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--file-mib") && i + 1 < argc)
			file_mib = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--anon-mib") && i + 1 < argc)
			anon_mib = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--read-kib") && i + 1 < argc)
			read_kib = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--pread"))
			use_pread = 1;
		else if (!strcmp(argv[i], "--no-warm"))
			warm = 0;
		else {
			fprintf(stderr, "vbpress: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (!file_mib || !anon_mib || !read_kib || read_kib * 1024 > file_mib * MIB_BYTES) {
		fprintf(stderr, "vbpress: sizes must be positive, the read inside the file set\n");
		return 2;
	}
	struct counter *c = map_counter(cpath, 1);
	c->state = 0;
	c->pid = getpid();
	c->starts++;

	size_t anon_bytes = anon_mib * MIB_BYTES;
	char *anon =
		mmap(NULL, anon_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED) {
		perror("vbpress: mmap anon");
		return 1;
	}
	madvise(anon, anon_bytes, MADV_NOHUGEPAGE);
	for (size_t off = 0; off < anon_bytes; off += PAGE_BYTES)
		anon[off] = 1;

	int fd = open(file, O_RDONLY);
	if (fd < 0) {
		perror("vbpress: open file");
		return 1;
	}
	size_t rbytes = read_kib * 1024;
	char *buf = aligned_alloc(PAGE_BYTES, rbytes > MIB_BYTES ? rbytes : MIB_BYTES);
	if (!buf)
		return 1;
	if (warm) {
		for (unsigned long m = 0; m < file_mib; m++) {
			if (pread(fd, buf, MIB_BYTES, (off_t)(m * MIB_BYTES)) !=
			    (ssize_t)MIB_BYTES) {
				perror("vbpress: warm read");
				return 1;
			}
		}
	}
	const char *map = NULL;
	if (!use_pread) {
		map = mmap(NULL, file_mib * MIB_BYTES, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			perror("vbpress: mmap file");
			return 1;
		}
	}
	c->state = 1;

	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	uint64_t blocks = file_mib * MIB_BYTES / rbytes;
	size_t anon_pages = anon_bytes / PAGE_BYTES, next = 0;
	uint64_t sum = 0;
	for (;;) {
		off_t off = (off_t)(xorshift(&seed) % blocks) * (off_t)rbytes;
		ssize_t n = (ssize_t)rbytes;
		if (map) {
			memcpy(buf, map + off, rbytes);
		} else if ((n = pread(fd, buf, rbytes, off)) != (ssize_t)rbytes) {
			if (n < 0 && errno == EINTR)
				continue;
			perror("vbpress: pread");
			return 1;
		}
		sum += (unsigned char)buf[n - 1];
		char *page = anon + next * PAGE_BYTES;
		((uint64_t *)page)[(sum >> 3) & 511] = sum; /* a write: the page stays dirty anon */
		page[0] = (char)sum;
		if (++next == anon_pages)
			next = 0;
		__atomic_store_n(&c->ops, c->ops + 1, __ATOMIC_RELAXED);
	}
}

static long long vmstat_get(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return atoll(p + kl + 1);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

static long long vmstat_sum_prefix(const char *text, const char *prefix)
{
	size_t pl = strlen(prefix);
	long long sum = 0;
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, prefix, pl)) {
			const char *sp = strchr(p, ' ');
			if (sp)
				sum += atoll(sp + 1);
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return sum;
}

static int slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n, total = 0;
	while (total < (ssize_t)size - 1 && (n = read(fd, buf + total, size - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = 0;
	return 0;
}

static long long psi_total(const char *text, const char *kind)
{
	const char *p = strstr(text, kind);
	if (!p)
		return -1;
	const char *t = strstr(p, "total=");
	return t ? atoll(t + 6) : -1;
}

static long long meminfo_get(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? atoll(p + strlen(key)) : -1;
}

/* Gone: no such process, or a zombie nobody reaped (an OOM-killed worker whose parent exited
 * is reparented to the guest's /init, which does not wait for it). */
static int worker_gone(int pid)
{
	char path[64], st[256];
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (slurp(path, st, sizeof(st)) != 0)
		return 1;
	const char *p = strrchr(st, ')');
	return p && (p[2] == 'Z' || p[2] == 'X');
}

static int sample(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	struct counter *c = map_counter(argv[2], 0);
	int out = open(argv[3], O_WRONLY | O_NOCTTY);
	if (out < 0) {
		perror("vbpress: open out");
		return 1;
	}
	mlockall(MCL_CURRENT | MCL_FUTURE);
	int adj =
		open("/proc/self/oom_score_adj", O_WRONLY); /* the OOM killer spares the sampler */
	if (adj >= 0) {
		if (write(adj, "-1000", 5) < 0)
			perror("vbpress: oom_score_adj");
		close(adj);
	}
	static char vm[16384], psi[512], mi[8192];
	struct timespec t0, next;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	next = t0;
	for (;;) {
		next.tv_sec += 1;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t ops = __atomic_load_n(&c->ops, __ATOMIC_RELAXED);
		int state = c->state;
		if (worker_gone(c->pid))
			state = 2;
		slurp("/proc/vmstat", vm, sizeof(vm));
		if (slurp("/proc/pressure/memory", psi, sizeof(psi)) != 0)
			psi[0] = 0;
		slurp("/proc/meminfo", mi, sizeof(mi));
		char line[768];
		int n = snprintf(
			line, sizeof(line),
			"VBP t=%.3f state=%d starts=%u ops=%llu pgmajfault=%lld allocstall=%lld "
			"wrf=%lld wra=%lld oom_kill=%lld psi_some=%lld psi_full=%lld "
			"avail_kib=%lld cache_kib=%lld free_kib=%lld afile_kib=%lld ifile_kib=%lld "
			"scan_kswapd=%lld scan_direct=%lld thp_kib=%lld dm4k_kib=%lld end\n",
			(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9, state,
			c->starts, (unsigned long long)ops, vmstat_get(vm, "pgmajfault"),
			vmstat_sum_prefix(vm, "allocstall_"),
			vmstat_get(vm, "workingset_refault_file"),
			vmstat_get(vm, "workingset_refault_anon"), vmstat_get(vm, "oom_kill"),
			psi[0] ? psi_total(psi, "some") : -1, psi[0] ? psi_total(psi, "full") : -1,
			meminfo_get(mi, "MemAvailable:"),
			meminfo_get(mi, "\nCached:") + meminfo_get(mi, "Buffers:"),
			meminfo_get(mi, "MemFree:"), meminfo_get(mi, "Active(file):"),
			meminfo_get(mi, "Inactive(file):"), vmstat_get(vm, "pgscan_kswapd"),
			vmstat_get(vm, "pgscan_direct"), meminfo_get(mi, "AnonHugePages:"),
			meminfo_get(mi, "DirectMap4k:"));
		if (write(out, line, n) < 0)
			return 1;
	}
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "work"))
		return work(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "sample"))
		return sample(argc, argv);
	fprintf(stderr,
		"usage: vbpress work FILE COUNTER [--file-mib N] [--anon-mib N] "
		"[--read-kib N] [--pread] [--no-warm]\n       vbpress sample COUNTER OUT\n");
	return 2;
}
