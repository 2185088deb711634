/* credscan.c: raw-credential shapes in an environment entry (credscan.h). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "profile/credscan.h"

/* The entropy rule: a run of token bytes at least this long (24 random bytes in base64; a
 * shorter run is too often an ordinary name), with upper and lower case letters and a digit,
 * not made of words, and whose bytes carry at least this many bits each (Shannon, over the
 * run). Random base62/base64 of 32 bytes scores 3.8 to 5.2 (1 in 4000 below the bound), a
 * dotted or CamelCase name 4.0 to 5.0 but is made of words, hex (commit ids, digests, UUIDs)
 * at most 4.0 and is left out by its alphabet. */
#define CREDSCAN_ENTROPY_MIN_LEN 32
#define CREDSCAN_ENTROPY_MIN_MILLIBITS 4000
/* "Made of words": at least this share (percent) of the run's letters are in words, a word
 * being an optional capital and two or more small letters. Random base62 of 32 bytes reaches
 * it 1 time in 200; CamelCase and dotted names are at 85 to 100. */
#define CREDSCAN_WORDY_PERCENT 80
/* Bytes of a value the entropy rule looks at in one run (longer runs are judged on these). */
#define CREDSCAN_ENTROPY_MAX_LEN 4096

static bool is_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Bytes of base64, base64url, JWTs and most vendors' tokens. */
static bool is_token(unsigned char c)
{
	return is_alnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-' ||
	       c == '.' || c == '~';
}

static unsigned char upper(unsigned char c)
{
	return is_lower(c) ? (unsigned char)(c - 'a' + 'A') : c;
}

/* ---- keys ---- */

