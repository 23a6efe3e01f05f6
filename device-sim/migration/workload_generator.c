/* SPDX-License-Identifier: GPL-2.0 */
/* The workload generator shared by the simulator and the guest binary (see the header). */
#include "workload_generator.h"

#include <string.h>

#define MIB (1024.0 * 1024.0)
/* Page cache writes go in runs of this many pages at random places in the file (a file
 * rewritten here and there, as logs, objects and temporaries are). */
#define CACHE_RUN_PAGES 8u

struct vbw_params vbw_default_params(void)
{
	struct vbw_params p;
	memset(&p, 0, sizeof(p));
	/* Held by the program on top of what the booted guest itself uses (a booted idle
	 * Debian guest holds 150-300 MiB; the busybox test guest about 60). */
	p.working_set_bytes = 128ull << 20;
	p.freed_fraction = 0.75;
	/* A compile's memory, small enough that a 2 GiB guest under TCG keeps these rates
	 * (tests/guest measures what it achieved): 16 MiB of hot data rewritten four times a
	 * second, 64 MiB of page cache rewritten at 4 MiB/s, 2 MiB arenas filled and turned
	 * over at 32 MiB/s with 256 MiB alive. At 1 Gbit/s a migration needs several rounds. */
	p.hot_bytes = 16ull << 20;
	p.hot_bytes_per_second = 64.0 * MIB;
	p.cache_bytes = 64ull << 20;
	p.cache_bytes_per_second = 4.0 * MIB;
	p.arena_bytes = 2ull << 20;
	p.live_bytes = 256ull << 20;
	p.churn_bytes_per_second = 32.0 * MIB;
	p.warmup_ms = 5000;
	p.seed = 1;
	return p;
}

const char *vbw_kind_name(enum vbw_kind kind)
{
	switch (kind) {
	case VBW_FRESH: return "fresh";
	case VBW_FREED: return "freed";
	case VBW_BUSY: return "busy";
	}
	return "?";
}

int vbw_parse_kind(const char *name, enum vbw_kind *kind)
{
	for (int k = VBW_FRESH; k <= VBW_BUSY; k++)
		if (strcmp(name, vbw_kind_name((enum vbw_kind)k)) == 0) {
			*kind = (enum vbw_kind)k;
			return 0;
		}
	return -1;
}

const char *vbw_check_params(enum vbw_kind kind, const struct vbw_params *p, uint64_t ram_bytes)
{
	if (p->freed_fraction < 0 || p->freed_fraction > 1)
		return "freed fraction must be within 0..1";
	if (p->working_set_bytes > ram_bytes)
		return "the working set is larger than RAM";
	if (kind != VBW_BUSY)
		return 0;
	if (p->arena_bytes < VBW_PAGE_BYTES || p->live_bytes < p->arena_bytes)
		return "busy needs arenas of at least a page and room for one alive";
	if (p->live_bytes / p->arena_bytes > VBW_MAX_ARENAS)
		return "busy: too many arenas alive (live bytes over arena bytes above 4096)";
	if (p->hot_bytes_per_second < 0 || p->cache_bytes_per_second < 0 || p->churn_bytes_per_second < 0)
		return "busy: rates must not be negative";
	if (p->hot_bytes_per_second > 0 && p->hot_bytes < VBW_PAGE_BYTES)
		return "busy: a hot set rewritten needs at least a page";
	if (p->cache_bytes_per_second > 0 && p->cache_bytes < VBW_PAGE_BYTES)
		return "busy: a page cache rewritten needs at least a page";
	return 0;
}

