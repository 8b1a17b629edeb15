/*
 * ibvlua: the lua-ibverbs scripting host.  One program with the interpreter
 * (Lua 5.4 or LuaJIT, linked statically), ibverbs.core and every Lua module of
 * lua-ibverbs built in; it needs only rdma-core and libc on the node.
 *
 *   ibvlua script.lua args...        arg[0] = script, arg[1..] = args
 *   ibvlua fabric_check args...      a built-in tool (lua/ibverbs/tools.lua) when no
 *                                    file has that name: devinfo, fabric_check,
 *                                    fabric_matrix, rc_pingpong, send_bw, ...
 *   ibvlua -e 'print(1)' -l mod -i -v -E -W -- -   the lua(1) options
 *   ibvlua --version                  host, Lua, then what the node has and lacks
 *   ibvlua -i                         prompt with ibv = require "ibverbs" loaded
 *
 * It exports the Lua API (linked with -Wl,-E), so C modules from the system
 * path (luasocket, lfs) load into it as into lua5.4.  The prompt uses GNU
 * readline when libreadline.so.8 (or .7) can be opened at run time, plain
 * line input otherwise (or with IBVLUA_READLINE=0): host/repl.c.  Ctrl-C in a running
 * chunk raises "interrupted!" (a second one kills the process, as in lua);
 * at the prompt it drops the line and prompts again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#ifdef LUA_LJDIR
#include <luajit.h>
#endif

#include "ibverbs.h"
#include "ibvlua.h"

#define IBVLUA_VERSION "0.1"

#ifdef LUA_LJDIR
#define LUA_BANNER LUAJIT_VERSION " -- " LUAJIT_COPYRIGHT ". " LUAJIT_URL
#else
#define LUA_BANNER LUA_COPYRIGHT
#endif

const char *ibvlua_progname = "ibvlua";
static lua_State *globalL;
static int exit_status = EXIT_SUCCESS; /* a tool's (handle_tool) */

/* ---- messages -------------------------------------------------------------- */
void ibvlua_message(const char *pname, const char *msg)
{
	if (pname)
		fprintf(stderr, "%s: ", pname);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
}

int ibvlua_report(lua_State *L, int status)
{
	if (status != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		ibvlua_message(ibvlua_progname, msg ? msg : "(error object is not a string)");
		lua_pop(L, 1);
	}
	return status;
}

static void print_usage(const char *badoption)
{
	if (badoption[1] == 'e' || badoption[1] == 'l')
		fprintf(stderr, "%s: '%s' needs argument\n", ibvlua_progname, badoption);
	else
		fprintf(stderr, "%s: unrecognized option '%s'\n", ibvlua_progname, badoption);
	fprintf(stderr,
	        "usage: %s [options] [script [args]]\n"
	        "       %s [options] tool [args]   (a built-in tool: devinfo, fabric_check,\n"
	        "                                  fabric_matrix, the pingpongs, perftest's tests)\n"
	        "Available options are:\n"
	        "  -e stat   execute string 'stat'\n"
	        "  -i        enter interactive mode after executing 'script'\n"
	        "  -l mod    require library 'mod' into global 'mod'\n"
	        "  -l g=mod  require library 'mod' into global 'g'\n"
	        "  -v        show version information\n"
	        "  -E        ignore environment variables\n"
	        "  -W        turn warnings on\n"
	        "  --version what this node has and lacks: versions, rdma-core, devices, libraries\n"
	        "  --        stop handling options\n"
	        "  -         stop handling options and execute stdin\n",
	        ibvlua_progname, ibvlua_progname);
}

