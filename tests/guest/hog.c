// SPDX-License-Identifier: GPL-2.0
/*
 * hog: allocate and touch anonymous memory inside the test guest (busybox has no stress tool).
 *
 *   hog MIB [nohuge]
 *
 * Maps MIB MiB of private anonymous memory, writes one non-zero word into every 4 KiB page
 * (enough to make the kernel back each page with its own frame), prints how far it got every
 * 64 MiB, then "touched MIB" and exits 0, which frees everything.  With "nohuge" it asks for
 * 4 KiB pages (MADV_NOHUGEPAGE), so every page is one page fault (the stats test counts them).
 * If the kernel cannot find the memory the process is OOM-killed and the caller sees the signal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE_BYTES 4096UL
#define MIB_BYTES (1024UL * 1024UL)
#define PROGRESS_EVERY_MIB 64UL

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "nohuge") != 0)) {
		fprintf(stderr, "usage: hog MIB [nohuge]\n");
		return 2;
	}
	char *end;
	unsigned long mib = strtoul(argv[1], &end, 10);
	if (*end != '\0' || mib == 0) {
		fprintf(stderr, "hog: bad size '%s'\n", argv[1]);
		return 2;
	}
	size_t bytes = mib * MIB_BYTES;
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("hog: mmap");
		return 1;
	}
	if (argc == 3 && madvise(p, bytes, MADV_NOHUGEPAGE) != 0) {
		perror("hog: madvise");
		return 1;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	for (size_t off = 0; off < bytes; off += PAGE_BYTES) {
		*(volatile unsigned long *)(p + off) = off / PAGE_BYTES + 1;
		if ((off + PAGE_BYTES) % (PROGRESS_EVERY_MIB * MIB_BYTES) == 0)
			printf("progress %zu\n", (off + PAGE_BYTES) / MIB_BYTES);
	}
	printf("touched %lu\n", mib);
	return 0;
}
