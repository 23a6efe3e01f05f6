// SPDX-License-Identifier: GPL-2.0
/*
 * vbwork: the migration workloads (fresh, freed, busy) inside the test guest, built with
 * `gcc -static` from this file and the simulator's own generator
 * (device-sim/migration/workload_generator.c), so the real guest and the model run the
 * same program logic with the same sizes and rates.
 *
 *   vbwork KIND [--ram-mib N] [NAME=VALUE ...]
 *
 * KIND is fresh, freed or busy. --ram-mib is the guest RAM the sizes are relative to (the
 * model's RAM; default 2048). NAME=VALUE overrides a parameter: working_set_mib,
 * freed_fraction, hot_mib, hot_mib_s, cache_mib, cache_mib_s, arena_kib, live_mib,
 * churn_mib_s, warmup_ms, seed.
 *
 * Prints "params ..." and, once the state to migrate is reached (busy: after warmup_ms of
 * running), "ready". busy keeps running; every SIGUSR1 prints "stats ..." (what it wrote
 * and the rates it reached since it started). SIGTERM ends it (exit 0). Anonymous regions
 * are private mappings (munmap frees them); the page cache region is a file in /tmp
 * written with pwrite.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "workload_generator.h"

#define MIB_BYTES (1024.0 * 1024.0)
#define CACHE_PATH "/tmp/vbwork.cache"
#define MAX_REGIONS (VBW_REGION_ARENA0 + VBW_MAX_ARENAS)

struct region {
	char *base;
	uint64_t pages;
};

struct guest_memory {
	struct region regions[MAX_REGIONS];
	int cache_fd;
	uint64_t page[VBW_PAGE_WORDS];
};

static volatile sig_atomic_t stop_requested, stats_requested;

static void on_signal(int sig)
{
	if (sig == SIGTERM || sig == SIGINT)
		stop_requested = 1;
	else
		stats_requested = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "vbwork: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t g_allocate(void *ctx, uint32_t region, uint64_t pages)
{
	struct guest_memory *m = ctx;
	struct region *r = &m->regions[region];
	if (pages == 0)
		return 0;
	if (region == VBW_REGION_CACHE) {
		m->cache_fd = open(CACHE_PATH, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (m->cache_fd < 0 || ftruncate(m->cache_fd, (off_t)(pages * VBW_PAGE_BYTES)) != 0)
			die("creating the page cache file");
		r->pages = pages;
		return pages;
	}
	void *p = mmap(NULL, pages * VBW_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	r->base = p;
	r->pages = pages;
	return pages;
}

static void g_write(void *ctx, uint32_t region, uint64_t first, uint64_t count, uint64_t stamp, enum vbw_path path)
{
	struct guest_memory *m = ctx;
	struct region *r = &m->regions[region];
	for (uint64_t i = first; i < first + count; i++) {
		if (path == VBW_PATH_CACHE) {
			vbw_fill_page(m->page, region, i, stamp);
			if (pwrite(m->cache_fd, m->page, VBW_PAGE_BYTES, (off_t)(i * VBW_PAGE_BYTES)) != VBW_PAGE_BYTES)
				die("writing the page cache file");
		} else {
			vbw_fill_page((uint64_t *)(r->base + i * VBW_PAGE_BYTES), region, i, stamp);
		}
	}
}

static void g_release(void *ctx, uint32_t region)
{
	struct guest_memory *m = ctx;
	struct region *r = &m->regions[region];
	if (region == VBW_REGION_CACHE) {
		close(m->cache_fd);
		unlink(CACHE_PATH);
	} else if (r->base) {
		munmap(r->base, r->pages * VBW_PAGE_BYTES);
	}
	r->base = NULL;
	r->pages = 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int set_param(struct vbw_params *p, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq)
		return -1;
	char *end;
	const double v = strtod(eq + 1, &end);
	if (*end != 0 || v < 0)
		return -1;
	const size_t n = (size_t)(eq - arg);
#define IS(name) (n == strlen(name) && strncmp(arg, name, n) == 0)
	if (IS("working_set_mib")) p->working_set_bytes = (uint64_t)(v * MIB_BYTES);
	else if (IS("freed_fraction")) p->freed_fraction = v;
	else if (IS("hot_mib")) p->hot_bytes = (uint64_t)(v * MIB_BYTES);
	else if (IS("hot_mib_s")) p->hot_bytes_per_second = v * MIB_BYTES;
	else if (IS("cache_mib")) p->cache_bytes = (uint64_t)(v * MIB_BYTES);
	else if (IS("cache_mib_s")) p->cache_bytes_per_second = v * MIB_BYTES;
	else if (IS("arena_kib")) p->arena_bytes = (uint64_t)(v * 1024);
	else if (IS("live_mib")) p->live_bytes = (uint64_t)(v * MIB_BYTES);
	else if (IS("churn_mib_s")) p->churn_bytes_per_second = v * MIB_BYTES;
	else if (IS("warmup_ms")) p->warmup_ms = v;
	else if (IS("seed")) p->seed = (uint64_t)v;
	else return -1;
#undef IS
	return 0;
}

static struct vbw_stats at_start; /* what prepare wrote: the rates count from the start */

