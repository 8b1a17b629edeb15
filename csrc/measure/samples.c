/*
 * samples.c: sample buffers and their statistics, as perftest reports them.
 *
 *   local s = ibv.samples(1000)          -- room for 1000 samples (seconds)
 *   local s2 = ibv.samples{1e-6, 2e-6}   -- or these samples (for scripts, specs)
 *   ibv.lat_send{..., samples = s}       -- a kernel fills it (lat.c)
 *   s:count(), #s, s:get(i), s:sorted(i) -- as taken, and i-th smallest
 *   local st = s:stats([tail])           -- count, min, max, median, average,
 *                                        -- stddev, p99, p99_9 (seconds)
 *   s:percentile(99.5 [, tail])
 *   local counts, lo, width = s:histogram(20 [, lo, hi])
 *
 * tail leaves out the tail largest samples as perftest does (its
 * LAT_MEASURE_TAIL is 2): m = count - tail samples make the median, average
 * and standard deviation (population); min is the smallest, max the sample
 * at sorted index m (the largest when tail is 0); percentile p is the sample
 * at sorted 0-based index ceil(m * p/100) (perftest's rule), the largest
 * when past the end.  The buffer holds room for a sorted copy, made once
 * after the samples change: by the kernel as it ends (its ticks sorted by
 * radix, then turned into seconds), else at the first call that needs it;
 * the sort borrows a scratch buffer from the C heap and frees it at once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"
#include "base/err.h"
#include "base/object.h"
#include "base/wait.h"
#include "measure/samples.h"

static const char samples_key; /* its metatable, by address (ibvl_type_key) */

struct ibvl_samples *ibvl_test_samples(lua_State *L, int idx)
{
	return ibvl_test_key(L, idx, &samples_key);
}

struct ibvl_samples *ibvl_check_samples(lua_State *L, int arg)
{
	struct ibvl_samples *s = ibvl_test_samples(L, arg);
	return s != NULL ? s : luaL_checkudata(L, arg, IBVL_SAMPLES); /* raises */
}

void ibvl_clock_start(struct ibvl_clock *c)
{
	c->s0 = ibvl_monotonic();
	c->t0 = ibvl_ticks();
}

double ibvl_clock_scale(struct ibvl_clock *c)
{
	c->t1 = ibvl_ticks();
	c->s1 = ibvl_monotonic();
#if defined(__x86_64__) || defined(__i386__)
	return c->t1 > c->t0 ? (c->s1 - c->s0) / (double)(c->t1 - c->t0) : 0.0;
#else
	return 1e-9;
#endif
}

#define DIGIT 11 /* bits a radix pass sorts by: round trips in ticks need two or three */

/* Sorts the keys a[0..n) (n <= SAMPLES_MAX; LSD radix, DIGIT bits a pass,
 * only the digits in which the keys differ) through tmp (room for n); the
 * result ends in a. */
static void sort_keys(uint64_t *a, uint64_t *tmp, long long n)
{
	uint64_t diff = 0;
	for (long long i = 1; i < n; i++)
		diff |= a[i] ^ a[0];
	uint64_t *from = a, *to = tmp;
	const uint64_t mask = (1u << DIGIT) - 1;
	for (int shift = 0; shift < 64; shift += DIGIT) {
		if (((diff >> shift) & mask) == 0)
			continue;
		uint32_t at[1u << DIGIT] = {0};
		for (long long i = 0; i < n; i++)
			at[(from[i] >> shift) & mask]++;
		for (uint32_t d = 0, sum = 0; d <= mask; d++) {
			uint32_t c = at[d];
			at[d] = sum;
			sum += c;
		}
		for (long long i = 0; i < n; i++)
			to[at[(from[i] >> shift) & mask]++] = from[i];
		uint64_t *t = from;
		from = to;
		to = t;
	}
	if (from != a)
		memcpy(a, from, (size_t)n * sizeof *a);
}

#define TOP (UINT64_C(1) << 63)

/* A double's key: the keys sort as the doubles do (negatives flipped whole,
 * the others' sign bit set); and back. */
static uint64_t key_of(double d)
{
	uint64_t b;
	memcpy(&b, &d, sizeof b);
	return b & TOP ? ~b : b | TOP;
}

static double double_of(uint64_t k)
{
	uint64_t b = k & TOP ? k & ~TOP : ~k;
	double d;
	memcpy(&d, &b, sizeof d);
	return d;
}

/* sort_keys through a scratch buffer of the C heap, freed at once; 0 when
 * it cannot be had. */
