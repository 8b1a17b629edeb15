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
 * line input otherwise (or with IBVLUA_READLINE=0).  Ctrl-C in a running
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

#define IBVLUA_VERSION "0.1"

#if LUA_VERSION_NUM < 502
#define lua_rawlen(L, i) lua_objlen(L, (i))
#endif
#ifdef LUA_LJDIR
#define LUA_BANNER LUAJIT_VERSION " -- " LUAJIT_COPYRIGHT ". " LUAJIT_URL
#else
#define LUA_BANNER LUA_COPYRIGHT
#endif

static const char *progname = "ibvlua";
static lua_State *globalL;
static int exit_status = EXIT_SUCCESS; /* a tool's (handle_tool) */

/* ---- messages -------------------------------------------------------------- */
static void l_message(const char *pname, const char *msg)
{
	if (pname)
		fprintf(stderr, "%s: ", pname);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
}

static int report(lua_State *L, int status)
{
	if (status != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		l_message(progname, msg ? msg : "(error object is not a string)");
		lua_pop(L, 1);
	}
	return status;
}

static void print_usage(const char *badoption)
{
	if (badoption[1] == 'e' || badoption[1] == 'l')
		fprintf(stderr, "%s: '%s' needs argument\n", progname, badoption);
	else
		fprintf(stderr, "%s: unrecognized option '%s'\n", progname, badoption);
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
	        progname, progname);
}

/* ---- SIGINT while a chunk runs (as lua.c) ----------------------------------- */
static void set_signal(int sig, void (*handler)(int), int restart)
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
	set_signal(sig, SIG_DFL, 1); /* a second Ctrl-C ends the process */
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

