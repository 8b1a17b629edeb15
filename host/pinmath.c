/*
 * pinmath.c: the portable hosts' maths at glibc's first symbol versions.
 *
 *   make portable   links this file and -Wl,--wrap=exp,--wrap=log,... (PIN_MATH)
 *
 * glibc 2.29 gave exp, log, log2, pow and exp2 new symbol versions (without
 * the old SVID error wrappers), so a static Lua library built on any newer
 * glibc asks for GLIBC_2.29, which RHEL 8 (2.28) lacks.  The linker sends the
 * library's calls here (--wrap), and each goes on to the version every
 * x86_64 glibc has (GLIBC_2.2.5): the same results for every value Lua
 * passes, errno aside, which Lua does not read.
 */
#include <math.h>

#define PIN(name) \
	double ibvl_##name##_old(double); \
	double __wrap_##name(double); \
	__asm__(".symver ibvl_" #name "_old, " #name "@GLIBC_2.2.5"); \
	double __wrap_##name(double x) { return ibvl_##name##_old(x); }

PIN(exp)
PIN(log)
PIN(log2)
PIN(exp2)

double ibvl_pow_old(double, double);
double __wrap_pow(double, double);
__asm__(".symver ibvl_pow_old, pow@GLIBC_2.2.5");
double __wrap_pow(double x, double y)
{
	return ibvl_pow_old(x, y);
}
