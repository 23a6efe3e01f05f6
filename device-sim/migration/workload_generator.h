/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The workload generator: what a guest does before and while it migrates, as one plain C
 * program logic shared by both sides of the calibration. The simulator's workload
 * (workload.cpp) runs it on the simulated guest's memory; the static guest binary
 * (tests/guest/vbwork.c) runs it in a real QEMU guest. Both get the same sizes, rates,
 * order of operations and page contents; only the memory underneath differs (what
 * "allocate", "write" and "release" do is the caller's, through struct vbw_ops).
 *
 * What it runs is a description (struct vbw_params): memory written and held; memory
 * written (non-zero) and freed before the migration; and what runs while migrating, at rates
 * in bytes per second of the caller's clock: a hot set rewritten over and over, page-cache-like
 * memory (a file in the guest) rewritten slowly, and arenas allocated, filled at the churn rate
 * and freed (at random, or the oldest first) with a bounded number alive, so freed memory is
 * reused. A part whose size or rate is 0 is not there. Warm it up (run it for warmup_ms)
 * before migrating: then arenas are freed and reused at the steady rate.
 *
 * A description is set key by key (vbw_set_param: "hot_mib" = "4096"), the same keys for the
 * simulator's JSON workload files (tools/vballoon-sim) and vbwork's KEY=VALUE arguments, so a
 * workload described once runs in both. The named workloads are presets of it (vbw_preset):
 *  - fresh: a working set written and held; the rest of RAM never touched.
 *  - freed: fresh, then a share of the rest written (non-zero) and freed before migrating.
 *  - busy:  fresh plus what a compile does to memory (hot set, page cache, arenas).
 *
 * Every write fills whole pages with contents unique to the region, page and write
 * (vbw_fill_page): never zero, and a stale copy always differs.
 *
 * Plain C99 (it also compiles as C++); no allocation, no I/O, no clock of its own.
 */
#ifndef VB_WORKLOAD_GENERATOR_H
#define VB_WORKLOAD_GENERATOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The guest's page, not the wire page: this file is also built alone, with gcc -static, for
 * a real guest (tests/guest/guest_image.py), so it includes nothing of ours. */
#define VBW_PAGE_BYTES 4096u
#define VBW_PAGE_WORDS (VBW_PAGE_BYTES / 8u)
#define VBW_MAX_ARENAS 4096u

/* The presets: named descriptions. */
enum vbw_kind { VBW_FRESH = 0, VBW_FREED = 1, VBW_BUSY = 2 };

/* Regions the generator allocates; arena i is VBW_REGION_ARENA0 + i. */
enum vbw_region {
	VBW_REGION_WORKING_SET = 0,
	VBW_REGION_FREED = 1,
	VBW_REGION_HOT = 2,
	VBW_REGION_CACHE = 3,
	VBW_REGION_ARENA0 = 4,
};

/* How a write reaches memory: anonymous memory of the process, or the page cache (a file).
 * The simulator marks the two through different dirty-log paths (every page through
 * exactly one), so a bug in either path shows at the destination. */
enum vbw_path { VBW_PATH_ANON = 0, VBW_PATH_CACHE = 1 };

/* A workload description. Keys (vbw_set_param) in brackets. */
struct vbw_params {
	uint64_t working_set_bytes; /* [working_set_mib] written once and held */
	/* Written (non-zero) and freed before the migration: a size [freed_mib], or a share of
	 * (RAM - working set) [freed_fraction]; at most one of the two is set. */
	uint64_t freed_bytes;
	double freed_fraction;
	/* While migrating (and warming up): */
	uint64_t hot_bytes; /* [hot_mib] rewritten in a cycle at [hot_mib_s] */
	double hot_bytes_per_second;
	uint64_t cache_bytes; /* [cache_mib] page cache, rewritten at [cache_mib_s] */
	double cache_bytes_per_second;
	uint64_t arena_bytes; /* [arena_kib] one allocation */
	uint64_t live_bytes;  /* [live_mib] arenas alive at most (allocated before migrating) */
	double churn_bytes_per_second; /* [churn_mib_s] arenas allocated + written (and as many freed) */
	int random_frees; /* [random_frees] at the cap a random arena goes (1) or the oldest (0) */
	double warmup_ms; /* [warmup_ms] run this long before the migration starts */
	uint64_t seed;	  /* [seed] */
	/* [init_on_free], [init_on_alloc]: the guest kernel's settings. Not the generator's to
	 * act on (it only allocates, writes and frees): the simulator's guest zeroes pages as it
	 * frees or hands them out; a real guest boots with init_on_free=1 / init_on_alloc=1. */
	int init_on_free;
	int init_on_alloc;
};

/* The description before any key is set: nothing written, nothing running; warmup_ms 5000,
 * seed 1, random frees. */
struct vbw_params vbw_empty_params(void);
/* The sizes and rates the presets are made of (docs/migration-model.md says why). */
struct vbw_params vbw_default_params(void);
/* A preset: vbw_default_params() with only the parts the named workload has. */
struct vbw_params vbw_preset(enum vbw_kind kind);
/* Zeroes the parts `kind` does not have (fresh: all but the working set; freed: also the
 * freed share; busy: also the hot set, page cache and arenas). */
void vbw_keep_preset_parts(enum vbw_kind kind, struct vbw_params *p);
const char *vbw_kind_name(enum vbw_kind kind);
/* 0 and *kind set for "fresh", "freed", "busy"; -1 otherwise. */
int vbw_parse_kind(const char *name, enum vbw_kind *kind);

/* The description's keys, in the order vbw_describe prints them: key `index`, or NULL past
 * the last. */
const char *vbw_key(unsigned index);
/* Sets one key from its text ("4096", "0.5", "true"). 0 on success; -1 with why (naming
 * the key: unknown, not a number, out of its range) in error[error_size]. */
int vbw_set_param(struct vbw_params *p, const char *key, const char *value, char *error,
		  unsigned error_size);
/* 0, or -1 with why in error[error_size] (naming the keys) when the description cannot
 * run in ram_bytes of guest RAM. */
int vbw_check_params(const struct vbw_params *p, uint64_t ram_bytes, char *error,
		     unsigned error_size);
/* Whether anything runs while migrating (a rate with something to write). */
int vbw_runs_while_migrating(const struct vbw_params *p);
/* The description as "key=value key=value ..." (every key, the values vbw_set_param
 * reads back to the same description) into out[size]. */
void vbw_describe(const struct vbw_params *p, char *out, unsigned size);

struct vbw_ops {
	void *ctx;
	/* Up to `pages` pages for a region (not written yet); returns how many it got. */
	uint64_t (*allocate)(void *ctx, uint32_t region, uint64_t pages);
	/* Pages [first, first + count) of the region, written whole with vbw_fill_page
	 * contents for `stamp`, through `path`. */
	void (*write)(void *ctx, uint32_t region, uint64_t first, uint64_t count, uint64_t stamp,
		      enum vbw_path path);
	/* The region's memory goes back to the guest. */
	void (*release)(void *ctx, uint32_t region);
};

struct vbw_stats {
	uint64_t pages_written;
	uint64_t pages_freed;
	uint64_t allocations;
	uint64_t hot_pages_written;
	uint64_t cache_pages_written;
	uint64_t arena_pages_written;
};

struct vbw_state {
	struct vbw_params p;
	struct vbw_ops ops;
	uint64_t ram_bytes;
	uint64_t hot_pages, cache_pages, arena_pages;
	uint32_t max_live;
	uint64_t hot_cursor, cache_cursor;
	double hot_done, cache_done, churn_done; /* bytes done since vbw_start() */
	double start_ms;
	uint64_t rng;
	uint64_t stamp;
	uint32_t live_count;
	uint32_t filling;          /* arena slot being written, or VBW_MAX_ARENAS: none */
	uint64_t fill_cursor;      /* its pages written so far */
	uint8_t live[VBW_MAX_ARENAS];  /* arena slot i holds memory */
	uint64_t arena_got[VBW_MAX_ARENAS];
	uint64_t arena_born[VBW_MAX_ARENAS]; /* arenas made before this one (oldest first) */
	uint64_t arenas_made;
	struct vbw_stats stats;
};

/* The contents of one page of one write. */
void vbw_fill_page(uint64_t *words, uint32_t region, uint64_t page, uint64_t stamp);

void vbw_init(struct vbw_state *s, const struct vbw_params *p, uint64_t ram_bytes,
	      const struct vbw_ops *ops);
/* The state before migrating, in this order: the working set; the freed memory written and
 * freed; the hot set, the cache and the first arenas up to the live bound, all written. */
void vbw_prepare(struct vbw_state *s);
/* The rates count from now_ms on. */
void vbw_start(struct vbw_state *s, double now_ms);
/* Does what is owed at now_ms, at most max_pages pages of writes; returns the pages written
 * (0: nothing owed; always 0 when nothing runs while migrating). */
uint64_t vbw_step(struct vbw_state *s, double now_ms, uint64_t max_pages);
/* Whether arena slot i holds memory now (for the pages in use). */
int vbw_arena_live(const struct vbw_state *s, uint32_t slot);

#ifdef __cplusplus
}
#endif

#endif
