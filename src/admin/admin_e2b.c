/* admin_e2b.c: the admin API's E2B key routes (docs/API.md "E2B keys"): POST /api/v1/e2b-keys
 * mints a key (the only answer that ever holds one), GET lists them (never a key nor a
 * hash), DELETE /api/v1/e2b-keys/ID removes one. Calls the key store (e2b/e2b_keys.h) and
 * admin_conn.c's answers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admin/admin_conn.h"
#include "e2b/e2b_keys.h"

static void key_fields(struct json_writer *w, const struct e2b_key_info *k)
{
	json_key(w, "id");
	json_str_write(w, k->id);
	json_key(w, "name");
	json_str_write(w, k->name);
	sandbox_time_write(w, "created", k->created * 1000);
}

/* The body's name ("" when none): 0, or an answer sent (400) and -1. */
static int key_body(struct admin_conn *c, char *name, size_t cap)
{
	static struct json_token tokens[8];
	struct json_doc doc;
	int k;

	name[0] = '\0';
	if (c->body_len == 0)
		return 0;
	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT) {
		admin_respond_error(c, 400, "bad_json", "the body is a JSON object: {\"name\": NAME}");
		return -1;
	}
	for (k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		if (!json_str_eq(&doc, k, "name") || json_str(&doc, k + 1, name, cap) < 0 ||
		    !e2b_key_name_valid(name)) {
			admin_respond_error(c, 400, "bad_request", "the body has one field, name: "
					    "1 to 64 of A-Z a-z 0-9 . _ - (not a key: e2b_...)");
			return -1;
		}
	return 0;
}

void admin_e2b_key_create(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	char name[E2B_KEY_NAME_BYTES], key[E2B_KEY_BYTES], id[E2B_KEY_ID_BYTES], out[512];
	const struct e2b_key_info *k = NULL;
	struct json_writer w;
	struct buf b;
	int r;

	if (key_body(c, name, sizeof(name)) != 0)
		return;
	if ((r = e2b_key_create(name, key, id)) != 0) {
		log_warn("e2b key not created", "error=%s", log_q(err_str(r)));
		admin_respond_error(c, r == ERR_LIMIT ? 409 : 500, r == ERR_LIMIT ? "limit" : "internal",
				    r == ERR_LIMIT ? "at most 64 E2B keys: remove one first"
						   : "the keys file could not be written");
		return;
	}
	for (uint32_t i = 0; (k = e2b_key_at(i)) && strcmp(k->id, id) != 0; i++)
		;
	ASSERT(k);
	log_info("e2b key created", "id=%s name=%s", log_q(k->id), log_q(k->name));
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	key_fields(&w, k);
	json_key(&w, "key");
	json_str_write(&w, key);
	json_obj_end(&w);
	json_writer_finish(&w);
	admin_respond(c, 201, &b);
	memset(key, 0, sizeof(key));
	memset(out, 0, sizeof(out));
}

static bool key_item(struct json_writer *w, uint32_t i)
{
	const struct e2b_key_info *k = e2b_key_at(i);

	if (!k)
		return false;
	json_obj_begin(w);
	key_fields(w, k);
	json_obj_end(w);
	return true;
}

void admin_e2b_keys_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const char head[] = "{\"keys\":[";

	admin_list_start(c, head, sizeof(head) - 1, key_item, LIMIT_E2B_KEYS);
}

void admin_e2b_key_delete(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	char out[160];
	struct json_writer w;
	struct buf b;
	int r = e2b_key_remove(c->segment);

	if (r == -ENOENT) {
		admin_respond_error(c, 404, "not_found", "no E2B key has that id (agentic e2b-key ls)");
		return;
	}
	if (r != 0) {
		log_warn("e2b key not removed", "id=%s error=%s", log_q(c->segment), log_q(err_str(r)));
		admin_respond_error(c, 500, "internal", "the keys file could not be written");
		return;
	}
	log_info("e2b key removed", "id=%s", log_q(c->segment));
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "id");
	json_str_write(&w, c->segment);
	json_key(&w, "removed");
	json_bool_write(&w, true);
	json_obj_end(&w);
	json_writer_finish(&w);
	admin_respond(c, 200, &b);
}