static int sort_scratch(uint64_t *a, long long n)
{
	if (n < 2)
		return 1;
	uint64_t *tmp = malloc((size_t)n * sizeof *tmp);
	if (tmp == NULL)
		return 0;
	sort_keys(a, tmp, n);
	free(tmp);
	return 1;
}

void ibvl_samples_seconds(struct ibvl_samples *s, long long count, double scale)
{
	union ibvl_sample *a = s->v + s->n;
	for (long long i = 0; i < count; i++)
		a[i].ticks = s->v[i].ticks;
	s->count = count;
	/* sorted as ticks (scale > 0 keeps their order); else sorted() tries again */
	s->sorted = sort_scratch(&a[0].ticks, count);
	if (s->sorted)
		for (long long i = 0; i < count; i++)
			a[i].seconds = (double)a[i].ticks * scale;
	for (long long i = 0; i < count; i++)
		s->v[i].seconds = (double)s->v[i].ticks * scale;
}

#define SAMPLES_MAX (1LL << 24) /* 256 MiB with the sorted copy: 16 M iterations */

/* ibv.samples(n) or ibv.samples{seconds, ...} */
static int l_samples(lua_State *L)
{
	long long n;
	int from_table = lua_type(L, 1) == LUA_TTABLE;
	if (!from_table)
		n = (long long)ibvl_check_range(L, 1, 1, SAMPLES_MAX);
	else if ((n = (long long)lua_rawlen(L, 1)) > SAMPLES_MAX)
		return ibvl_argerror(L, 1, NULL, "at most %d samples", (int)SAMPLES_MAX);
	for (long long i = 1; from_table && i <= n; i++) { /* every value read before the allocation */
		lua_rawgeti(L, 1, (lua_Integer)i);
		if (lua_type(L, -1) != LUA_TNUMBER)
			return ibvl_argerror(L, 1, NULL, "sample %d: number expected, got %s", (int)i,
			                     luaL_typename(L, -1));
		if (lua_tonumber(L, -1) != lua_tonumber(L, -1))
			return ibvl_argerror(L, 1, NULL, "sample %d: number expected, got NaN", (int)i);
		lua_pop(L, 1);
	}
	long long room = n > 0 ? n : 1;
	struct ibvl_samples *s = lua_newuserdatauv(L, sizeof *s + 2 * (size_t)room * sizeof s->v[0], 0);
	s->n = room;
	s->count = 0;
	s->sorted = 0;
	for (long long i = 0; from_table && i < n; i++) {
		lua_rawgeti(L, 1, (lua_Integer)(i + 1));
		s->v[i].seconds = (double)lua_tonumber(L, -1);
		lua_pop(L, 1);
	}
	s->count = from_table ? n : 0;
	luaL_setmetatable(L, IBVL_SAMPLES);
	return 1;
}

/* The samples sorted: v[n..n+count) (by their keys, through a buffer of
 * the C heap: "not enough memory" when it cannot be had). */
static const union ibvl_sample *sorted(lua_State *L, struct ibvl_samples *s)
{
	union ibvl_sample *a = s->v + s->n;
	if (s->sorted)
		return a;
	for (long long i = 0; i < s->count; i++)
		a[i].ticks = key_of(s->v[i].seconds);
	if (!sort_scratch(&a[0].ticks, s->count))
		luaL_error(L, "not enough memory");
	for (long long i = 0; i < s->count; i++)
		a[i].seconds = double_of(a[i].ticks);
	s->sorted = 1;
	return a;
}

/* The 1-based index at arg, within the samples held. */
static long long sample_index(lua_State *L, const struct ibvl_samples *s, int arg)
{
	lua_Integer i = luaL_checkinteger(L, arg);
	if (i < 1 || i > s->count)
		luaL_argerror(L, arg, lua_pushfstring(L, "index %d outside the %d samples held",
		                                      (int)i, (int)s->count));
	return (long long)i - 1;
}

/* The optional tail at arg: 0 <= tail < count. */
static long long opt_tail(lua_State *L, const struct ibvl_samples *s, int arg)
{
	lua_Integer t = ibvl_opt_range(L, arg, 0, 0, INT64_MAX);
	if (t > 0 && t >= s->count)
		luaL_argerror(L, arg, lua_pushfstring(L, "tail %d leaves none of the %d samples",
		                                      (int)t, (int)s->count));
	return (long long)t;
}

/* The sample at sorted index ceil(m * p/100), clamped to the last. */
static double percentile(const union ibvl_sample *a, long long count, long long m, double p)
{
	double at = ceil((double)m * (p / 100.0));
	long long i = at < 0 ? 0 : at >= (double)(count - 1) ? count - 1 : (long long)at;
	return a[i].seconds;
}