static int docall(lua_State *L, int narg, int nres)
{
	int base = lua_gettop(L) - narg;
	lua_pushcfunction(L, msghandler);
	lua_insert(L, base);
	globalL = L;
	set_signal(SIGINT, laction, 1);
	int status = lua_pcall(L, narg, nres, base);
	set_signal(SIGINT, SIG_DFL, 1);
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
		status = docall(L, 0, 0);
	return report(L, status);
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
	int status = docall(L, 1, 1);
	if (status == LUA_OK)
		lua_setglobal(L, globname);
	return report(L, status);
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
		status = docall(L, n, LUA_MULTRET);
	}
	return report(L, status);
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
	const char *base = strrchr(progname, '/');
	lua_getglobal(L, "require");
	lua_pushliteral(L, "ibverbs.tools");
	int status = docall(L, 1, 1);
	if (status != LUA_OK)
		return report(L, status);
	lua_getfield(L, -1, "host");
	lua_pushstring(L, name);
	lua_getglobal(L, "arg");
	lua_pushfstring(L, "%s %s", base ? base + 1 : progname, name);
	status = docall(L, 3, 2);
	if (status != LUA_OK)
		return report(L, status);
	if (lua_isnil(L, -2)) {
		l_message(progname, lua_tostring(L, -1));
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
		progname = argv[0];
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

/* ---- the prompt ---------------------------------------------------------------------- */
#define READ_OK 0
#define READ_EOF 1
#define READ_INTERRUPTED 2

static volatile sig_atomic_t prompt_sigint;

static void on_prompt_sigint(int sig)
{
	(void)sig;
	prompt_sigint = 1;
}

/* GNU readline, opened at run time: the program does not need it. */
static struct {
	void *lib;
	void (*install)(const char *, void (*)(char *));
	void (*read_char)(void);
	void (*remove)(void);
	void (*free_line_state)(void);
	void (*sigcleanup)(void);
	void (*cleanup_after_signal)(void);
	void (*add_history)(const char *);
	int *catch_signals;
} rl;

static void open_readline(void)
{
	const char *want = getenv("IBVLUA_READLINE");
	if (want != NULL && strcmp(want, "0") == 0)
		return;
	if (!isatty(0))
		return;
	const char *names[] = {"libreadline.so.8", "libreadline.so.7", "libreadline.so", NULL};
	for (int i = 0; names[i] != NULL && rl.lib == NULL; i++)
		rl.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (rl.lib == NULL)
		return;
	*(void **)&rl.install = dlsym(rl.lib, "rl_callback_handler_install");
	*(void **)&rl.read_char = dlsym(rl.lib, "rl_callback_read_char");
	*(void **)&rl.remove = dlsym(rl.lib, "rl_callback_handler_remove");
	*(void **)&rl.free_line_state = dlsym(rl.lib, "rl_free_line_state");
	*(void **)&rl.sigcleanup = dlsym(rl.lib, "rl_callback_sigcleanup"); /* readline 7+ */
	*(void **)&rl.cleanup_after_signal = dlsym(rl.lib, "rl_cleanup_after_signal");
	*(void **)&rl.add_history = dlsym(rl.lib, "add_history");
	rl.catch_signals = dlsym(rl.lib, "rl_catch_signals");
	const char **rl_name = dlsym(rl.lib, "rl_readline_name");
	if (!rl.install || !rl.read_char || !rl.remove || !rl.free_line_state ||
	    !rl.cleanup_after_signal || !rl.add_history || !rl.catch_signals) {
		dlclose(rl.lib);
		rl.lib = NULL;
		return;
	}
	*rl.catch_signals = 0; /* SIGINT is ours */
	if (rl_name != NULL)
		*rl_name = "ibvlua";
}

static char *rl_line;
static int rl_done;

static void rl_callback(char *line)
{
	rl_line = line;
	rl_done = 1;
	rl.remove();
}

/* One line without its newline (malloc'd) in *out. */
static int read_line(const char *prompt, char **out)
{
	int result = READ_OK;
	prompt_sigint = 0;
	set_signal(SIGINT, on_prompt_sigint, 0); /* no SA_RESTART: the read returns */
	*out = NULL;
	if (rl.lib != NULL) {
		rl_done = 0;
		rl_line = NULL;
		rl.install(prompt, rl_callback);
		while (!rl_done) {
			struct pollfd p = {.fd = 0, .events = POLLIN};
			int r = poll(&p, 1, -1);
			if (r < 0 && errno == EINTR && !prompt_sigint)
				continue;
			if (r < 0) {
				rl.free_line_state();
				if (rl.sigcleanup)
					rl.sigcleanup();
				rl.cleanup_after_signal();
				rl.remove();
				result = prompt_sigint ? READ_INTERRUPTED : READ_EOF;
				break;
			}
			rl.read_char();
		}
		if (result == READ_OK) {
			*out = rl_line;
			if (rl_line == NULL)
				result = READ_EOF;
			else if (rl_line[0] != '\0')
				rl.add_history(rl_line);
		}
	} else {
		fputs(prompt, stdout);
		fflush(stdout);
		size_t cap = 256, len = 0;
		char *buf = malloc(cap);
		for (;;) {
			if (buf == NULL) {
				result = READ_EOF;
				break;
			}
			if (fgets(buf + len, (int)(cap - len), stdin) == NULL) {
				result = prompt_sigint ? READ_INTERRUPTED : len > 0 ? READ_OK : READ_EOF;
				clearerr(stdin);
				break;
			}
			len += strlen(buf + len);
			if (len > 0 && buf[len - 1] == '\n') {
				buf[--len] = '\0';
				break;
			}
			if (len + 1 == cap) {
				char *nb = realloc(buf, cap *= 2);
				if (nb == NULL)
					free(buf);
				buf = nb;
			}
		}
		if (result == READ_OK)
			*out = buf;
		else
			free(buf);
	}
	if (result == READ_INTERRUPTED) {
		fputs("\n", stdout);
		fflush(stdout);
	}
	set_signal(SIGINT, SIG_DFL, 1);
	return result;
}

static const char *get_prompt(lua_State *L, int first)
{
	lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2");
	const char *p = lua_tostring(L, -1);
	if (p == NULL)
		p = first ? "> " : ">> ";
	lua_pop(L, 1);
	return p;
}

static int incomplete(lua_State *L, int status)
{
	if (status != LUA_ERRSYNTAX)
		return 0;
	size_t lmsg;
	const char *msg = lua_tolstring(L, -1, &lmsg);
	if ((lmsg >= 5 && strcmp(msg + lmsg - 5, "<eof>") == 0) ||
	    (lmsg >= 6 && strcmp(msg + lmsg - 6, "<eof>'") == 0)) {
		lua_pop(L, 1);
		return 1;
	}
	return 0;
}

/* Reads and compiles one statement or expression (several lines when
 * incomplete); leaves the chunk (or an error) on the stack.  -1: end of input. */
static int loadline(lua_State *L)
{
	char *line;
	int r = read_line(get_prompt(L, 1), &line);
	if (r == READ_EOF)
		return -1;
	if (r == READ_INTERRUPTED) {
		lua_pushliteral(L, "");
		return -2;
	}
	const char *code = line[0] == '=' ? line + 1 : line; /* "=x": Lua 5.1's "return x" */
	lua_pushfstring(L, "return %s;", code);
	int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
	if (status == LUA_OK) {
		lua_remove(L, -2);
		free(line);
		return LUA_OK;
	}
	lua_pop(L, 2);
	lua_pushstring(L, line);
	free(line);
	for (;;) {
		size_t len;
		const char *buf = lua_tolstring(L, -1, &len);
		status = luaL_loadbuffer(L, buf, len, "=stdin");
		if (!incomplete(L, status))
			break;
		r = read_line(get_prompt(L, 0), &line);
		if (r != READ_OK) {
			lua_pop(L, 1);
			if (r == READ_EOF)
				return -1;
			lua_pushliteral(L, "");
			return -2;
		}
		lua_pushliteral(L, "\n");
		lua_pushstring(L, line);
		free(line);
		lua_concat(L, 3);
	}
	lua_remove(L, -2); /* the source */
	return status;
}

static void print_results(lua_State *L)
{
	int n = lua_gettop(L);
	if (n > 0) {
		luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
		lua_getglobal(L, "print");
		lua_insert(L, 1);
		if (lua_pcall(L, n, 0, 0) != LUA_OK)
			l_message(progname, lua_pushfstring(L, "error calling 'print' (%s)",
			                                    lua_tostring(L, -1)));
	}
}

static void doREPL(lua_State *L)
{
	const char *oldprogname = progname;
	progname = NULL;
	lua_settop(L, 0); /* pmain's arguments */
	open_readline();
	lua_getglobal(L, "ibv");
	if (lua_isnil(L, -1)) { /* ibv ready for trying verbs by hand */
		lua_getglobal(L, "require");
		lua_pushliteral(L, "ibverbs");
		if (docall(L, 1, 1) == LUA_OK)
			lua_setglobal(L, "ibv");
		else
			report(L, 1);
	}
	lua_pop(L, 1);
	int status;
	while ((status = loadline(L)) != -1) {
		if (status == -2) { /* Ctrl-C at the prompt */
			lua_settop(L, 0);
			continue;
		}
		if (status == LUA_OK)
			status = docall(L, 0, LUA_MULTRET);
		if (status == LUA_OK)
			print_results(L);
		else
			report(L, status);
		lua_settop(L, 0);
	}
	lua_settop(L, 0);
	fputs("\n", stdout);
	fflush(stdout);
	progname = oldprogname;
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
		doREPL(L);
	} else if (script == argc && !(args & (has_e | has_v))) {
		if (isatty(0)) {
			print_version();
			doREPL(L);
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
		l_message(argv[0], "cannot create state: not enough memory");
		return EXIT_FAILURE;
	}
	lua_pushcfunction(L, pmain);
	lua_pushinteger(L, argc);
	lua_pushlightuserdata(L, argv);
	int status = lua_pcall(L, 2, 1, 0);
	int result = lua_toboolean(L, -1);
	report(L, status);
	lua_close(L);
	return (result && status == LUA_OK) ? exit_status : EXIT_FAILURE;
}