static bool key_eq(const char *key, size_t len, const char *word)
{
	size_t n = strlen(word);

	if (len != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (upper((unsigned char)key[i]) != (unsigned char)word[i])
			return false;
	return true;
}

static bool key_ends(const char *key, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len >= n && key_eq(key + len - n, n, word);
}

static bool key_has(const char *key, size_t len, const char *word)
{
	size_t n = strlen(word);

	for (size_t i = 0; i + n <= len; i++)
		if (key_eq(key + i, n, word))
			return true;
	return false;
}

static const char *key_rule(const char *key, size_t len)
{
	static const char *const names[] = { "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN",
					     "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (key_eq(key, len, names[i]))
			return "key_well_known";
	/* FOO_PASSWORD_FILE=/run/secrets/x names where a secret is, which is no secret */
	if (key_ends(key, len, "_FILE") || key_ends(key, len, "_PATH") || key_ends(key, len, "_DIR"))
		return NULL;
	if (key_ends(key, len, "_API_KEY") || key_eq(key, len, "API_KEY") ||
	    key_ends(key, len, "APIKEY"))
		return "key_api_key";
	if (key_ends(key, len, "_TOKEN") || key_eq(key, len, "TOKEN"))
		return "key_token";
	if (key_has(key, len, "SECRET"))
		return "key_secret";
	if (key_has(key, len, "PASSWORD") || key_has(key, len, "PASSWD"))
		return "key_password";
	if (key_ends(key, len, "_ACCESS_KEY"))
		return "key_access_key";
	if (key_has(key, len, "PRIVATE_KEY"))
		return "key_private_key";
	return NULL;
}

/* A value no secret can be: the key alone does not make it a credential. An absolute path
 * (SSH_PRIVATE_KEY=/home/agent/.ssh/id_ed25519) names where a secret is. */
static bool high_entropy(const char *s, size_t n);

static bool value_inert(const char *v)
{
	static const char *const words[] = { "", "0", "1", "TRUE", "FALSE", "YES", "NO", "ON",
					     "OFF" };

	/* not a base64 secret that happens to start with '/' (1 in 64 do: an AWS secret key) */
	if (v[0] == '/' && strcspn(v, " \t\n") == strlen(v))
		return !high_entropy(v + 1, strlen(v + 1));

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (key_eq(v, strlen(v), words[i]))
			return true;
	return false;
}

/* ---- values ---- */

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Length of the run of s made of alnum bytes and the bytes of `more`, counted up to max
 * (the rules need a few dozen: a value full of word starts stays linear). */
static size_t span_max(const char *s, const char *more, size_t max)
{
	size_t n = 0;

	while (n < max && s[n] && (is_alnum((unsigned char)s[n]) || (*more && strchr(more, s[n]))))
		n++;
	return n;
}

#define SPAN_ENOUGH 64
static size_t span(const char *s, const char *more)
{
	return span_max(s, more, SPAN_ENOUGH);
}

static bool has_class(const char *s, size_t n, bool (*cls)(unsigned char))
{
	for (size_t i = 0; i < n; i++)
		if (cls((unsigned char)s[i]))
			return true;
	return false;
}

/* A vendor's token beginning at s (s starts a word of the value). */
static const char *prefix_rule(const char *s)
{
	size_t n;

	if (starts(s, "sk-ant-") && span(s + 7, "_-") >= 20)
		return "value_sk_ant";
	if (starts(s, "sk-") && (n = span(s + 3, "_-")) >= 20 && has_class(s + 3, n, is_digit) &&
	    has_class(s + 3, n, is_upper))
		return "value_sk";
	if ((starts(s, "sk_live_") || starts(s, "sk_test_") || starts(s, "rk_live_") ||
	     starts(s, "rk_test_")) && span(s + 8, "") >= 20)
		return "value_stripe";
	if ((starts(s, "ghp_") || starts(s, "gho_") || starts(s, "ghu_") || starts(s, "ghs_") ||
	     starts(s, "ghr_")) && span(s + 4, "") >= 30)
		return "value_github";
	if (starts(s, "github_pat_") && span(s + 11, "_") >= 22)
		return "value_github";
	if (starts(s, "AKIA") || starts(s, "ASIA")) {
		for (n = 4; n < 20; n++)
			if (!is_upper((unsigned char)s[n]) && !is_digit((unsigned char)s[n]))
				break;
		if (n == 20 && !is_alnum((unsigned char)s[20]))
			return "value_aws_key_id";
	}
	if (starts(s, "xox") && s[3] && strchr("abposr", s[3]) && s[4] == '-' &&
	    span(s + 5, "-") >= 10)
		return "value_slack";
	if (starts(s, "glpat-") && span(s + 6, "_-") >= 20)
		return "value_gitlab";
	return NULL;
}

/* A JWT: base64url of a JSON header ("{\"...") and two more dot-separated parts. Its parts
 * are read whole, so only where a run of them starts (the value's start, or after a byte
 * that is no base64url nor '.'): no byte is read by two tries. */
static bool jwt(const char *s)
{
	size_t n, m;

	if (!starts(s, "eyJ") || (n = span_max(s, "_-", SIZE_MAX)) < 10 || s[n] != '.')
		return false;
	m = span_max(s + n + 1, "_-", SIZE_MAX);
	return m >= 10 && s[n + 1 + m] == '.';
}

/* "-----BEGIN ... PRIVATE KEY-----" on one line; each line read a bounded number of times. */
static bool pem_private_key(const char *v)
{
	for (const char *line = v; *line;) {
		size_t len = strcspn(line, "\n");
		const char *b = memmem(line, len, "-----BEGIN ", 11);

		if (b && memmem(b, len - (size_t)(b - line), "PRIVATE KEY-----", 16))
			return true;
		line += len + (line[len] == '\n');
	}
	return false;
}

/* scheme://user:password@host: a password in a URL's userinfo. */
static bool url_password(const char *v)
{
	for (const char *p = strstr(v, "://"); p; p = strstr(p + 1, "://")) {
		const char *auth = p + 3;
		size_t n = strcspn(auth, "/?#@ \t\n");
		const char *colon;

		if (auth[n] != '@')
			continue;
		colon = memchr(auth, ':', n);
		if (colon && colon + 1 < auth + n)
			return true;
	}
	return false;
}

/* A URL's query carrying a token: ?access_token=, &token=, &api_key=, ... (8 bytes or more). */
static bool url_query_token(const char *v)
{
	static const char *const keys[] = { "access_token=", "token=", "api_key=", "apikey=",
					    "secret=", "password=", "sig=", "signature=" };

	for (const char *q = strchr(v, '?'); q; q = strchr(q + 1, '?'))
		for (const char *p = q; *p && !strchr(" \t\n#", *p); p++) {
			if (*p != '?' && *p != '&')
				continue;
			for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
				size_t kn = strlen(keys[i]);
				size_t j;

				for (j = 0; j < kn && upper((unsigned char)p[1 + j]) ==
						      upper((unsigned char)keys[i][j]); j++)
					;
				if (j == kn && strcspn(p + 1 + kn, "& \t\n#") >= 8)
					return true;
			}
		}
	return false;
}

/* Shannon entropy of s[0..n) in millibits a byte, without floating point: n*log2(n) -
 * sum(c*log2(c)) over the counts, each log2 in fixed point. */
static uint32_t log2_fixed(uint32_t x) /* log2(x) * 1024, x >= 1 */
{
	uint32_t r = 0;
	uint64_t v = x;

	while (v >= 2) {
		v >>= 1;
		r += 1024;
	}
	/* the fraction from the bits below the top one, ten of them by squaring */
	v = ((uint64_t)x << 16) >> (r / 1024); /* x / 2^floor(log2 x), in 16.16 */
	for (uint32_t bit = 512; bit; bit >>= 1) {
		v = (v * v) >> 16;
		if (v >= (2u << 16)) {
			v >>= 1;
			r += bit;
		}
	}
	return r;
}

static uint32_t entropy_millibits(const char *s, size_t n)
{
	uint32_t count[256] = { 0 };
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		count[(unsigned char)s[i]]++;
	for (size_t c = 0; c < 256; c++)
		if (count[c])
			sum += (uint64_t)count[c] * log2_fixed(count[c]);
	return (uint32_t)(((uint64_t)n * log2_fixed((uint32_t)n) - sum) * 1000 / 1024 / n);
}

static bool wordy(const char *s, size_t n)
{
	size_t letters = 0, in_words = 0;

	for (size_t i = 0; i < n;) {
		size_t j = i, k;

		if (!is_upper((unsigned char)s[i]) && !is_lower((unsigned char)s[i])) {
			i++;
			continue;
		}
		if (is_upper((unsigned char)s[j]))
			j++;
		for (k = j; k < n && is_lower((unsigned char)s[k]); k++)
			;
		if (k == i)
			k = i + 1;
		letters += k - i;
		if (k - j >= 2)
			in_words += k - i;
		i = k;
	}
	return in_words * 100 >= letters * CREDSCAN_WORDY_PERCENT;
}

static bool high_entropy(const char *s, size_t n)
{
	bool hex = true;

	if (n < CREDSCAN_ENTROPY_MIN_LEN)
		return false;
	if (n > CREDSCAN_ENTROPY_MAX_LEN)
		n = CREDSCAN_ENTROPY_MAX_LEN;
	/* a path, or a URL's tail after its scheme */
	if (s[0] == '/' || s[0] == '.' || s[0] == '~')
		return false;
	for (size_t i = 0; i < n && hex; i++)
		hex = is_hex((unsigned char)s[i]) || s[i] == '-';
	if (hex)
		return false;
	if (!has_class(s, n, is_upper) || !has_class(s, n, is_lower) || !has_class(s, n, is_digit))
		return false;
	return !wordy(s, n) && entropy_millibits(s, n) >= CREDSCAN_ENTROPY_MIN_MILLIBITS;
}

static const char *value_rule(const char *v)
{
	const char *w;

	if (pem_private_key(v))
		return "value_private_key";
	if (url_password(v))
		return "value_url_password";
	if (url_query_token(v))
		return "value_url_token";
	/* every word: the value's start, and each byte after one that is no letter or digit */
	for (size_t i = 0; v[i]; i++) {
		unsigned char before = i ? (unsigned char)v[i - 1] : ' ';

		if (is_alnum(before))
			continue;
		if ((w = prefix_rule(v + i)))
			return w;
		if (before != '_' && before != '-' && before != '.' && jwt(v + i))
			return "value_jwt";
	}
	for (size_t i = 0; v[i];) {
		size_t n = 0;

		while (v[i + n] && is_token((unsigned char)v[i + n]))
			n++;
		if (high_entropy(v + i, n))
			return "value_entropy";
		i += n ? n : 1;
	}
	/* "Authorization: Bearer TOKEN", a token of any alphabet (hex too), when no rule above
	 * named it better */
	for (const char *b = v; (b = strstr(b, "earer ")); b++)
		if (b > v && (b[-1] == 'B' || b[-1] == 'b') && (b - 1 == v || !is_alnum(
		    (unsigned char)b[-2])) && span(b + 6, "_-.~+/=") >= 16)
			return "value_bearer";
	return NULL;
}

const char *credscan_value(const char *s)
{
	return value_rule(s);
}

/* Keys longer than this are judged on their first bytes by the value shapes. */
#define CREDSCAN_KEY_BYTES 1024

const char *credscan_pair(const char *key, size_t key_len, const char *value)
{
	const char *rule = key_rule(key, key_len);
	char k[CREDSCAN_KEY_BYTES + 1];
	size_t n = key_len < CREDSCAN_KEY_BYTES ? key_len : CREDSCAN_KEY_BYTES;

	if (rule && (!value || !value_inert(value)))
		return rule;
	if (value && (rule = value_rule(value)))
		return rule;
	memcpy(k, key, n);
	k[n] = '\0';
	return value_rule(k);
}

const char *credscan_entry(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return credscan_pair(kv, eq ? (size_t)(eq - kv) : strlen(kv), eq ? eq + 1 : NULL);
}
