/*
 * fakepmix.c: a stand-in libpmix for spec/host/library/pmix_spec.lua, built there
 * into a temporary libpmix.so.2.  A job of local processes shares a directory
 * (FAKE_PMIX_DIR) instead of a server: a commit writes each put key to a
 * file, a fence touches its own file and completes (on a thread of its own,
 * as PMIx's progress thread would call back) once every rank's is there,
 * and a get of a peer's key waits until its file appears, as a direct modex
 * waits for the peer's commit: a rank that never comes leaves both waiting.
 *
 *   FAKE_PMIX_DIR   the job's directory      FAKE_PMIX_SIZE  its size (1)
 *   PMIX_NAMESPACE, PMIX_RANK                 FAKE_PMIX_HOSTS host names by rank, "a,b,c" (fakehost)
 *   FAKE_PMIX_VERSION  PMIx_Get_version's answer ("OpenPMIx 4.2.2 (fake)")
 *   FAKE_PMIX_INIT=unreach  PMIx_Init fails with PMIX_ERR_UNREACH
 *   FAKE_PMIX_FENCE_FAIL=n  the n-th fence of every process fails (status -1, from the callback)
 * A fence's one info is checked as every series lays it out (key at 0, the
 * value's type at 520, a bool at 528): a collecting fence writes
 * collect.<n>.<rank>.  Key "fake.double" of any rank is a double (type 17).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct proc {
	char nspace[256];
	uint32_t rank;
};
struct value {
	uint16_t type;
	union {
		uint8_t flag;
		uint16_t u16;
		uint32_t u32;
		double d;
		char *string;
		struct {
			char *bytes;
			size_t size;
		} bo;
		uint8_t pad[24];
	} data;
};
typedef void (*op_cb)(int, void *);
typedef void (*value_cb)(int, struct value *, void *);

static int me, size = 1, fences;
static char dir[512];
static struct kv {
	char key[512];
	char *bytes;
	size_t len;
	struct kv *next;
} *pending;

#define EXPORT __attribute__((visibility("default")))
EXPORT const char *PMIx_Get_version(void);
EXPORT const char *PMIx_Error_string(int);
EXPORT int PMIx_Init(struct proc *, void *, size_t);
EXPORT int PMIx_Finalize(const void *, size_t);
EXPORT int PMIx_Abort(int, const char *, struct proc *, size_t);
EXPORT int PMIx_Put(uint8_t, const char *, struct value *);
EXPORT int PMIx_Commit(void);
EXPORT int PMIx_Fence_nb(const struct proc *, size_t, const char *, size_t, op_cb, void *);
EXPORT int PMIx_Get_nb(const struct proc *, const char *, const void *, size_t, value_cb, void *);

const char *PMIx_Get_version(void)
{
	const char *v = getenv("FAKE_PMIX_VERSION");
	return v != NULL ? v : "OpenPMIx 4.2.2 (fake)";
}

const char *PMIx_Error_string(int status)
{
	return status == -25 ? "UNREACHABLE" : status == -46 ? "NOT-FOUND" : "ERROR";
}

static void path_of(char *out, size_t n, const char *what, int rank, const char *key)
{
	snprintf(out, n, "%s/%s.%d.%s", dir, what, rank, key);
}

static void touch(const char *path, const char *bytes, size_t len)
{
	char tmp[1200];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fwrite(bytes, 1, len, f);
	fclose(f);
	rename(tmp, path);
}

int PMIx_Init(struct proc *p, void *info, size_t n)
{
	(void)info;
	(void)n;
	const char *init = getenv("FAKE_PMIX_INIT");
	if (init != NULL && strcmp(init, "unreach") == 0)
		return -25;
	snprintf(dir, sizeof dir, "%s", getenv("FAKE_PMIX_DIR") ? getenv("FAKE_PMIX_DIR") : "/tmp");
	me = atoi(getenv("PMIX_RANK"));
	size = getenv("FAKE_PMIX_SIZE") ? atoi(getenv("FAKE_PMIX_SIZE")) : 1;
	snprintf(p->nspace, sizeof p->nspace, "%s", getenv("PMIX_NAMESPACE"));
	p->rank = (uint32_t)me;
	return 0;
}

int PMIx_Finalize(const void *info, size_t n)
{
	(void)info;
	(void)n;
	char path[1100];
	path_of(path, sizeof path, "finalized", me, "x");
	touch(path, "", 0);
	return 0;
}

int PMIx_Abort(int status, const char *msg, struct proc *procs, size_t n)
{
	(void)status;
	(void)procs;
	(void)n;
	char path[1100];
	path_of(path, sizeof path, "abort", me, "x");
	touch(path, msg, strlen(msg));
	return 0;
}

int PMIx_Put(uint8_t scope, const char *key, struct value *v)
{
	(void)scope;
	if (v->type != 27)
		return -1;
	struct kv *k = calloc(1, sizeof *k);
	snprintf(k->key, sizeof k->key, "%s", key);
	k->bytes = malloc(v->data.bo.size + 1);
	memcpy(k->bytes, v->data.bo.bytes, v->data.bo.size);
	k->len = v->data.bo.size;
	k->next = pending;
	pending = k;
	return 0;
}

int PMIx_Commit(void)
{
	while (pending != NULL) {
		struct kv *k = pending;
		char path[1100];
		path_of(path, sizeof path, "k", me, k->key);
		touch(path, k->bytes, k->len);
		pending = k->next;
		free(k->bytes);
		free(k);
	}
	return 0;
}

struct job {
	int n; /* the fence's number */
	char key[512];
	uint32_t rank;
	op_cb op;
	value_cb val;
	void *cbdata;
};