static int l_count(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)ibvl_check_samples(L, 1)->count);
	return 1;
}

static int l_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)ibvl_check_samples(L, 1)->n);
	return 1;
}

static int l_get(lua_State *L)
{
	struct ibvl_samples *s = ibvl_check_samples(L, 1);
	lua_pushnumber(L, s->v[sample_index(L, s, 2)].seconds);
	return 1;
}

static int l_sorted(lua_State *L)
{
	struct ibvl_samples *s = ibvl_check_samples(L, 1);
	long long i = sample_index(L, s, 2);
	lua_pushnumber(L, sorted(L, s)[i].seconds);
	return 1;
}

static int l_percentile(lua_State *L)
{
	struct ibvl_samples *s = ibvl_check_samples(L, 1);
	double p = (double)luaL_checknumber(L, 2);
	if (!(p >= 0 && p <= 100))
		return luaL_argerror(L, 2, "percentile between 0 and 100 expected");
	long long tail = opt_tail(L, s, 3);
	if (s->count == 0) {
		lua_pushnil(L);
		return 1;
	}
	lua_pushnumber(L, percentile(sorted(L, s), s->count, s->count - tail, p));
	return 1;
}

static void set_number(lua_State *L, const char *k, double v)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, k);
}

static int l_stats(lua_State *L)
{
	struct ibvl_samples *s = ibvl_check_samples(L, 1);
	long long tail = opt_tail(L, s, 2), n = s->count, m = n - tail;
	lua_createtable(L, 0, 8);
	ibvl_set_int(L, "count", (lua_Integer)m);
	if (n == 0)
		return 1;
	const union ibvl_sample *a = sorted(L, s);
	double sum = 0, sq = 0;
	for (long long i = 0; i < m; i++)
		sum += a[i].seconds;
	double avg = sum / (double)m;
	for (long long i = 0; i < m; i++)
		sq += (a[i].seconds - avg) * (a[i].seconds - avg);
	set_number(L, "min", a[0].seconds);
	set_number(L, "max", a[m < n - 1 ? m : n - 1].seconds);
	set_number(L, "median", m % 2 ? a[m / 2].seconds : (a[m / 2 - 1].seconds + a[m / 2].seconds) / 2);
	set_number(L, "average", avg);
	set_number(L, "stddev", sqrt(sq / (double)m));
	set_number(L, "p99", percentile(a, n, m, 99));
	set_number(L, "p99_9", percentile(a, n, m, 99.9));
	return 1;
}

/* s:histogram(bins [, lo, hi]): counts of the samples in bins equal bins
 * from lo (the smallest) to hi (the largest; the last bin holds hi);
 * samples outside are not counted.  Returns counts, lo, width. */
static int l_histogram(lua_State *L)
{
	struct ibvl_samples *s = ibvl_check_samples(L, 1);
	int bins = (int)ibvl_check_range(L, 2, 1, 1 << 20);
	const union ibvl_sample *a = s->count > 0 ? sorted(L, s) : NULL;
	double lo = (double)luaL_optnumber(L, 3, a ? a[0].seconds : 0);
	double hi = (double)luaL_optnumber(L, 4, a ? a[s->count - 1].seconds : 0);
	if (!(hi >= lo))
		return luaL_argerror(L, 4, "hi below lo");
	double width = (hi - lo) / bins;
	lua_createtable(L, bins, 0);
	long long k = 0;
	for (int b = 0; b < bins; b++) {
		double top = b == bins - 1 ? hi : lo + width * (b + 1);
		long long c = 0;
		while (k < s->count && a[k].seconds < lo)
			k++;
		while (k < s->count && (a[k].seconds < top || (b == bins - 1 && a[k].seconds <= hi)))
			k++, c++;
		lua_pushinteger(L, (lua_Integer)c);
		lua_rawseti(L, -2, b + 1);
	}
	lua_pushnumber(L, lo);
	lua_pushnumber(L, width);
	return 3;
}

void ibvl_open_samples(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"count", l_count}, {"get", l_get}, {"sorted", l_sorted}, {"stats", l_stats},
		{"percentile", l_percentile}, {"histogram", l_histogram}, {NULL, NULL},
	};
	ibvl_register_plain(L, IBVL_SAMPLES, methods, l_len);
	lua_pop(L, 1);
	ibvl_type_key(L, IBVL_SAMPLES, &samples_key);
	lua_pushcfunction(L, l_samples);
	lua_setfield(L, -2, "samples");
}
