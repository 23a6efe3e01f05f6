// SPDX-License-Identifier: GPL-2.0
/*
 * hog: allocate and touch anonymous memory inside the test guest (busybox has no stress tool).
 *
 *   hog MIB [nohuge]
 *   hog keep MIB
 *   hog holes MIB
 *   hog rcu-settle
 *
 * hog MIB: maps MIB MiB of private anonymous memory, writes one non-zero word into every
 * 4 KiB page (enough to make the kernel back each page with its own frame), prints how far it
 * got every 64 MiB, then "touched MIB" and exits 0, which frees everything.  With "nohuge" it
 * asks for 4 KiB pages (MADV_NOHUGEPAGE), so every page is one page fault (the stats test
 * counts them).  If the kernel cannot find the memory the process is OOM-killed and the
 * caller sees the signal.
 *
 * hog keep MIB: fills MIB MiB with a pattern in which every 64-bit word is a hash of its
 * index and a per-run seed, prints "filled MIB", and keeps the memory.  Each SIGUSR1 makes it
 * check every byte and print "verified N ok" (N counts the checks) or "verified N bad
 * WORDS first OFFSET"; SIGTERM does the same check and then exits 0 if every check passed,
 * 1 otherwise.  Run it in the background with stdout in a file.
 *
 * hog holes MIB: touches MIB MiB of 4 KiB pages, then gives every other page back
 * (MADV_DONTNEED), prints "holed MIB" and keeps the rest until SIGTERM, then exits 0.  While
 * it runs, the free memory it leaves is single pages between pages it holds, which the next
 * page allocations (a balloon's) fill; once it exits, those pages sit in blocks that are half
 * free: what compaction needs to have something to move and somewhere to move it.  Run it in
 * the background with stdout in a file.
 *
 * hog rcu-settle: waits for two RCU grace periods (membarrier(MEMBARRIER_CMD_GLOBAL) runs
 * synchronize_rcu()), so that what the kernel frees after a grace period (the task_struct
 * of a process that just exited, among others) is freed before the caller reads
 * /proc/meminfo; prints "settled".
 */
#include <linux/membarrier.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE_BYTES 4096UL
#define MIB_BYTES (1024UL * 1024UL)
#define PROGRESS_EVERY_MIB 64UL

static int touch(unsigned long mib, int nohuge)
{
	size_t bytes = mib * MIB_BYTES;
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("hog: mmap");
		return 1;
	}
	if (nohuge && madvise(p, bytes, MADV_NOHUGEPAGE) != 0) {
		perror("hog: madvise");
		return 1;
	}
	for (size_t off = 0; off < bytes; off += PAGE_BYTES) {
		*(volatile unsigned long *)(p + off) = off / PAGE_BYTES + 1;
		if ((off + PAGE_BYTES) % (PROGRESS_EVERY_MIB * MIB_BYTES) == 0)
			printf("progress %zu\n", (off + PAGE_BYTES) / MIB_BYTES);
	}
	printf("touched %lu\n", mib);
	return 0;
}

/* splitmix64: every word differs from its neighbours and from zero pages and poison. */
static uint64_t pattern_word(uint64_t seed, uint64_t index)
{
	uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static volatile sig_atomic_t check_requested;
static volatile sig_atomic_t exit_requested;

static void on_signal(int sig)
{
	if (sig == SIGTERM)
		exit_requested = 1;
	else
		check_requested = 1;
}

static int keep(unsigned long mib)
{
	size_t words = mib * MIB_BYTES / sizeof(uint64_t);
	uint64_t seed = (uint64_t)time(NULL) * 0x100000001b3ull ^ (uint64_t)getpid();
	struct sigaction sa;
	sigset_t blocked, waiting;
	unsigned long checks = 0;
	int failed = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGUSR1);
	sigaddset(&blocked, SIGTERM);
	/* Blocked except inside sigsuspend(): a signal sent during a check is not lost. */
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	sigdelset(&waiting, SIGUSR1);
	sigdelset(&waiting, SIGTERM);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	uint64_t *p = mmap(NULL, words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("hog: mmap");
		return 1;
	}
	for (size_t i = 0; i < words; i++)
		p[i] = pattern_word(seed, i);
	printf("filled %lu\n", mib);

	for (;;) {
		while (!check_requested && !exit_requested)
			sigsuspend(&waiting);
		check_requested = 0;
		size_t bad = 0, first = 0;
		for (size_t i = 0; i < words; i++) {
			if (((volatile uint64_t *)p)[i] != pattern_word(seed, i)) {
				if (!bad)
					first = i * sizeof(uint64_t);
				bad++;
			}
		}
		checks++;
		if (bad) {
			failed = 1;
			printf("verified %lu bad %zu first %zu\n", checks, bad, first);
		} else {
			printf("verified %lu ok\n", checks);
		}
		if (exit_requested)
			return failed;
	}
}

static int holes(unsigned long mib)
{
	size_t bytes = mib * MIB_BYTES;
	sigset_t term, waiting;

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	/* Blocked except inside sigsuspend(): a SIGTERM sent before the holes exist waits. */
	sigprocmask(SIG_BLOCK, &term, &waiting);
	sigdelset(&waiting, SIGTERM);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);

	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("hog: mmap");
		return 1;
	}
	if (madvise(p, bytes, MADV_NOHUGEPAGE) != 0) {
		perror("hog: madvise");
		return 1;
	}
	for (size_t off = 0; off < bytes; off += PAGE_BYTES)
		*(volatile unsigned long *)(p + off) = off / PAGE_BYTES + 1;
	for (size_t off = PAGE_BYTES; off < bytes; off += 2 * PAGE_BYTES) {
		if (madvise(p + off, PAGE_BYTES, MADV_DONTNEED) != 0) {
			perror("hog: madvise(MADV_DONTNEED)");
			return 1;
		}
	}
	printf("holed %lu\n", mib);
	while (!exit_requested)
		sigsuspend(&waiting);
	return 0;
}

static int parse_mib(const char *s, unsigned long *mib)
{
	char *end;

	*mib = strtoul(s, &end, 10);
	if (*end != '\0' || *mib == 0) {
		fprintf(stderr, "hog: bad size '%s'\n", s);
		return 0;
	}
	return 1;
}

static int rcu_settle(void)
{
	/* The second grace period starts after the first one's callbacks were queued to run. */
	for (int i = 0; i < 2; i++) {
		if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
			perror("hog: membarrier");
			return 1;
		}
	}
	printf("settled\n");
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long mib;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && strcmp(argv[1], "rcu-settle") == 0)
		return rcu_settle();
	if (argc == 3 && strcmp(argv[1], "keep") == 0)
		return parse_mib(argv[2], &mib) ? keep(mib) : 2;
	if (argc == 3 && strcmp(argv[1], "holes") == 0)
		return parse_mib(argv[2], &mib) ? holes(mib) : 2;
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "nohuge") != 0)) {
		fprintf(stderr, "usage: hog MIB [nohuge] | hog keep MIB | hog holes MIB |"
				" hog rcu-settle\n");
		return 2;
	}
	if (!parse_mib(argv[1], &mib))
		return 2;
	return touch(mib, argc == 3);
}
