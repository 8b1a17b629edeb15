/*
 * measure/samples.h: sample buffers (ibv.samples, samples.c) that the
 * measurement kernels (lat.c) fill without allocating, and the clock they
 * read.  Above compat.h.
 */
#ifndef IBVL_SAMPLES_H
#define IBVL_SAMPLES_H

#include <stdint.h>
#include <time.h>

#include "base/compat.h"

/* One sample: a kernel writes clock ticks while it runs and turns them into
 * seconds when it ends (ibvl_samples_seconds); scripts only see seconds. */
union ibvl_sample {
	uint64_t ticks;
	double seconds;
};

struct ibvl_samples {
	long long n;      /* capacity */
	long long count;  /* samples held, in the order taken: v[0..count) */
	int sorted;       /* v[n..n+count) holds them sorted */
	union ibvl_sample v[]; /* 2n: as taken, then sorted */
};

#define IBVL_SAMPLES "ibverbs.samples"
struct ibvl_samples *ibvl_check_samples(lua_State *L, int arg);
struct ibvl_samples *ibvl_test_samples(lua_State *L, int idx);

/* The kernels' clock: the CPU's time-stamp counter on x86 (what perftest
 * reads), calibrated against CLOCK_MONOTONIC over each run; elsewhere
 * CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t ibvl_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* A run's calibration: ticks and CLOCK_MONOTONIC read together at its start
 * (ibvl_clock_start) and end; ibvl_clock_scale gives seconds per tick. */
struct ibvl_clock {
	uint64_t t0, t1;
	double s0, s1;
};
void ibvl_clock_start(struct ibvl_clock *c);
double ibvl_clock_scale(struct ibvl_clock *c); /* reads the end */

/* Turns the count samples the kernel wrote as ticks into seconds. */
void ibvl_samples_seconds(struct ibvl_samples *s, long long count, double scale);

void ibvl_open_samples(lua_State *L); /* ibv.samples */

#endif
