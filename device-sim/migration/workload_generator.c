/* SPDX-License-Identifier: GPL-2.0 */
/* The workload generator shared by the simulator and the guest binary (see the header). */
#include "workload_generator.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)
/* Page cache writes go in runs of this many pages at random places in the file (a file
 * rewritten here and there, as logs, objects and temporaries are). */
#define CACHE_RUN_PAGES 8u

struct vbw_params vbw_empty_params(void)
{
	struct vbw_params p;
	memset(&p, 0, sizeof(p));
	p.random_frees = 1;
	p.warmup_ms = 5000;
	p.seed = 1;
	return p;
}

struct vbw_params vbw_default_params(void)
{
	struct vbw_params p = vbw_empty_params();
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
	return p;
}

void vbw_keep_preset_parts(enum vbw_kind kind, struct vbw_params *p)
{
	p->freed_bytes = 0;
	if (kind != VBW_FREED)
		p->freed_fraction = 0;
	if (kind == VBW_BUSY)
		return;
	p->hot_bytes = p->cache_bytes = p->arena_bytes = p->live_bytes = 0;
	p->hot_bytes_per_second = p->cache_bytes_per_second = p->churn_bytes_per_second = 0;
}

struct vbw_params vbw_preset(enum vbw_kind kind)
{
	struct vbw_params p = vbw_default_params();
	vbw_keep_preset_parts(kind, &p);
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

/* The keys: what each sets, in which unit, within which range. */
enum key_type { KEY_BYTES, KEY_RATE, KEY_NUMBER, KEY_FLAG, KEY_SEED };
struct key_def {
	const char *name;
	enum key_type type;
	size_t offset;	    /* of its field in struct vbw_params */
	double unit;	    /* bytes per 1 of the value (sizes and rates) */
	double min, max;    /* of the value as written */
	double min_nonzero; /* a value other than 0 is at least this */
	const char *range;  /* the range as an error says it */
};

#define MAX_MIB (16.0 * 1024 * 1024) /* 16 TiB: beyond any guest compare or a test guest runs */
#define MAX_MIB_S (1024.0 * 1024)    /* 1 TiB/s: beyond any memory bandwidth */
#define SIZE_RANGE "0 to 16777216 MiB, 16 TiB"
#define RATE_RANGE "0 to 1048576 MiB/s"
#define FLAG_RANGE "true or false (1 or 0)"
#define AT(f) offsetof(struct vbw_params, f)
static const struct key_def keys[] = {
	{"working_set_mib", KEY_BYTES, AT(working_set_bytes), MIB, 0, MAX_MIB, 0, SIZE_RANGE},
	{"freed_mib", KEY_BYTES, AT(freed_bytes), MIB, 0, MAX_MIB, 0, SIZE_RANGE},
	{"freed_fraction", KEY_NUMBER, AT(freed_fraction), 1, 0, 1, 0, "0 to 1"},
	{"hot_mib", KEY_BYTES, AT(hot_bytes), MIB, 0, MAX_MIB, 0, SIZE_RANGE},
	{"hot_mib_s", KEY_RATE, AT(hot_bytes_per_second), MIB, 0, MAX_MIB_S, 0, RATE_RANGE},
	{"cache_mib", KEY_BYTES, AT(cache_bytes), MIB, 0, MAX_MIB, 0, SIZE_RANGE},
	{"cache_mib_s", KEY_RATE, AT(cache_bytes_per_second), MIB, 0, MAX_MIB_S, 0, RATE_RANGE},
	{"arena_kib", KEY_BYTES, AT(arena_bytes), 1024, 0, 1024.0 * 1024, 4,
	 "0, or 4 to 1048576 KiB, 1 GiB"},
	{"live_mib", KEY_BYTES, AT(live_bytes), MIB, 0, MAX_MIB, 0, SIZE_RANGE},
	{"churn_mib_s", KEY_RATE, AT(churn_bytes_per_second), MIB, 0, MAX_MIB_S, 0, RATE_RANGE},
	{"random_frees", KEY_FLAG, AT(random_frees), 1, 0, 1, 0, FLAG_RANGE},
	{"warmup_ms", KEY_NUMBER, AT(warmup_ms), 1, 0, 3600000, 0, "0 to 3600000, an hour"},
	{"seed", KEY_SEED, AT(seed), 1, 0, 9007199254740992.0, 0, "a whole number, 0 to 2^53"},
	{"init_on_free", KEY_FLAG, AT(init_on_free), 1, 0, 1, 0, FLAG_RANGE},
	{"init_on_alloc", KEY_FLAG, AT(init_on_alloc), 1, 0, 1, 0, FLAG_RANGE},
};
#undef AT
#define KEY_COUNT (sizeof(keys) / sizeof(keys[0]))

const char *vbw_key(unsigned index)
{
	return index < KEY_COUNT ? keys[index].name : 0;
}

static void *field(struct vbw_params *p, const struct key_def *d)
{
	return (char *)p + d->offset;
}

int vbw_set_param(struct vbw_params *p, const char *key, const char *value, char *error,
		  unsigned error_size)
{
	unsigned k;
	for (k = 0; k < KEY_COUNT; k++)
		if (strcmp(key, keys[k].name) == 0)
			break;
	if (k == KEY_COUNT) {
		snprintf(error, error_size, "unknown key \"%s\"", key);
		return -1;
	}
	const struct key_def *d = &keys[k];
	double v;
	if (d->type == KEY_FLAG && (strcmp(value, "true") == 0 || strcmp(value, "false") == 0)) {
		v = value[0] == 't';
	} else {
		char *end;
		v = strtod(value, &end);
		if (value[0] == 0 || *end != 0) {
			snprintf(error, error_size, "\"%s\": not a number: \"%s\" (%s)", key, value,
				 d->range);
			return -1;
		}
	}
	/* Written so that NaN fails too. */
	if (!(v >= d->min && v <= d->max) || (v != 0 && v < d->min_nonzero) ||
	    ((d->type == KEY_FLAG || d->type == KEY_SEED) && v != (double)(uint64_t)v)) {
		snprintf(error, error_size, "\"%s\": %s is out of range (%s)", key, value,
			 d->range);
		return -1;
	}
	void *f = field(p, d);
	switch (d->type) {
	case KEY_BYTES: /* whole pages */
		*(uint64_t *)f = (uint64_t)(v * d->unit) / VBW_PAGE_BYTES * VBW_PAGE_BYTES;
		break;
	case KEY_RATE:
		*(double *)f = v * d->unit;
		break;
	case KEY_NUMBER:
		*(double *)f = v;
		break;
	case KEY_FLAG:
		*(int *)f = v != 0;
		break;
	case KEY_SEED:
		*(uint64_t *)f = (uint64_t)v;
		break;
	}
	return 0;
}

/* The shortest %g text that reads back as v. */
static int print_number(char *out, unsigned size, const char *sep, const char *name, double v)
{
	int n = 0;
	for (int digits = 6; digits <= 17; digits++) {
		n = snprintf(out, size, "%s%s=%.*g", sep, name, digits, v);
		const char *text = strchr(out, '=');
		if (n < 0 || (unsigned)n >= size || !text || strtod(text + 1, 0) == v)
			break;
	}
	return n;
}

void vbw_describe(const struct vbw_params *p, char *out, unsigned size)
{
	struct vbw_params copy = *p;
	unsigned used = 0;
	if (size)
		out[0] = 0;
	for (unsigned k = 0; k < KEY_COUNT && used < size; k++) {
		const struct key_def *d = &keys[k];
		const void *f = field(&copy, d);
		const char *sep = k ? " " : "";
		int n = 0;
		switch (d->type) {
		case KEY_BYTES:
			n = print_number(out + used, size - used, sep, d->name,
					 (double)*(const uint64_t *)f / d->unit);
			break;
		case KEY_RATE:
			n = print_number(out + used, size - used, sep, d->name,
					 *(const double *)f / d->unit);
			break;
		case KEY_NUMBER:
			n = print_number(out + used, size - used, sep, d->name, *(const double *)f);
			break;
		case KEY_FLAG:
			n = snprintf(out + used, size - used, "%s%s=%d", sep, d->name,
				     *(const int *)f);
			break;
		case KEY_SEED:
			n = snprintf(out + used, size - used, "%s%s=%llu", sep, d->name,
				     (unsigned long long)*(const uint64_t *)f);
			break;
		}
		if (n < 0)
			break;
		used += (unsigned)n;
	}
}

int vbw_runs_while_migrating(const struct vbw_params *p)
{
	return (p->hot_bytes_per_second > 0 && p->hot_bytes >= VBW_PAGE_BYTES) ||
	       (p->cache_bytes_per_second > 0 && p->cache_bytes >= VBW_PAGE_BYTES) ||
	       (p->churn_bytes_per_second > 0 && p->live_bytes > 0);
}

static uint64_t freed_pages(const struct vbw_params *p, uint64_t ram_bytes)
{
	if (p->freed_bytes)
		return p->freed_bytes / VBW_PAGE_BYTES;
	const uint64_t ram_pages = ram_bytes / VBW_PAGE_BYTES;
	const uint64_t ws = p->working_set_bytes / VBW_PAGE_BYTES;
	const uint64_t rest = ram_pages > ws ? ram_pages - ws : 0;
	return (uint64_t)((double)rest * p->freed_fraction);
}

int vbw_check_params(const struct vbw_params *p, uint64_t ram_bytes, char *error,
		     unsigned error_size)
{
	const double mib = MIB;
	if (p->freed_bytes && p->freed_fraction > 0) {
		snprintf(error, error_size,
			 "\"freed_mib\" and \"freed_fraction\" both given: say how much is freed "
			 "once");
		return -1;
	}
	if (p->freed_fraction < 0 || p->freed_fraction > 1) {
		snprintf(error, error_size, "\"freed_fraction\" must be within 0..1");
		return -1;
	}
	const uint64_t freed = freed_pages(p, ram_bytes) * VBW_PAGE_BYTES;
	if (p->working_set_bytes + freed > ram_bytes) {
		snprintf(error, error_size,
			 "\"working_set_mib\" + \"freed_mib\" (%.0f MiB) exceed the guest's RAM "
			 "(%.0f MiB)",
			 (double)(p->working_set_bytes + freed) / mib, (double)ram_bytes / mib);
		return -1;
	}
	const uint64_t held = p->working_set_bytes + p->hot_bytes + p->cache_bytes + p->live_bytes;
	if (held > ram_bytes) {
		snprintf(error, error_size,
			 "\"working_set_mib\" + \"hot_mib\" + \"cache_mib\" + \"live_mib\" (%.0f "
			 "MiB) exceed the "
			 "guest's RAM (%.0f MiB)",
			 (double)held / mib, (double)ram_bytes / mib);
		return -1;
	}
	if (p->live_bytes || p->churn_bytes_per_second > 0) {
		if (p->arena_bytes < VBW_PAGE_BYTES || p->live_bytes < p->arena_bytes) {
			snprintf(error, error_size,
				 "\"live_mib\" must hold at least one arena of \"arena_kib\" (at "
				 "least 4 KiB) when "
				 "arenas churn or are held");
			return -1;
		}
		if (p->live_bytes / p->arena_bytes > VBW_MAX_ARENAS) {
			snprintf(error, error_size,
				 "\"live_mib\" / \"arena_kib\": at most %u arenas alive",
				 VBW_MAX_ARENAS);
			return -1;
		}
	}
	if (p->hot_bytes_per_second < 0 || p->cache_bytes_per_second < 0 ||
	    p->churn_bytes_per_second < 0) {
		snprintf(error, error_size,
			 "\"hot_mib_s\", \"cache_mib_s\", \"churn_mib_s\" must not be negative");
		return -1;
	}
	if (p->hot_bytes_per_second > 0 && p->hot_bytes < VBW_PAGE_BYTES) {
		snprintf(error, error_size,
			 "\"hot_mib_s\" rewrites a hot set: \"hot_mib\" must be at least 4 KiB");
		return -1;
	}
	if (p->cache_bytes_per_second > 0 && p->cache_bytes < VBW_PAGE_BYTES) {
		snprintf(error, error_size,
			 "\"cache_mib_s\" rewrites a cache: \"cache_mib\" must be at least 4 KiB");
		return -1;
	}
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

void vbw_init(struct vbw_state *s, const struct vbw_params *p, uint64_t ram_bytes,
	      const struct vbw_ops *ops)
{
	memset(s, 0, sizeof(*s));
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

/* A new arena: when the live bound is reached, a live one is freed first (a random one, or
 * the oldest), so the new one reuses freed memory. It is written as the churn rate owes it
 * (fill_arena). */
static void new_arena(struct vbw_state *s)
{
	uint32_t slot = 0;
	if (s->live_count >= s->max_live) {
		if (s->p.random_frees) {
			uint32_t victim = (uint32_t)(next_random(s) % s->live_count);
			for (slot = 0; slot < s->max_live; slot++)
				if (s->live[slot] && victim-- == 0)
					break;
		} else {
			int found = 0;
			for (uint32_t i = 0; i < s->max_live; i++)
				if (s->live[i] &&
				    (!found || s->arena_born[i] < s->arena_born[slot])) {
					slot = i;
					found = 1;
				}
		}
		s->ops.release(s->ops.ctx, arena_region(slot));
		s->stats.pages_freed += s->arena_got[slot];
		s->live[slot] = 0;
		s->live_count--;
	} else {
		while (s->live[slot])
			slot++;
	}
	s->arena_got[slot] = s->ops.allocate(s->ops.ctx, arena_region(slot), s->arena_pages);
	s->arena_born[slot] = s->arenas_made++;
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
	if (s->p.freed_bytes || s->p.freed_fraction > 0) {
		const uint64_t got = allocate_and_write(
			s, VBW_REGION_FREED, freed_pages(&s->p, s->ram_bytes), VBW_PATH_ANON);
		s->ops.release(s->ops.ctx, VBW_REGION_FREED);
		s->stats.pages_freed += got;
	}
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
	if (max_pages == 0)
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
