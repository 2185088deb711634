/* json.h: a bounded JSON reader (tokens into caller storage) and a writer into a struct buf.
 *
 * Reader: json_parse() validates a whole document (RFC 8259: full string escapes including
 * \u surrogate pairs, rejects invalid UTF-8, control characters in strings, leading zeros,
 * trailing garbage, nesting deeper than JSON_MAX_DEPTH) and fills a flat token array in
 * document order. Nothing is allocated; strings stay escaped in the source until copied out.
 * Writer: appends to a caller's buf; the first error (ERR_LIMIT when full) sticks and later
 * calls do nothing, so a caller checks json_writer_finish() once. */
#ifndef AGENTIC_JSON_H
#define AGENTIC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"


enum json_type {
	JSON_OBJECT,
	JSON_ARRAY,
	JSON_STRING,
	JSON_NUMBER,
	JSON_TRUE,
	JSON_FALSE,
	JSON_NULL,
};

struct json_token {
	enum json_type type;
	uint32_t start;    /* byte offset; strings: first byte after the opening quote */
	uint32_t end;      /* byte offset one past the value; strings: the closing quote */
	uint32_t children; /* objects: members (each a key token followed by its value); arrays: elements */
	uint32_t next;     /* index of the token after this value's whole subtree */
};

struct json_doc {
	const char *src;
	size_t len;
	struct json_token *tok;
	uint32_t ntok;
	uint32_t cap;
	size_t err_offset; /* on error: the first byte that cannot belong to a valid document
			    * (len when the input ends early) */
	const char *err_what; /* on error: a short static phrase for the user, else NULL */
};

/* Parses src[0..len) into tok[0..cap). Returns 0, ERR_PARSE or ERR_LIMIT (more than cap
 * tokens, nesting deeper than JSON_MAX_DEPTH, or len > UINT32_MAX); on either error
 * err_offset and err_what say where and why, and ntok is 0. Token 0 is the root value. */
int json_parse(struct json_doc *doc, const char *src, size_t len, struct json_token *tok,
	       uint32_t cap);

/* Object member lookup by exact (unescaped) key; returns the value's token index or -1.
 * With duplicate keys the first member wins. */
int json_obj_get(const struct json_doc *doc, int obj, const char *key);
/* First child (object: the first key; array: the first element) or -1; json_next the sibling
 * (for objects, step twice from a key to reach the next key) or -1 after the last. */
int json_first(const struct json_doc *doc, int idx);
int json_next(const struct json_doc *doc, int parent, int idx);

/* Unescapes a string token into out (NUL-terminated UTF-8). Returns its length, ERR_LIMIT
 * when it does not fit, or -EINVAL when idx is not a string or the string holds U+0000 (a C
 * string cannot carry it); on error out is left empty. */
int json_str(const struct json_doc *doc, int idx, char *out, size_t out_size);
/* True when idx is a string token equal to s once unescaped. */
bool json_str_eq(const struct json_doc *doc, int idx, const char *s);
/* Integer number (no fraction or exponent) that fits int64: 0, else -EINVAL/-ERANGE. */
int json_int(const struct json_doc *doc, int idx, int64_t *out);
/* JSON_TRUE/JSON_FALSE: 0; else -EINVAL. */
int json_bool(const struct json_doc *doc, int idx, bool *out);

struct json_writer {
	struct buf *out;
	int err;
	uint32_t depth;
	uint8_t need_comma[JSON_MAX_DEPTH + 1];
	bool in_object[JSON_MAX_DEPTH + 1];
	bool after_key;
	size_t mark; /* out->len at init: an error rolls the buffer back to it, so the caller
		      * must not consume from out until json_writer_finish */
};

void json_writer_init(struct json_writer *w, struct buf *out);
void json_obj_begin(struct json_writer *w);
void json_obj_end(struct json_writer *w);
void json_arr_begin(struct json_writer *w);
void json_arr_end(struct json_writer *w);
void json_key(struct json_writer *w, const char *key);
/* Strings are escaped as JSON requires; invalid UTF-8 input sets -EINVAL. */
void json_str_write(struct json_writer *w, const char *s);
void json_strn_write(struct json_writer *w, const char *s, size_t len);
void json_int_write(struct json_writer *w, int64_t v);
void json_bool_write(struct json_writer *w, bool v);
void json_null_write(struct json_writer *w);
/* The error object agentic's APIs answer with, {"error":{"code":CODE,"message":MSG}}, as one
 * value (msg NULL: ""). */
void json_error_write(struct json_writer *w, const char *code, const char *msg);
/* 0, or the first error any call hit (ERR_LIMIT when out is full or nesting goes deeper than
 * JSON_MAX_DEPTH, -EINVAL, ERR_STATE for a misplaced key or value, unbalanced nesting or no
 * value at all). On error out->len is back where it was at init. */
int json_writer_finish(struct json_writer *w);

#endif
