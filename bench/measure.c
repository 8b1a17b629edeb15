/*
 * bench/measure.c: marks the measured work of a bench/ir run for callgrind.
 *
 *   valgrind --tool=callgrind --collect-atstart=no ...
 *
 * counts only what runs inside ir_measured(fn, arg), which calls fn(arg)
 * between two callgrind client requests that toggle collection (no-ops
 * outside valgrind; callgrind's own --toggle-collect=<function> loses the
 * frame when fn is a libffi closure, as ctypes makes for Python): the
 * measured loop of bench/ir.c (linked in), of bench/ir.py (through ctypes,
 * from build/bench/libmeasure.so) and of bench/ir.lua (this file built with
 * IR_LUA_MODULE as the Lua module "measure": measure.run(f, ...) calls
 * f(...) inside it).  Set-up, warm-up and exit stay out: what they execute
 * varies from run to run with the interpreters' randomized string hashing,
 * by more than a unit's cost times N in the sendrecv modes.
 */
#include <valgrind/callgrind.h>

void ir_measured(void (*fn)(void *), void *arg);

void ir_measured(void (*fn)(void *), void *arg)
{
	CALLGRIND_TOGGLE_COLLECT;
	fn(arg);
	CALLGRIND_TOGGLE_COLLECT;
}

#ifdef IR_LUA_MODULE
#include <lauxlib.h>
#include <lua.h>

int luaopen_measure(lua_State *L);

static void call(void *L)
{
	lua_call(L, lua_gettop(L) - 1, 0);
}

/* measure.run(f, ...): f(...), inside ir_measured */
static int l_run(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	ir_measured(call, L);
	return 0;
}

int luaopen_measure(lua_State *L)
{
	lua_newtable(L);
	lua_pushcfunction(L, l_run);
	lua_setfield(L, -2, "run");
	return 1;
}
#endif
