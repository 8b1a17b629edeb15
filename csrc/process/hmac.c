/*
 * hmac.c: ibv.hmac_sha256, the proof a rank of ibverbs.fabric gives at the
 * rendezvous (HMAC, RFC 2104, over SHA-256, FIPS 180-4).
 *
 *   local mac = ibv.hmac_sha256(key, message)   -- 32 bytes, a Lua string
 *   ibv.hmac_sha256("", "")                     -- any lengths, binary safe
 *   ibv.hmac_sha256(key, msg, true)             -- the same as 64 hex digits
 *
 * Written here so that the one-file host carries it: a bare node may have no
 * libcrypto.  Only this: no other digest, no cipher.
 */
#include <stdint.h>
#include <string.h>

#include "base/compat.h"
#include "process/process.h"

struct sha256 {
	uint32_t h[8];
	uint64_t len;          /* bytes hashed so far */
	unsigned char buf[64]; /* the block being filled */
	size_t fill;
};

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(struct sha256 *s, const unsigned char *p)
{
	uint32_t w[64], v[8];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, s->h, sizeof v);
	for (int i = 0; i < 64; i++) {
		uint32_t e = v[4], a = v[0];
		uint32_t t1 = v[7] + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & v[5]) ^ (~e & v[6])) + K[i] + w[i];
		uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof v[0]);
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		s->h[i] += v[i];
}

static void sha_init(struct sha256 *s)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, h0, sizeof h0);
	s->len = 0;
	s->fill = 0;
}

static void sha_add(struct sha256 *s, const void *data, size_t n)
{
	const unsigned char *p = data;
	s->len += n;
	while (n > 0) {
		size_t take = 64 - s->fill < n ? 64 - s->fill : n;
		memcpy(s->buf + s->fill, p, take);
		s->fill += take;
		p += take;
		n -= take;
		if (s->fill == 64) {
			block(s, s->buf);
			s->fill = 0;
		}
	}
}

static void sha_end(struct sha256 *s, unsigned char out[32])
{
	uint64_t bits = s->len * 8;
	unsigned char pad[72] = {0x80};
	size_t npad = (s->fill < 56 ? 56 : 120) - s->fill;
	for (int i = 0; i < 8; i++)
		pad[npad + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha_add(s, pad, npad + 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
}

/* HMAC: H((K ^ opad) || H((K ^ ipad) || m)), a key longer than a block hashed first */
static void hmac(const unsigned char *key, size_t nkey, const void *msg, size_t nmsg, unsigned char out[32])
{
	unsigned char k[64] = {0}, pad[64];
	struct sha256 s;
	if (nkey > 64) {
		sha_init(&s);
		sha_add(&s, key, nkey);
		sha_end(&s, k);
	} else {
		memcpy(k, key, nkey);
	}
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	sha_init(&s);
	sha_add(&s, pad, 64);
	sha_add(&s, msg, nmsg);
	sha_end(&s, out);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	sha_init(&s);
	sha_add(&s, pad, 64);
	sha_add(&s, out, 32);
	sha_end(&s, out);
}

static int l_hmac_sha256(lua_State *L)
{
	size_t nkey, nmsg;
	const char *key = luaL_checklstring(L, 1, &nkey);
	const char *msg = luaL_checklstring(L, 2, &nmsg);
	int hex = lua_toboolean(L, 3);
	unsigned char mac[32];
	hmac((const unsigned char *)key, nkey, msg, nmsg, mac);
	if (!hex) {
		lua_pushlstring(L, (const char *)mac, sizeof mac);
		return 1;
	}
	char text[64];
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		text[2 * i] = digits[mac[i] >> 4];
		text[2 * i + 1] = digits[mac[i] & 15];
	}
	lua_pushlstring(L, text, sizeof text);
	return 1;
}

void ibvl_open_hmac(lua_State *L)
{
	lua_pushcfunction(L, l_hmac_sha256);
	lua_setfield(L, -2, "hmac_sha256");
}
