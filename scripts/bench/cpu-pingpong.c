// cpu-pingpong.c: the machine's own floor for host all-gathers: two
// processes, pinned to CPUs 0 and 1, bounce a counter through shared
// memory (one cache line each way) ITERS times after 1000 untimed ones (the second process may
// start on the first's CPU); prints the mean round trip and how many
// round trips took longer than 10 us (another thread had the CPU).
//   gcc -O2 -o /tmp/cpu-pingpong scripts/bench/cpu-pingpong.c
//   /tmp/cpu-pingpong [ITERS]
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	volatile uint64_t *line = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (line == MAP_FAILED || iters <= 0) {
		fprintf(stderr, "usage: cpu-pingpong [ITERS > 0]\n");
		return 2;
	}
	volatile uint64_t *ping = line, *pong = line + 16, *ready = line + 32; // 128 bytes apart
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
	const long warm = 1000;
	uint64_t start = 0, prev = 0, slow = 0;
	for (long i = 1; i <= warm + iters; i++) {
		if (me == 0 && i == warm + 1)
			start = prev = now_ns();
		if (me == 0) {
			*ping = i;
			while (*pong != (uint64_t)i)
				;
			if (i > warm) {
				uint64_t t = now_ns();
				slow += t - prev > 10000;
				prev = t;
			}
		} else {
			while (*ping != (uint64_t)i)
				;
			*pong = i;
		}
	}
	if (me == 0) {
		double s = (now_ns() - start) / 1e9;
		printf("%ld round trips: %.3f us each, %lu over 10 us\n", iters, s * 1e6 / iters, (unsigned long)slow);
		wait(0);
	}
	return 0;
}