/* ---- SIGINT while a chunk runs (as lua.c) ----------------------------------- */
void ibvlua_set_signal(int sig, void (*handler)(int), int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void lstop(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	lua_sethook(L, NULL, 0, 0);
	luaL_error(L, "interrupted!");
}

static void laction(int sig)
{
	int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
	ibvlua_set_signal(sig, SIG_DFL, 1); /* a second Ctrl-C ends the process */
	lua_sethook(globalL, lstop, flag, 1);
}

static int msghandler(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (msg == NULL) {
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			return 1;
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

int ibvlua_docall(lua_State *L, int narg, int nres)
{
	int base = lua_gettop(L) - narg;
	lua_pushcfunction(L, msghandler);
	lua_insert(L, base);
	globalL = L;
	ibvlua_set_signal(SIGINT, laction, 1);
	int status = lua_pcall(L, narg, nres, base);
	ibvlua_set_signal(SIGINT, SIG_DFL, 1);
	lua_remove(L, base);
	return status;
}

/* ---- versions ---------------------------------------------------------------- */
static void print_version(void)
{
	printf("ibvlua %s (lua-ibverbs scripting host), %s\n", IBVLUA_VERSION, LUA_BANNER);
	fflush(stdout);
}

/* --version: the host's line and the Lua it links, then the node report
 * (lua/ibverbs/node_report.lua, built in): rdma-core, devices and providers,
 * the tools' libraries, what the node lacks. */
static int full_version(lua_State *L)
{
#ifdef LUA_LJDIR
	const char *lua = LUAJIT_VERSION;
#else
	const char *lua = LUA_RELEASE;
#endif
	lua_getglobal(L, "require");
	lua_pushliteral(L, "ibverbs.node_report");
	if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
		lua_getfield(L, -1, "print");
		lua_createtable(L, 0, 2);
		lua_pushliteral(L, "ibvlua " IBVLUA_VERSION);
		lua_setfield(L, -2, "host");
		lua_pushfstring(L, "%s (linked in)", lua);
		lua_setfield(L, -2, "lua");
		if (lua_pcall(L, 1, 0, 0) == LUA_OK)
			return 0;
	}
	printf("ibvlua %s\nlua: %s (linked in)\nthe node report failed: %s\n", IBVLUA_VERSION, lua,
	       lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
	fflush(stdout);
	return 1;
}

/* ---- running chunks ------------------------------------------------------------ */
static void createargtable(lua_State *L, char **argv, int argc, int script)
{
	if (script == argc)
		script = 0; /* no script name: the last argument is arg[0] (as lua) */
	lua_createtable(L, argc - (script + 1), script + 1);
	for (int i = 0; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - script);
	}
	lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status)
{
	if (status == LUA_OK)
		status = ibvlua_docall(L, 0, 0);
	return ibvlua_report(L, status);
}

static int dofile(lua_State *L, const char *name)
{
	return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name)
{
	return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod, -l g=mod */
static int dolibrary(lua_State *L, char *globname)
{
	char *modname = strchr(globname, '=');
	if (modname == NULL)
		modname = globname;
	else
		*modname++ = '\0';
	lua_getglobal(L, "require");
	lua_pushstring(L, modname);
	int status = ibvlua_docall(L, 1, 1);
	if (status == LUA_OK)
		lua_setglobal(L, globname);
	return ibvlua_report(L, status);
}

static int pushargs(lua_State *L)
{
	lua_getglobal(L, "arg");
	if (!lua_istable(L, -1))
		luaL_error(L, "'arg' is not a table");
	int n = (int)lua_rawlen(L, -1);
	luaL_checkstack(L, n + 3, "too many arguments to script");
	for (int i = 1; i <= n; i++)
		lua_rawgeti(L, -i, i);
	lua_remove(L, -n - 1);
	return n;
}

static int handle_script(lua_State *L, char **argv)
{
	const char *fname = argv[0];
	if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
		fname = NULL; /* stdin */
	int status = luaL_loadfile(L, fname);
	if (status == LUA_OK) {
		int n = pushargs(L);
		status = ibvlua_docall(L, n, LUA_MULTRET);
	}
	return ibvlua_report(L, status);
}

/* A tool rather than a script: a name with no '/' or '.' that no file has. */
static int is_tool_name(const char *name)
{
	return strpbrk(name, "/.") == NULL && strcmp(name, "-") != 0 && access(name, F_OK) != 0;
}

/* ibvlua <tool> [args]: ibverbs.tools.host(name, arg, "ibvlua <tool>") runs
 * the tool (its usage named so); its result is the exit status, or nil and
 * the message for a name that is no tool either. */
static int handle_tool(lua_State *L, const char *name)
{
	const char *base = strrchr(ibvlua_progname, '/');
	lua_getglobal(L, "require");
	lua_pushliteral(L, "ibverbs.tools");
	int status = ibvlua_docall(L, 1, 1);
	if (status != LUA_OK)
		return ibvlua_report(L, status);
	lua_getfield(L, -1, "host");
	lua_pushstring(L, name);
	lua_getglobal(L, "arg");
	lua_pushfstring(L, "%s %s", base ? base + 1 : ibvlua_progname, name);
	status = ibvlua_docall(L, 3, 2);
	if (status != LUA_OK)
		return ibvlua_report(L, status);
	if (lua_isnil(L, -2)) {
		ibvlua_message(ibvlua_progname, lua_tostring(L, -1));
		return LUA_ERRRUN;
	}
	exit_status = (int)lua_tointeger(L, -2);
	lua_pop(L, 3);
	return LUA_OK;
}

/* ---- options -------------------------------------------------------------------- */
#define has_error 1
#define has_i 2
#define has_v 4
#define has_e 8
#define has_E 16
#define has_version 32

static int collectargs(char **argv, int *first)
{
	int args = 0, i;
	if (argv[0] != NULL && argv[0][0])
		ibvlua_progname = argv[0];
	for (i = 1; argv[i] != NULL; i++) {
		*first = i;
		if (argv[i][0] != '-')
			return args;
		switch (argv[i][1]) {
		case '-':
			if (strcmp(argv[i], "--version") == 0) {
				args |= has_version;
				break;
			}
			if (argv[i][2] != '\0')
				return has_error;
			*first = i + 1;
			return args;
		case '\0':
			return args;
		case 'E':
			if (argv[i][2] != '\0')
				return has_error;
			args |= has_E;
			break;
		case 'W':
			if (argv[i][2] != '\0')
				return has_error;
			break;
		case 'i':
			args |= has_i; /* -i implies -v */
			/* fallthrough */
		case 'v':
			if (argv[i][2] != '\0')
				return has_error;
			args |= has_v;
			break;
		case 'e':
			args |= has_e;
			/* fallthrough */
		case 'l':
			if (argv[i][2] == '\0') {
				i++;
				if (argv[i] == NULL || argv[i][0] == '-')
					return has_error;
			}
			break;
		default:
			return has_error;
		}
	}
	*first = i;
	return args;
}

static int runargs(lua_State *L, char **argv, int n)
{
	for (int i = 1; i < n; i++) {
		int option = argv[i][1];
		switch (option) {
		case 'e':
		case 'l': {
			char *extra = argv[i] + 2;
			if (*extra == '\0')
				extra = argv[++i];
			int status = option == 'e' ? dostring(L, extra, "=(command line)")
			                           : dolibrary(L, extra);
			if (status != LUA_OK)
				return 0;
			break;
		}
		case 'W':
#if LUA_VERSION_NUM >= 504
			lua_warning(L, "@on", 0);
#endif
			break;
		default:
			break;
		}
	}
	return 1;
}

static int handle_luainit(lua_State *L)
{
#if LUA_VERSION_NUM >= 504
	const char *name = "=LUA_INIT_5_4";
	const char *init = getenv(name + 1);
	if (init == NULL) {
		name = "=LUA_INIT";
		init = getenv(name + 1);
	}
#else
	const char *name = "=LUA_INIT";
	const char *init = getenv(name + 1);
#endif
	if (init == NULL)
		return LUA_OK;
	if (init[0] == '@')
		return dofile(L, init + 1);
	return dostring(L, init, name);
}

/* ---- main ---------------------------------------------------------------------------- */
static int pmain(lua_State *L)
{
	int argc = (int)lua_tointeger(L, 1);
	char **argv = lua_touserdata(L, 2);
	int script;
	int args = collectargs(argv, &script);
	if (args == has_error) {
		print_usage(argv[script]);
		return 0;
	}
	if (args & has_v)
		print_version();
	if (args & has_E) {
		lua_pushboolean(L, 1);
		lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
	}
	luaL_openlibs(L);
	ibvl_preload(L);
	createargtable(L, argv, argc, script);
#if LUA_VERSION_NUM >= 504
	lua_gc(L, LUA_GCGEN, 0, 0);
#endif
	if (args & has_version) {
		lua_pushboolean(L, full_version(L) == 0);
		return 1;
	}
	if (!(args & has_E) && handle_luainit(L) != LUA_OK)
		return 0;
	if (!runargs(L, argv, script))
		return 0;
	if (script < argc && (is_tool_name(argv[script]) ? handle_tool(L, argv[script])
	                                                 : handle_script(L, argv + script)) != LUA_OK)
		return 0;
	if (args & has_i) {
		ibvlua_repl(L);
	} else if (script == argc && !(args & (has_e | has_v))) {
		if (isatty(0)) {
			print_version();
			ibvlua_repl(L);
		} else {
			if (dofile(L, NULL) != LUA_OK)
				return 0;
		}
	}
	lua_pushboolean(L, 1);
	return 1;
}

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	if (L == NULL) {
		ibvlua_message(argv[0], "cannot create state: not enough memory");
		return EXIT_FAILURE;
	}
	lua_pushcfunction(L, pmain);
	lua_pushinteger(L, argc);
	lua_pushlightuserdata(L, argv);
	int status = lua_pcall(L, 2, 1, 0);
	int result = lua_toboolean(L, -1);
	ibvlua_report(L, status);
	lua_close(L);
	return (result && status == LUA_OK) ? exit_status : EXIT_FAILURE;
}
