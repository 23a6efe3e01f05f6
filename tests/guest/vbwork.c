// SPDX-License-Identifier: GPL-2.0
/*
 * vbwork: the migration workloads inside the test guest, built with `gcc -static` from this
 * file and the simulator's own generator (device-sim/migration/workload_generator.c), so the
 * real guest and the model run the same program logic with the same sizes and rates.
 *
 *   vbwork fresh|freed|busy|described [--ram-mib N] [KEY=VALUE ...]
 *
 * The first argument is a preset (fresh, freed, busy) or `described`, the empty description
 * (nothing written, nothing running). --ram-mib (or ram_mib=N) is the guest RAM the sizes
 * are relative to (the model's RAM; default 2048). KEY=VALUE sets one key of the
 * description, with the generator's own key table (vbw_set_param), the same keys as
 * `vballoon-sim compare --workload-file`'s JSON: working_set_mib, freed_mib, freed_fraction,
 * hot_mib, hot_mib_s, cache_mib, cache_mib_s, arena_kib, live_mib, churn_mib_s,
 * random_frees, warmup_ms, seed, init_on_free, init_on_alloc. tests/guest/
 * workload_description.py turns a JSON description into these arguments.
 *
 * init_on_free and init_on_alloc are the guest kernel's (boot it with them,
 * workload_description.kernel_args): vbwork refuses to run when /proc/cmdline says
 * otherwise (a setting the command line does not name is taken as the description says:
 * Debian's kernel has init_on_alloc on unless booted with init_on_alloc=0).
 *
 * Prints "params ..." (the whole description, every key) and, once the state to migrate is
 * reached (when something runs while migrating: after warmup_ms of running), "ready". A
 * running workload keeps running; every SIGUSR1 prints "stats ..." (what it wrote and the
 * rates it reached since it started). SIGTERM ends it (exit 0). Anonymous regions are
 * private mappings (munmap frees them); the page cache region is a file in /tmp written
 * with pwrite. A bad argument or description: "vbwork: ..." naming the key, exit 2.
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

/* The kernel's setting `name` as /proc/cmdline gives it: 0, 1, or -1 when it does not say. */
static int cmdline_setting(const char *cmdline, const char *name)
{
	const size_t n = strlen(name);
	for (const char *at = cmdline; (at = strstr(at, name)) != NULL; at += n) {
		if ((at == cmdline || at[-1] == ' ') && at[n] == '=')
			return at[n + 1] == '1' || strncmp(at + n + 1, "on", 2) == 0 ||
			       at[n + 1] == 'y';
	}
	return -1;
}

/* 0, or -1 after saying which setting the running kernel contradicts. */
static int check_kernel(const struct vbw_params *p)
{
	char cmdline[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");
	if (!f)
		return 0; /* not a Linux guest's /proc: nothing to hold it to */
	if (!fgets(cmdline, sizeof(cmdline), f))
		cmdline[0] = 0;
	fclose(f);
	const char *names[] = {"init_on_free", "init_on_alloc"};
	const int wanted[] = {p->init_on_free, p->init_on_alloc};
	for (int i = 0; i < 2; i++) {
		const int booted = cmdline_setting(cmdline, names[i]);
		if (booted >= 0 && booted != wanted[i]) {
			fprintf(stderr,
				"vbwork: \"%s\": the description says %d, the guest booted with "
				"%s=%d\n",
				names[i], wanted[i], names[i], booted);
			return -1;
		}
	}
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
	static char description[2048];
	struct vbw_params p;
	enum vbw_kind kind;
	uint64_t ram_mib = 2048;
	char error[256];

	if (argc >= 2 && vbw_parse_kind(argv[1], &kind) == 0) {
		p = vbw_preset(kind);
	} else if (argc >= 2 && strcmp(argv[1], "described") == 0) {
		p = vbw_empty_params();
	} else {
		fprintf(stderr,
			"usage: vbwork fresh|freed|busy|described [--ram-mib N] [KEY=VALUE ...]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--ram-mib") == 0 && i + 1 < argc)
			arg = argv[++i];
		else if (strncmp(arg, "ram_mib=", 8) == 0)
			arg += 8;
		else
			arg = NULL;
		if (arg) {
			char *end;
			ram_mib = strtoull(arg, &end, 10);
			if (*arg == 0 || *end != 0 || ram_mib < 64 || ram_mib > (16ull << 20)) {
				fprintf(stderr,
					"vbwork: \"ram_mib\": %s is out of range (64 to "
					"16777216)\n",
					arg);
				return 2;
			}
			continue;
		}
		char key[64];
		const char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key)) {
			fprintf(stderr, "vbwork: bad argument %s (KEY=VALUE)\n", argv[i]);
			return 2;
		}
		memcpy(key, argv[i], (size_t)(eq - argv[i]));
		key[eq - argv[i]] = 0;
		if (vbw_set_param(&p, key, eq + 1, error, sizeof(error)) != 0) {
			fprintf(stderr, "vbwork: %s\n", error);
			return 2;
		}
	}
	if (vbw_check_params(&p, ram_mib << 20, error, sizeof(error)) != 0) {
		fprintf(stderr, "vbwork: %s\n", error);
		return 2;
	}
	if (check_kernel(&p) != 0)
		return 2;
	const int runs = vbw_runs_while_migrating(&p);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGUSR1, on_signal);
	vbw_describe(&p, description, sizeof(description));
	printf("params workload=%s ram_mib=%llu %s\n", argv[1], (unsigned long long)ram_mib,
	       description);
	fflush(stdout);

	const struct vbw_ops ops = {&memory, g_allocate, g_write, g_release};
	memory.cache_fd = -1;
	vbw_init(&state, &p, ram_mib << 20, &ops);
	vbw_prepare(&state);
	const double t0 = now_ms();
	vbw_start(&state, t0);
	at_start = state.stats;
	int ready = !runs;
	if (ready) {
		printf("ready\n");
		fflush(stdout);
	}
	while (!stop_requested) {
		if (stats_requested) {
			stats_requested = 0;
			print_stats(&state, t0);
		}
		if (!runs) {
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
