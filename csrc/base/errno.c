/*
 * errno.c: ibv.errno and ibv.strerror, so scripts compare and print error
 * numbers by name instead of by Linux's numbers.
 *
 *   local ok, msg, err = pd:close()
 *   if err == ibv.errno.EBUSY then ... end       -- ibv.errno.EBUSY == 16
 *   ibv.errno[16]       --> "EBUSY"
 *   ibv.strerror(16)    --> "Device or resource busy" (the C library's text)
 *
 * Every name the C library defines is there (each guarded by #ifdef); where
 * two names share a number (EAGAIN/EWOULDBLOCK, EOPNOTSUPP/ENOTSUP) the
 * number maps back to the first of the list below.
 */
#include <errno.h>
#include <string.h>

#include "base/err.h"

static const struct {
	const char *name;
	int value;
} errnos[] = {
#ifdef EPERM
	{ "EPERM", EPERM },
#endif
#ifdef ENOENT
	{ "ENOENT", ENOENT },
#endif
#ifdef ESRCH
	{ "ESRCH", ESRCH },
#endif
#ifdef EINTR
	{ "EINTR", EINTR },
#endif
#ifdef EIO
	{ "EIO", EIO },
#endif
#ifdef ENXIO
	{ "ENXIO", ENXIO },
#endif
#ifdef E2BIG
	{ "E2BIG", E2BIG },
#endif
#ifdef ENOEXEC
	{ "ENOEXEC", ENOEXEC },
#endif
#ifdef EBADF
	{ "EBADF", EBADF },
#endif
#ifdef ECHILD
	{ "ECHILD", ECHILD },
#endif
#ifdef EAGAIN
	{ "EAGAIN", EAGAIN },
#endif
#ifdef ENOMEM
	{ "ENOMEM", ENOMEM },
#endif
#ifdef EACCES
	{ "EACCES", EACCES },
#endif
#ifdef EFAULT
	{ "EFAULT", EFAULT },
#endif
#ifdef EBUSY
	{ "EBUSY", EBUSY },
#endif
#ifdef EEXIST
	{ "EEXIST", EEXIST },
#endif
#ifdef EXDEV
	{ "EXDEV", EXDEV },
#endif
#ifdef ENODEV
	{ "ENODEV", ENODEV },
#endif
#ifdef ENOTDIR
	{ "ENOTDIR", ENOTDIR },
#endif
#ifdef EISDIR
	{ "EISDIR", EISDIR },
#endif
#ifdef EINVAL
	{ "EINVAL", EINVAL },
#endif
#ifdef ENFILE
	{ "ENFILE", ENFILE },
#endif
#ifdef EMFILE
	{ "EMFILE", EMFILE },
#endif
#ifdef ENOTTY
	{ "ENOTTY", ENOTTY },
#endif
#ifdef ETXTBSY
	{ "ETXTBSY", ETXTBSY },
#endif
#ifdef EFBIG
	{ "EFBIG", EFBIG },
#endif
#ifdef ENOSPC
	{ "ENOSPC", ENOSPC },
#endif
#ifdef ESPIPE
	{ "ESPIPE", ESPIPE },
#endif
#ifdef EROFS
	{ "EROFS", EROFS },
#endif
#ifdef EMLINK
	{ "EMLINK", EMLINK },
#endif
#ifdef EPIPE
	{ "EPIPE", EPIPE },
#endif
#ifdef EDOM
	{ "EDOM", EDOM },
#endif
#ifdef ERANGE
	{ "ERANGE", ERANGE },
#endif
#ifdef EDEADLK
	{ "EDEADLK", EDEADLK },
#endif
#ifdef ENAMETOOLONG
	{ "ENAMETOOLONG", ENAMETOOLONG },
#endif
#ifdef ENOLCK
	{ "ENOLCK", ENOLCK },
#endif
#ifdef ENOSYS
	{ "ENOSYS", ENOSYS },
#endif
#ifdef ENOTEMPTY
	{ "ENOTEMPTY", ENOTEMPTY },
#endif
#ifdef ELOOP
	{ "ELOOP", ELOOP },
#endif
#ifdef EWOULDBLOCK
	{ "EWOULDBLOCK", EWOULDBLOCK },
#endif
#ifdef ENOMSG
	{ "ENOMSG", ENOMSG },
#endif
#ifdef EIDRM
	{ "EIDRM", EIDRM },
#endif
#ifdef ENOSTR
	{ "ENOSTR", ENOSTR },
#endif
#ifdef ENODATA
	{ "ENODATA", ENODATA },
#endif
#ifdef ETIME
	{ "ETIME", ETIME },
#endif
#ifdef ENOSR
	{ "ENOSR", ENOSR },
#endif
#ifdef ENOLINK
	{ "ENOLINK", ENOLINK },
#endif
#ifdef EPROTO
	{ "EPROTO", EPROTO },
#endif
#ifdef EMULTIHOP
	{ "EMULTIHOP", EMULTIHOP },
#endif
#ifdef EBADMSG
	{ "EBADMSG", EBADMSG },
#endif
#ifdef EOVERFLOW
	{ "EOVERFLOW", EOVERFLOW },
#endif
#ifdef EILSEQ
	{ "EILSEQ", EILSEQ },
#endif
#ifdef EUSERS
	{ "EUSERS", EUSERS },
#endif
#ifdef ENOTSOCK
	{ "ENOTSOCK", ENOTSOCK },
#endif
#ifdef EDESTADDRREQ
	{ "EDESTADDRREQ", EDESTADDRREQ },
#endif
#ifdef EMSGSIZE
	{ "EMSGSIZE", EMSGSIZE },
#endif
#ifdef EPROTOTYPE
	{ "EPROTOTYPE", EPROTOTYPE },
#endif
#ifdef ENOPROTOOPT
	{ "ENOPROTOOPT", ENOPROTOOPT },
#endif
#ifdef EPROTONOSUPPORT
	{ "EPROTONOSUPPORT", EPROTONOSUPPORT },
#endif
#ifdef ESOCKTNOSUPPORT
	{ "ESOCKTNOSUPPORT", ESOCKTNOSUPPORT },
#endif
#ifdef EOPNOTSUPP
	{ "EOPNOTSUPP", EOPNOTSUPP },
#endif
#ifdef ENOTSUP
	{ "ENOTSUP", ENOTSUP },
#endif
#ifdef EPFNOSUPPORT
	{ "EPFNOSUPPORT", EPFNOSUPPORT },
#endif
#ifdef EAFNOSUPPORT
	{ "EAFNOSUPPORT", EAFNOSUPPORT },
#endif
#ifdef EADDRINUSE
	{ "EADDRINUSE", EADDRINUSE },
#endif
#ifdef EADDRNOTAVAIL
	{ "EADDRNOTAVAIL", EADDRNOTAVAIL },
#endif
#ifdef ENETDOWN
	{ "ENETDOWN", ENETDOWN },
#endif
#ifdef ENETUNREACH
	{ "ENETUNREACH", ENETUNREACH },
#endif
#ifdef ENETRESET
	{ "ENETRESET", ENETRESET },
#endif
#ifdef ECONNABORTED
	{ "ECONNABORTED", ECONNABORTED },
#endif
#ifdef ECONNRESET
	{ "ECONNRESET", ECONNRESET },
#endif
#ifdef ENOBUFS
	{ "ENOBUFS", ENOBUFS },
#endif
#ifdef EISCONN
	{ "EISCONN", EISCONN },
#endif
#ifdef ENOTCONN
	{ "ENOTCONN", ENOTCONN },
#endif
#ifdef ESHUTDOWN
	{ "ESHUTDOWN", ESHUTDOWN },
#endif
#ifdef ETOOMANYREFS
	{ "ETOOMANYREFS", ETOOMANYREFS },
#endif
#ifdef ETIMEDOUT
	{ "ETIMEDOUT", ETIMEDOUT },
#endif
#ifdef ECONNREFUSED
	{ "ECONNREFUSED", ECONNREFUSED },
#endif
#ifdef EHOSTDOWN
	{ "EHOSTDOWN", EHOSTDOWN },
#endif
#ifdef EHOSTUNREACH
	{ "EHOSTUNREACH", EHOSTUNREACH },
#endif
#ifdef EALREADY
	{ "EALREADY", EALREADY },
#endif
#ifdef EINPROGRESS
	{ "EINPROGRESS", EINPROGRESS },
#endif
#ifdef ESTALE
	{ "ESTALE", ESTALE },
#endif
#ifdef EDQUOT
	{ "EDQUOT", EDQUOT },
#endif
#ifdef ECANCELED
	{ "ECANCELED", ECANCELED },
#endif
#ifdef EOWNERDEAD
	{ "EOWNERDEAD", EOWNERDEAD },
#endif
#ifdef ENOTRECOVERABLE
	{ "ENOTRECOVERABLE", ENOTRECOVERABLE },
#endif
#ifdef ERFKILL
	{ "ERFKILL", ERFKILL },
#endif
#ifdef EHWPOISON
	{ "EHWPOISON", EHWPOISON },
#endif
#ifdef EREMOTEIO
	{ "EREMOTEIO", EREMOTEIO },
#endif
#ifdef ENOMEDIUM
	{ "ENOMEDIUM", ENOMEDIUM },
#endif
#ifdef EMEDIUMTYPE
	{ "EMEDIUMTYPE", EMEDIUMTYPE },
#endif
#ifdef ENOKEY
	{ "ENOKEY", ENOKEY },
#endif
#ifdef EKEYEXPIRED
	{ "EKEYEXPIRED", EKEYEXPIRED },
#endif
#ifdef EKEYREVOKED
	{ "EKEYREVOKED", EKEYREVOKED },
#endif
#ifdef EKEYREJECTED
	{ "EKEYREJECTED", EKEYREJECTED },
#endif
#ifdef ECOMM
	{ "ECOMM", ECOMM },
#endif
#ifdef EBADE
	{ "EBADE", EBADE },
#endif
#ifdef EBADR
	{ "EBADR", EBADR },
#endif
#ifdef ENONET
	{ "ENONET", ENONET },
#endif
#ifdef ENOPKG
	{ "ENOPKG", ENOPKG },
#endif
#ifdef EREMOTE
	{ "EREMOTE", EREMOTE },
#endif
#ifdef ELIBBAD
	{ "ELIBBAD", ELIBBAD },
#endif
#ifdef ENOTUNIQ
	{ "ENOTUNIQ", ENOTUNIQ },
#endif
#ifdef EBADFD
	{ "EBADFD", EBADFD },
#endif
#ifdef EREMCHG
	{ "EREMCHG", EREMCHG },
#endif
#ifdef ESTRPIPE
	{ "ESTRPIPE", ESTRPIPE },
#endif
};

/* ibv.strerror(n): strerror's text for an errno value */
static int l_strerror(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	if (n < 0 || n > 100000)
		return luaL_argerror(L, 1, "not an errno value");
	lua_pushstring(L, strerror((int)n));
	return 1;
}

void ibvl_open_errno(lua_State *L)
{
	lua_createtable(L, 0, (int)(2 * sizeof errnos / sizeof errnos[0]));
	for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++) {
		lua_pushinteger(L, errnos[i].value);
		lua_setfield(L, -2, errnos[i].name);
		lua_rawgeti(L, -1, errnos[i].value);
		if (lua_isnil(L, -1)) {
			lua_pushstring(L, errnos[i].name);
			lua_rawseti(L, -3, errnos[i].value);
		}
		lua_pop(L, 1);
	}
	lua_setfield(L, -2, "errno");
	lua_pushcfunction(L, l_strerror);
	lua_setfield(L, -2, "strerror");
}
