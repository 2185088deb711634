/* cmdenv.c: what a workload command gets besides its argv: the base environment (the
 * container's, less AGENT_*, HOME, USER, LOGNAME and PWD, with a claim's env), and the exec area a
 * supervisor reads after the fork (argv, envp, PATH, cwd). Owns the claim's text. Calls only
 * base and init/env.c; nothing in cmd.c. */
#include <string.h>

#include "base/base.h"
#include "init/cmdtab.h"
#include "init/env.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static int env_key_is(const char *entry, const char *key)
{
	size_t n = strlen(key);

	return strncmp(entry, key, n) == 0 && entry[n] == '=';
}

static int env_valid_key(const char *k);

static bool ids_key(const char *entry)
{
	return env_key_is(entry, "HOME") || env_key_is(entry, "USER") ||
	       env_key_is(entry, "LOGNAME") || env_key_is(entry, "PWD");
}

/* Does "K=V" entry name key (its length klen)? */
static bool entry_names(const char *entry, const char *key, size_t klen)
{
	return strncmp(entry, key, klen) == 0 && entry[klen] == '=';
}

/* The base env: the container's (without AGENT_*, HOME, USER, LOGNAME), less what the claim's
 * nclaim entries (claim_text, "K=V" each after the other) replace, then those. 0 or ERR_LIMIT
 * (and then nbase is 0: the caller refuses). */
int cmd_base_env_fill(struct init_cmds *c, const char *claim, size_t nclaim)
{
	c->nbase = 0;
	for (char **e = c->environ; *e; e++) {
		const char *k = claim;
		bool replaced = false;

		if (init_env_is_private(*e) || ids_key(*e))
			continue;
		for (size_t i = 0; i < nclaim && !replaced; i++, k += strlen(k) + 1)
			replaced = entry_names(*e, k, strcspn(k, "="));
		if (replaced)
			continue;
		if (c->nbase == LIMIT_INIT_ENV_VARS - 8 - LIMIT_SANDBOX_ENV)
			return ERR_LIMIT;
		c->base_env[c->nbase++] = *e;
	}
	for (size_t i = 0; i < nclaim; i++, claim += strlen(claim) + 1)
		c->base_env[c->nbase++] = claim;
	return 0;
}

/* The claim's "K=V" strings, outside the table's storage: a command's supervisor reads them
 * after the fork, which wipes that storage (the environment's strings are kept the same way) */
static char claim_text[LIMIT_SANDBOX_CLAIM_ENV_BYTES];

int init_cmds_claim(struct init_cmds *c, const Agentic__Sandbox__V1__SandboxClaim *m,
		    const char **why)
{
	static char text[LIMIT_SANDBOX_CLAIM_ENV_BYTES];
	size_t len = 0, n = 0;

	*why = "the claim has more env entries than a create may have";
	if (m->n_env > LIMIT_SANDBOX_ENV)
		return ERR_LIMIT;
	for (size_t i = 0; i < m->n_env; i++) {
		const char *key = m->env[i]->key, *value = m->env[i]->value;
		size_t kl = strlen(key), vl = strlen(value);
		bool later = false;

		*why = "env names must be non-empty and free of '='";
		if (!env_valid_key(key))
			return ERR_PARSE;
		*why = "env may not set AGENT_* variables (they are the init's alone)";
		if (strncmp(key, "AGENT_", 6) == 0)
			return ERR_PARSE;
		for (size_t j = i + 1; j < m->n_env && !later; j++)
			later = strcmp(key, m->env[j]->key) == 0;
		if (later || strcmp(key, "HOME") == 0 || strcmp(key, "USER") == 0 ||
		    strcmp(key, "LOGNAME") == 0)
			continue;
		*why = "the claim's env does not fit the init's claim buffer";
		if (kl + vl + 2 > sizeof(text) - len)
			return ERR_LIMIT;
		memcpy(text + len, key, kl);
		text[len + kl] = '=';
		memcpy(text + len + kl + 1, value, vl + 1);
		len += kl + vl + 2;
		n++;
	}
	/* checked whole, then put in place: a refused claim changes nothing. It fits: setup
	 * kept room for LIMIT_SANDBOX_ENV entries past the container's. */
	memcpy(claim_text, text, len);
	return cmd_base_env_fill(c, claim_text, n);
}