static uint64_t mix(uint64_t x)
{
	/* splitmix64's finaliser */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

void vbw_fill_page(uint64_t *words, uint32_t region, uint64_t page, uint64_t stamp)
{
	const uint64_t base = mix(((uint64_t)region << 56) ^ (page << 20) ^ stamp ^ 0x9e3779b97f4a7c15ull);
	for (unsigned i = 0; i < VBW_PAGE_WORDS; i++)
		words[i] = (base + i * 0x100000001b3ull) | 1; /* never a zero word */
}

static uint64_t next_random(struct vbw_state *s)
{
	s->rng += 0x9e3779b97f4a7c15ull;
	return mix(s->rng);
}

void vbw_init(struct vbw_state *s, enum vbw_kind kind, const struct vbw_params *p, uint64_t ram_bytes,
	      const struct vbw_ops *ops)
{
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->p = *p;
	s->ops = *ops;
	s->ram_bytes = ram_bytes;
	s->hot_pages = p->hot_bytes / VBW_PAGE_BYTES;
	s->cache_pages = p->cache_bytes / VBW_PAGE_BYTES;
	s->arena_pages = p->arena_bytes / VBW_PAGE_BYTES;
	s->max_live = s->arena_pages ? (uint32_t)(p->live_bytes / p->arena_bytes) : 0;
	if (s->max_live > VBW_MAX_ARENAS)
		s->max_live = VBW_MAX_ARENAS;
	s->rng = p->seed;
	s->filling = VBW_MAX_ARENAS;
}

static void write_run(struct vbw_state *s, uint32_t region, uint64_t first, uint64_t count, enum vbw_path path)
{
	if (count == 0)
		return;
	s->ops.write(s->ops.ctx, region, first, count, ++s->stamp, path);
	s->stats.pages_written += count;
}

static uint64_t allocate_and_write(struct vbw_state *s, uint32_t region, uint64_t pages, enum vbw_path path)
{
	const uint64_t got = s->ops.allocate(s->ops.ctx, region, pages);
	s->stats.allocations++;
	write_run(s, region, 0, got, path);
	return got;
}

static uint32_t arena_region(uint32_t slot)
{
	return VBW_REGION_ARENA0 + slot;
}

/* A new arena: when the live bound is reached, a random live one is freed first, so the
 * new one reuses freed memory. It is written as the churn rate owes it (fill_arena). */
static void new_arena(struct vbw_state *s)
{
	uint32_t slot = 0;
	if (s->live_count >= s->max_live) {
		uint32_t victim = (uint32_t)(next_random(s) % s->live_count);
		for (slot = 0; slot < s->max_live; slot++)
			if (s->live[slot] && victim-- == 0)
				break;
		s->ops.release(s->ops.ctx, arena_region(slot));
		s->stats.pages_freed += s->arena_got[slot];
		s->live[slot] = 0;
		s->live_count--;
	} else {
		while (s->live[slot])
			slot++;
	}
	s->arena_got[slot] = s->ops.allocate(s->ops.ctx, arena_region(slot), s->arena_pages);
	s->stats.allocations++;
	s->live[slot] = 1;
	s->live_count++;
	s->filling = slot;
	s->fill_cursor = 0;
}

/* Up to `pages` more pages of the arena being filled; returns how many. */
static uint64_t fill_arena(struct vbw_state *s, uint64_t pages)
{
	if (s->filling == VBW_MAX_ARENAS)
		new_arena(s);
	const uint32_t slot = s->filling;
	uint64_t n = s->arena_got[slot] - s->fill_cursor;
	if (n > pages)
		n = pages;
	write_run(s, arena_region(slot), s->fill_cursor, n, VBW_PATH_ANON);
	s->stats.arena_pages_written += n;
	s->fill_cursor += n;
	if (s->fill_cursor >= s->arena_got[slot])
		s->filling = VBW_MAX_ARENAS;
	return n;
}

void vbw_prepare(struct vbw_state *s)
{
	const uint64_t ws = s->p.working_set_bytes / VBW_PAGE_BYTES;
	allocate_and_write(s, VBW_REGION_WORKING_SET, ws, VBW_PATH_ANON);
	if (s->kind == VBW_FREED) {
		const uint64_t ram_pages = s->ram_bytes / VBW_PAGE_BYTES;
		const uint64_t rest = ram_pages > ws ? ram_pages - ws : 0;
		const uint64_t got = allocate_and_write(s, VBW_REGION_FREED, (uint64_t)((double)rest * s->p.freed_fraction),
							VBW_PATH_ANON);
		s->ops.release(s->ops.ctx, VBW_REGION_FREED);
		s->stats.pages_freed += got;
	}
	if (s->kind != VBW_BUSY)
		return;
	if (s->hot_pages)
		s->hot_pages = allocate_and_write(s, VBW_REGION_HOT, s->hot_pages, VBW_PATH_ANON);
	if (s->cache_pages)
		s->cache_pages = allocate_and_write(s, VBW_REGION_CACHE, s->cache_pages, VBW_PATH_CACHE);
	while (s->live_count < s->max_live || s->filling != VBW_MAX_ARENAS)
		fill_arena(s, s->arena_pages);
}

void vbw_start(struct vbw_state *s, double now_ms)
{
	s->start_ms = now_ms;
	s->hot_done = s->cache_done = s->churn_done = 0;
}

int vbw_arena_live(const struct vbw_state *s, uint32_t slot)
{
	return slot < s->max_live && s->live[slot];
}

uint64_t vbw_step(struct vbw_state *s, double now_ms, uint64_t max_pages)
{
	if (s->kind != VBW_BUSY || max_pages == 0)
		return 0;
	const double elapsed_s = (now_ms - s->start_ms) / 1000.0;
	const double hot_owed = elapsed_s * s->p.hot_bytes_per_second - s->hot_done;
	const double cache_owed = elapsed_s * s->p.cache_bytes_per_second - s->cache_done;
	const double churn_owed = elapsed_s * s->p.churn_bytes_per_second - s->churn_done;
	const double page = VBW_PAGE_BYTES;

	/* The stream furthest behind goes first. */
	if (s->max_live > 0 && churn_owed >= page && churn_owed >= hot_owed && churn_owed >= cache_owed) {
		uint64_t n = (uint64_t)(churn_owed / page);
		if (n > max_pages)
			n = max_pages;
		n = fill_arena(s, n);
		s->churn_done += (double)(n ? n : 1) * page; /* an empty arena (out of memory) still counts */
		return n ? n : 1;
	}
	if (s->hot_pages > 0 && hot_owed >= page && hot_owed >= cache_owed) {
		uint64_t n = (uint64_t)(hot_owed / page);
		if (n > max_pages)
			n = max_pages;
		if (n > s->hot_pages - s->hot_cursor)
			n = s->hot_pages - s->hot_cursor;
		write_run(s, VBW_REGION_HOT, s->hot_cursor, n, VBW_PATH_ANON);
		s->stats.hot_pages_written += n;
		s->hot_done += (double)n * page;
		s->hot_cursor = (s->hot_cursor + n) % s->hot_pages;
		return n;
	}
	if (s->cache_pages > 0 && cache_owed >= page) {
		uint64_t n = (uint64_t)(cache_owed / page);
		if (n > max_pages)
			n = max_pages;
		if (n > CACHE_RUN_PAGES)
			n = CACHE_RUN_PAGES;
		if (n > s->cache_pages)
			n = s->cache_pages;
		const uint64_t first = next_random(s) % (s->cache_pages - n + 1);
		write_run(s, VBW_REGION_CACHE, first, n, VBW_PATH_CACHE);
		s->stats.cache_pages_written += n;
		s->cache_done += (double)n * page;
		return n;
	}
	return 0;
}