static void *fence_thread(void *arg)
{
	struct job *j = arg;
	for (int r = 0; r < size; r++) {
		char path[1100], n[32];
		snprintf(n, sizeof n, "%d", j->n);
		path_of(path, sizeof path, "f", r, n);
		while (access(path, F_OK) != 0)
			usleep(10000);
	}
	j->op(0, j->cbdata);
	free(j);
	return NULL;
}

static void start(struct job *j, void *(*fn)(void *))
{
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_create(&t, &a, fn, j);
	pthread_attr_destroy(&a);
}

int PMIx_Fence_nb(const struct proc *procs, size_t nprocs, const char *info, size_t ninfo, op_cb cb,
                  void *cbdata)
{
	(void)procs;
	(void)nprocs;
	struct job *j = calloc(1, sizeof *j);
	j->n = ++fences;
	j->op = cb;
	j->cbdata = cbdata;
	char path[1100], n[32];
	snprintf(n, sizeof n, "%d", j->n);
	if (ninfo == 1 && strcmp(info, "pmix.collect") == 0 && *(const uint16_t *)(info + 520) == 1 &&
	    info[528] == 1) {
		path_of(path, sizeof path, "collect", me, n);
		touch(path, "", 0);
	}
	path_of(path, sizeof path, "f", me, n);
	touch(path, "", 0);
	const char *fail = getenv("FAKE_PMIX_FENCE_FAIL");
	if (fail != NULL && atoi(fail) == j->n) {
		cb(-1, cbdata);
		free(j);
		return 0;
	}
	start(j, fence_thread);
	return 0;
}

static const char *host_of(uint32_t rank)
{
	static char out[128];
	const char *hosts = getenv("FAKE_PMIX_HOSTS");
	snprintf(out, sizeof out, "fakehost");
	for (uint32_t i = 0; hosts != NULL && *hosts != '\0'; i++) {
		size_t n = strcspn(hosts, ",");
		if (i == rank) {
			snprintf(out, sizeof out, "%.*s", (int)n, hosts);
			break;
		}
		hosts += n + (hosts[n] == ',');
	}
	return out;
}

static void *get_thread(void *arg)
{
	struct job *j = arg;
	struct value v;
	memset(&v, 0, sizeof v);
	char name[128];
	if (strcmp(j->key, "pmix.job.size") == 0 || strcmp(j->key, "pmix.local.size") == 0) {
		v.type = 14;
		v.data.u32 = (uint32_t)size;
	} else if (strcmp(j->key, "pmix.lrank") == 0) {
		v.type = 13;
		v.data.u16 = (uint16_t)j->rank;
	} else if (strcmp(j->key, "pmix.nodeid") == 0) {
		v.type = 14;
	} else if (strcmp(j->key, "pmix.hname") == 0) {
		snprintf(name, sizeof name, "%s", host_of(j->rank));
		v.type = 3;
		v.data.string = name;
	} else if (strcmp(j->key, "fake.double") == 0) {
		v.type = 17;
		v.data.d = 1.5;
	} else {
		char path[1100];
		path_of(path, sizeof path, "k", (int)j->rank, j->key);
		FILE *f;
		while ((f = fopen(path, "r")) == NULL)
			usleep(10000);
		static __thread char buf[65536];
		v.type = 27;
		v.data.bo.size = fread(buf, 1, sizeof buf, f);
		v.data.bo.bytes = buf;
		fclose(f);
	}
	j->val(0, &v, j->cbdata);
	free(j);
	return NULL;
}

int PMIx_Get_nb(const struct proc *p, const char *key, const void *info, size_t ninfo, value_cb cb,
                void *cbdata)
{
	(void)info;
	(void)ninfo;
	struct job *j = calloc(1, sizeof *j);
	snprintf(j->key, sizeof j->key, "%s", key);
	j->rank = p->rank;
	j->val = cb;
	j->cbdata = cbdata;
	start(j, get_thread);
	return 0;
}