/* Copies s into the scratch arena; NULL when it is full. */
static char *scratch_cat(struct arena *a, const char *k, const char *eq, const char *v)
{
	size_t kl = strlen(k), el = strlen(eq), vl = strlen(v);
	char *p = arena_alloc(a, kl + el + vl + 1, 1);

	if (!p)
		return NULL;
	memcpy(p, k, kl);
	memcpy(p + kl, eq, el);
	memcpy(p + kl + el, v, vl + 1);
	return p;
}

/* True when the request's env names the variable of entry ("NAME=value"). */
static int overridden(const Agentic__Sandbox__V1__CommandRequest *req, const char *entry)
{
	for (size_t i = 0; i < req->n_env; i++)
		if (env_key_is(entry, req->env[i]->key))
			return 1;
	return 0;
}

static int env_valid_key(const char *k)
{
	return *k && !strchr(k, '=');
}

/* Builds what the supervisor needs from req in the exec area (argv, envp, PATH, cwd), every
 * string copied there, since the request itself lives in storage the fork wipes: the
 * container's environment without AGENT_*, then HOME, USER, LOGNAME of the workload user, PWD,
 * then the request's env, each later one replacing an earlier one of the same name. 0, or
 * an error with *why on refusal. */
int cmd_build_exec(struct init_cmds *c, const Agentic__Sandbox__V1__CommandRequest *req,
		   struct init_spawn *sp, const char **why)
{
	struct arena a;
	char **argv, **envp;
	size_t ne = 0, nmax = c->nbase + 4 + req->n_env;

	arena_init(&a, c->scratch, LIMIT_INIT_EXEC_BYTES);
	*why = "the command's arguments and environment exceed the init's exec limit";
	if (req->n_args > LIMIT_INIT_ARGS || nmax > LIMIT_INIT_ENV_VARS)
		return ERR_LIMIT;
	argv = arena_alloc(&a, (req->n_args + 2) * sizeof(char *), 8);
	envp = arena_alloc(&a, (nmax + 1) * sizeof(char *), 8);
	if (!argv || !envp)
		return ERR_LIMIT;
	for (size_t i = 0; i <= req->n_args; i++)
		if (!(argv[i] = scratch_cat(&a, i ? req->args[i - 1] : req->command, "", "")))
			return ERR_LIMIT;
	argv[req->n_args + 1] = NULL;
	sp->cwd = req->working_dir[0] ? scratch_cat(&a, req->working_dir, "", "") : INIT_WORKSPACE;
	if (!sp->cwd)
		return ERR_LIMIT;
	for (size_t i = 0; i < req->n_env; i++) {
		*why = "env names must be non-empty and free of '='";
		if (!env_valid_key(req->env[i]->key))
			return ERR_PARSE;
		*why = "env may not set AGENT_* variables (they are the init's alone)";
		if (strncmp(req->env[i]->key, "AGENT_", 6) == 0)
			return ERR_PARSE;
	}
	for (size_t i = 0; i < c->nbase; i++)
		if (!overridden(req, c->base_env[i]))
			envp[ne++] = (char *)c->base_env[i];
	{
		/* PWD: a shell names the cwd as asked (a link's name, not its target) */
		const char *ids[4][2] = { { "HOME", c->home }, { "USER", c->user },
					  { "LOGNAME", c->user }, { "PWD", sp->cwd } };

		*why = "the command's arguments and environment exceed the init's exec limit";
		for (int i = 0; i < 4; i++) {
			char *e = scratch_cat(&a, ids[i][0], "=", ids[i][1]);

			if (!e)
				return ERR_LIMIT;
			if (!overridden(req, e))
				envp[ne++] = e;
		}
	}
	for (size_t i = 0; i < req->n_env; i++) {
		int later = 0;

		/* a name given twice: the last one wins */
		for (size_t j = i + 1; j < req->n_env && !later; j++)
			later = strcmp(req->env[i]->key, req->env[j]->key) == 0;
		if (later)
			continue;
		envp[ne] = scratch_cat(&a, req->env[i]->key, "=", req->env[i]->value);
		if (!envp[ne++])
			return ERR_LIMIT;
	}
	sp->path = DEFAULT_PATH;
	for (size_t i = 0; i < ne; i++)
		if (env_key_is(envp[i], "PATH"))
			sp->path = envp[i] + 5;
	envp[ne] = NULL;
	sp->argv = argv;
	sp->envp = envp;
	c->scratch_used = a.used;
	return 0;
}
