/*
 * repl.c: ibvlua's prompt (ibvlua -i, or no script on a terminal): lines
 * read with GNU readline when libreadline.so.8 (or .7) opens at run time,
 * plain line input otherwise (or with IBVLUA_READLINE=0); incomplete chunks
 * continued, results printed; Ctrl-C drops the line and prompts again.
 *
 *   $ ibvlua -i
 *   > ibv.devices()[1].name      -- ibv = require "ibverbs" is loaded
 *   rxe0
 *   > for i = 1, 2 do            -- continued: >>
 *   >>   print(i) end
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibvlua.h"

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
	ibvlua_set_signal(SIGINT, on_prompt_sigint, 0); /* no SA_RESTART: the read returns */
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
	ibvlua_set_signal(SIGINT, SIG_DFL, 1);
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
			ibvlua_message(ibvlua_progname, lua_pushfstring(L, "error calling 'print' (%s)",
			                                    lua_tostring(L, -1)));
	}
}

void ibvlua_repl(lua_State *L)
{
	const char *oldprogname = ibvlua_progname;
	ibvlua_progname = NULL;
	lua_settop(L, 0); /* pmain's arguments */
	open_readline();
	lua_getglobal(L, "ibv");
	if (lua_isnil(L, -1)) { /* ibv ready for trying verbs by hand */
		lua_getglobal(L, "require");
		lua_pushliteral(L, "ibverbs");
		if (ibvlua_docall(L, 1, 1) == LUA_OK)
			lua_setglobal(L, "ibv");
		else
			ibvlua_report(L, 1);
	}
	lua_pop(L, 1);
	int status;
	while ((status = loadline(L)) != -1) {
		if (status == -2) { /* Ctrl-C at the prompt */
			lua_settop(L, 0);
			continue;
		}
		if (status == LUA_OK)
			status = ibvlua_docall(L, 0, LUA_MULTRET);
		if (status == LUA_OK)
			print_results(L);
		else
			ibvlua_report(L, status);
		lua_settop(L, 0);
	}
	lua_settop(L, 0);
	fputs("\n", stdout);
	fflush(stdout);
	ibvlua_progname = oldprogname;
}