static void print_stats(const struct vbw_state *s, double t0)
{
	const double secs = (now_ms() - t0) / 1000.0;
	const double page_mib = VBW_PAGE_BYTES / MIB_BYTES;
	printf("stats seconds=%.3f pages_written=%llu pages_freed=%llu allocations=%llu "
	       "hot_mib_s=%.2f cache_mib_s=%.2f churn_mib_s=%.2f\n", secs,
	       (unsigned long long)s->stats.pages_written, (unsigned long long)s->stats.pages_freed,
	       (unsigned long long)s->stats.allocations,
	       secs > 0 ? (double)(s->stats.hot_pages_written - at_start.hot_pages_written) * page_mib / secs : 0,
	       secs > 0 ? (double)(s->stats.cache_pages_written - at_start.cache_pages_written) * page_mib / secs : 0,
	       secs > 0 ? (double)(s->stats.arena_pages_written - at_start.arena_pages_written) * page_mib / secs : 0);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct guest_memory memory;
	static struct vbw_state state;
	enum vbw_kind kind;
	struct vbw_params p = vbw_default_params();
	uint64_t ram_mib = 2048;

	if (argc < 2 || vbw_parse_kind(argv[1], &kind) != 0) {
		fprintf(stderr, "usage: vbwork fresh|freed|busy [--ram-mib N] [NAME=VALUE ...]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--ram-mib") == 0 && i + 1 < argc) {
			ram_mib = strtoull(argv[++i], NULL, 10);
		} else if (set_param(&p, argv[i]) != 0) {
			fprintf(stderr, "vbwork: bad argument %s\n", argv[i]);
			return 2;
		}
	}
	const char *bad = vbw_check_params(kind, &p, ram_mib << 20);
	if (bad) {
		fprintf(stderr, "vbwork: %s\n", bad);
		return 2;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGUSR1, on_signal);
	printf("params kind=%s ram_mib=%llu working_set_mib=%.1f freed_fraction=%.3f hot_mib=%.1f hot_mib_s=%.1f "
	       "cache_mib=%.1f cache_mib_s=%.1f arena_kib=%.0f live_mib=%.1f churn_mib_s=%.1f warmup_ms=%.0f\n",
	       vbw_kind_name(kind), (unsigned long long)ram_mib, p.working_set_bytes / MIB_BYTES, p.freed_fraction,
	       p.hot_bytes / MIB_BYTES, p.hot_bytes_per_second / MIB_BYTES, p.cache_bytes / MIB_BYTES,
	       p.cache_bytes_per_second / MIB_BYTES, p.arena_bytes / 1024.0, p.live_bytes / MIB_BYTES,
	       p.churn_bytes_per_second / MIB_BYTES, p.warmup_ms);
	fflush(stdout);

	const struct vbw_ops ops = {&memory, g_allocate, g_write, g_release};
	memory.cache_fd = -1;
	vbw_init(&state, kind, &p, ram_mib << 20, &ops);
	vbw_prepare(&state);
	const double t0 = now_ms();
	vbw_start(&state, t0);
	at_start = state.stats;
	int ready = kind != VBW_BUSY;
	if (ready) {
		printf("ready\n");
		fflush(stdout);
	}
	while (!stop_requested) {
		if (stats_requested) {
			stats_requested = 0;
			print_stats(&state, t0);
		}
		if (kind != VBW_BUSY) {
			pause();
			continue;
		}
		const double now = now_ms();
		if (!ready && now - t0 >= p.warmup_ms) {
			ready = 1;
			printf("ready\n");
			fflush(stdout);
		}
		if (vbw_step(&state, now, 256) == 0) {
			const struct timespec pace = {0, 1000000}; /* ahead of the clock: 1 ms */
			nanosleep(&pace, NULL);
		}
	}
	print_stats(&state, t0);
	if (memory.cache_fd >= 0)
		unlink(CACHE_PATH);
	return 0;
}
