/* cli_e2bkey.c: `agentic e2b-key create|ls|rm`: the E2B API's keys through the admin API
 * (POST, GET /api/v1/e2b-keys, DELETE /api/v1/e2b-keys/ID). A new key is printed once, alone
 * on stdout; agenticd keeps only its hash. Calls cli_api.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"

const char cli_e2bkey_help[] =
	"usage: agentic e2b-key create [--name NAME]   mint a key for the E2B API\n"
	"       agentic e2b-key ls                     list the keys (id, name, created)\n"
	"       agentic e2b-key rm ID                  remove a key\n"
	"create prints the new key (e2b_ and 40 hex) on stdout and nothing else: it is shown\n"
	"this once (agenticd keeps only its SHA-256); set it as E2B_API_KEY. NAME is 1 to 64 of\n"
	"A-Z a-z 0-9 . _ - (default \"default\"). ls never shows a key.\n";

static int key_create(struct opts *o, const char *name)
{
	char body[160], key[64], id[32];
	struct json_doc doc;
	struct json_writer w;
	struct buf b;
	int status;

	buf_init(&b, body, sizeof(body));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	if (name) {
		json_key(&w, "name");
		json_str_write(&w, name);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		fprintf(stderr, "agentic e2b-key: the name is too long\n");
		return 2;
	}
	status = cli_call(o, "POST", "/api/v1/e2b-keys", (const char *)b.data, b.len, 201, &doc);
	if (status)
		return status < 0 ? 0 : status;
	cli_field(&doc, 0, "key", key, sizeof(key));
	cli_field(&doc, 0, "id", id, sizeof(id));
	if (strncmp(key, "e2b_", 4) != 0) {
		fprintf(stderr, "agentic e2b-key: agenticd's answer has no key\n");
		return 1;
	}
	printf("%s\n", key);
	memset(key, 0, sizeof(key));
	memset(cli_body, 0, sizeof(cli_body));
	fprintf(stderr, "agentic e2b-key: key %s created; it is shown only now\n", id);
	return 0;
}

static int key_ls(struct opts *o)
{
	char id[32], name[80], created[40];
	struct json_doc doc;
	int status, arr;

	status = cli_call(o, "GET", "/api/v1/e2b-keys", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((arr = json_obj_get(&doc, 0, "keys")) < 0 || doc.tok[arr].type != JSON_ARRAY) {
		fprintf(stderr, "agentic e2b-key: agenticd's answer has no keys list\n");
		return 1;
	}
	printf("%-16s  %-24s  %s\n", "ID", "NAME", "CREATED");
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i))
		printf("%-16s  %-24s  %s\n", cli_field(&doc, i, "id", id, sizeof(id)),
		       cli_field(&doc, i, "name", name, sizeof(name)),
		       cli_field(&doc, i, "created", created, sizeof(created)));
	return 0;
}

static int key_rm(struct opts *o, const char *id)
{
	char target[64];
	int status;

	if (strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16) {
		fprintf(stderr, "agentic e2b-key: '%s' is not a key's id (16 hex: agentic e2b-key "
			"ls)\n", strncmp(id, "e2b_", 4) == 0 ? "(a key)" : id);
		return 2;
	}
	snprintf(target, sizeof(target), "/api/v1/e2b-keys/%s", id);
	status = cli_call(o, "DELETE", target, NULL, 0, 200, NULL);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s\n", id);
	return 0;
}

int cli_verb_e2bkey(int argc, char **argv, struct opts *o)
{
	const char *args[2] = { NULL, NULL }, *name = NULL;
	int n = 0, c;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_e2bkey_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (argv[i][0] == '-' || n == 2)
			return cli_usage_error(cli_e2bkey_help);
		else
			args[n++] = argv[i];
	}
	if (n == 1 && strcmp(args[0], "create") == 0)
		return key_create(o, name);
	if (n == 1 && !name && strcmp(args[0], "ls") == 0)
		return key_ls(o);
	if (n == 2 && !name && strcmp(args[0], "rm") == 0)
		return key_rm(o, args[1]);
	return cli_usage_error(cli_e2bkey_help);
}
