/*
 * ibvlua.h: what ibvlua.c (options, chunks, tools, main) and repl.c (the
 * prompt) share: messages, protected calls under SIGINT, the prompt.
 */
#ifndef IBVLUA_H
#define IBVLUA_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#if LUA_VERSION_NUM < 502
#define lua_rawlen(L, i) lua_objlen(L, (i))
#endif

extern const char *ibvlua_progname; /* messages' prefix; none at the prompt */
void ibvlua_message(const char *pname, const char *msg);
int ibvlua_report(lua_State *L, int status); /* prints an error, pops it */
void ibvlua_set_signal(int sig, void (*handler)(int), int restart);
int ibvlua_docall(lua_State *L, int narg, int nres); /* lua_pcall, traceback, SIGINT */
void ibvlua_repl(lua_State *L); /* repl.c */

#endif
