// cpu-pingpong.c: the machine's own floor for host all-gathers. Two
// processes, pinned to CPUs 0 and 1, after 1000 untimed rounds:
//   cpu-pingpong [ITERS]        bounce a counter through shared memory (one
//                               cache line each way) ITERS times: the mean
//                               round trip;
//   cpu-pingpong ITERS BYTES    ITERS exchanges as a 2-rank all-gather of
//                               2 x BYTES makes them: each side copies BYTES
//                               into the other's staging buffer (two, by
//                               parity), raises its flag, waits for the
//                               other's and copies the other's BYTES out:
//                               the mean exchange;
//   cpu-pingpong ITERS BYTES RUNS   RUNS such runs of ITERS exchanges, each
//                               after both sides slept 20 ms (as ranks
//                               wait in a socket between benchmark runs),
//                               the first one untimed: each run's mean
//                               exchange, and max / min.
// The first two also print how many rounds took longer than 10 us
// (another thread had the CPU). Build: gcc -O2 -o /tmp/cpu-pingpong scripts/bench/cpu-pingpong.c
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

enum { warm = 1000, maxBytes = 1 << 20 };

int main(int argc, char **argv) {
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	long bytes = argc > 2 ? atol(argv[2]) : -1; // -1: ping-pong
	long runs = argc > 3 ? atol(argv[3]) : 0;
	if (iters <= 0 || bytes < -1 || bytes > maxBytes || runs < 0 || (runs > 0 && bytes < 0)) {
		fprintf(stderr, "usage: cpu-pingpong [ITERS > 0 [BYTES 0..%d [RUNS]]]\n", maxBytes);
		return 2;
	}
	// Flags, 128 bytes apart, then per side two staging buffers (by
	// parity), then per side a source and an output buffer (private to
	// the side, but shared memory like a window).
	size_t stage = (size_t)maxBytes;
	size_t size = 4096 + 2 * 2 * stage + 2 * 2 * stage;
	volatile uint64_t *flags = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (flags == MAP_FAILED) {
		perror("cpu-pingpong: mmap");
		return 1;
	}
	char *base = (char *)flags + 4096;
	volatile uint64_t *ready = flags + 32;
	pid_t pid = fork();
	if (pid < 0) {
		perror("cpu-pingpong: fork");
		return 1;
	}
	int me = pid == 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(me, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		// Both on one CPU, the two would take turns by time slice.
		perror("cpu-pingpong: CPUs 0 and 1");
		if (me == 0)
			kill(pid, SIGKILL);
		else
			*ready = 2;
		return 1;
	}
	if (me == 1)
		*ready = 1;
	else
		while (*ready == 0)
			;
	if (*ready != 1) {
		wait(0);
		return 1;
	}
	volatile uint64_t *mine = flags + 16 * me, *theirs = flags + 16 * (1 - me);
	char *stageIn = base + (size_t)me * 2 * stage;           // mine, by parity
	char *stageOut = base + (size_t)(1 - me) * 2 * stage;    // the other's
	char *src = base + 4 * stage + (size_t)me * 2 * stage;
	char *out = src + stage;
	if (bytes > 0)
		memset(src, me + 1, (size_t)bytes);
	if (runs > 0) {
		uint64_t i = 0;
		double lo = 1e30, hi = 0;
		for (long r = 0; r <= runs; r++) {
			usleep(20000);
			i++; // line up
			__atomic_store_n(mine, i, __ATOMIC_RELEASE);
			while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) < i)
				;
			uint64_t t0 = now_ns();
			for (long k = 0; k < iters; k++) {
				i++;
				size_t par = (size_t)(i & 1) * stage;
				memcpy(stageOut + par, src, (size_t)bytes);
				__atomic_store_n(mine, i, __ATOMIC_RELEASE);
				while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) < i)
					;
				memcpy(out, stageIn + par, (size_t)bytes);
			}
			double us = (now_ns() - t0) / 1e3 / iters;
			if (me == 0 && r > 0) {
				printf("%.3f ", us);
				lo = us < lo ? us : lo;
				hi = us > hi ? us : hi;
			}
		}
		if (me == 0) {
			printf("(%.2f)\n", hi / lo);
			wait(0);
		}
		return 0;
	}
	uint64_t start = 0, prev = 0, slow = 0;
	for (long i = 1; i <= warm + iters; i++) {
		if (me == 0 && i == warm + 1)
			start = prev = now_ns();
		if (bytes < 0) {
			if (me == 0) {
				*mine = i;
				while (*theirs != (uint64_t)i)
					;
			} else {
				while (*theirs != (uint64_t)i)
					;
				*mine = i;
			}
		} else {
			size_t par = (size_t)(i & 1) * stage;
			memcpy(stageOut + par, src, (size_t)bytes);
			__atomic_store_n(mine, (uint64_t)i, __ATOMIC_RELEASE);
			while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) < (uint64_t)i)
				;
			memcpy(out, stageIn + par, (size_t)bytes);
		}
		if (me == 0 && i > warm) {
			uint64_t t = now_ns();
			slow += t - prev > 10000;
			prev = t;
		}
	}
	if (me == 0) {
		double s = (now_ns() - start) / 1e9;
		printf("%ld %s: %.3f us each, %lu over 10 us\n", iters, bytes < 0 ? "round trips" : "exchanges",
		       s * 1e6 / iters, (unsigned long)slow);
		wait(0);
	}
	return 0;
}
