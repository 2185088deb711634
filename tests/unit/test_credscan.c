/* test_credscan.c: which env entries look like raw credentials (by key, by value), which
 * ordinary values an operator sets do not, and that only a fixed rule word comes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "profile/credscan.h"

struct hit {
	const char *kv;
	const char *rule;
};

static void expect(const struct hit *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *got = credscan_entry(cases[i].kv);

		if (!cases[i].rule ? got != NULL : !got || strcmp(got, cases[i].rule) != 0) {
			print_error("%s: got %s, want %s\n", cases[i].kv, got ? got : "NULL",
				    cases[i].rule ? cases[i].rule : "NULL");
			fail();
		}
	}
}

static void test_credscan_flags_credential_key_shapes_in_any_case(void **state)
{
	static const struct hit cases[] = {
		{ "ANTHROPIC_API_KEY=x1", "key_well_known" },
		{ "OPENAI_API_KEY=abc", "key_well_known" },
		{ "GITHUB_TOKEN=abc", "key_well_known" },
		{ "gh_token=abc", "key_well_known" },
		{ "AWS_SECRET_ACCESS_KEY=abc", "key_well_known" },
		{ "HF_TOKEN=abc", "key_well_known" },
		{ "GITHUB_TOKEN", "key_well_known" },
		{ "MISTRAL_API_KEY=abc", "key_api_key" },
		{ "api_key=abc", "key_api_key" },
		{ "Stripe_Api_Key=abc", "key_api_key" },
		{ "SLACK_BOT_TOKEN=abc", "key_token" },
		{ "TOKEN=abc", "key_token" },
		{ "npm_token=abc", "key_token" },
		{ "CLIENT_SECRET=abc", "key_secret" },
		{ "SECRET_KEY_BASE=abc", "key_secret" },
		{ "mysecretthing=abc", "key_secret" },
		{ "PGPASSWORD=hunter2", "key_password" },
		{ "DB_PASSWORD=hunter2", "key_password" },
		{ "PASSWORD=12", "key_password" },
		{ "PASSWORD=/not a path", "key_password" },
		{ "DB_PASSWORD=./relative", "key_password" },
		{ "MINIO_ACCESS_KEY=abc", "key_access_key" },
		{ "SSH_PRIVATE_KEY=abc", "key_private_key" },
		{ "private_key_pem=abc", "key_private_key" },
		/* a bare key is judged by its key alone */
		{ "DB_PASSWORD", "key_password" },
	};

	expect(cases, ARRAY_LEN(cases));
}

static void test_credscan_leaves_ordinary_keys_and_secret_file_pointers_alone(void **state)
{
	static const struct hit cases[] = {
		{ "PATH=/usr/local/bin:/usr/bin:/bin", NULL },
		{ "HOME=/home/agent", NULL },
		{ "LANG=en_US.UTF-8", NULL },
		{ "LC_ALL=C.UTF-8", NULL },
		{ "TERM=xterm-256color", NULL },
		{ "TOKENIZERS_PARALLELISM=false", NULL },
		{ "AWS_ACCESS_KEY_ID_NAME=reader", NULL },
		{ "AWS_REGION=eu-west-1", NULL },
		{ "MAX_TOKENS=4096", NULL },
		{ "KEYBOARD=us", NULL },
		{ "PASSWORD_FILE=/run/secrets/db", NULL },
		{ "POSTGRES_PASSWORD_FILE=/run/secrets/pg", NULL },
		{ "SSH_PRIVATE_KEY_PATH=/home/agent/.ssh/id_ed25519", NULL },
		{ "SECRETS_DIR=/run/secrets", NULL },
		{ "SSH_PRIVATE_KEY=/home/agent/.ssh/id_ed25519", NULL },
		{ "VAULT_TOKEN=/run/secrets/vault", NULL },
		/* a credential-shaped key with nothing secret in it */
		{ "GITHUB_TOKEN=", NULL },
		{ "HF_HUB_DISABLE_TOKEN=1", NULL },
		{ "USE_SECRET_STORE=true", NULL },
		{ "REQUIRE_PASSWORD=no", NULL },
		{ "GH_TOKEN=OFF", NULL },
		{ "EMPTY=", NULL },
		{ "=", NULL },
		{ "", NULL },
	};

	expect(cases, ARRAY_LEN(cases));
}

static void test_credscan_flags_vendor_token_values_under_any_key(void **state)
{
	static const struct hit cases[] = {
		{ "X=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "value_sk_ant" },
		{ "X=sk-ant-aaaaaaaaaaaaaaaaaaaaaa", "value_sk_ant" },
		{ "X=sk-proj-Ab3dEfGh1jKlMnOpQrStUvWx", "value_sk" },
		{ "X=sk-T3BlbkFJ9aB8cD7eF6gH5iJ4kL3mN2oP", "value_sk" },
		{ "X=Bearer sk-T3BlbkFJ9aB8cD7eF6gH5iJ4kL3mN2oP", "value_sk" },
		{ "X=sk_live_51HabcdefGHIJKLmnopQRSTuv", "value_stripe" },
		{ "X=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "value_github" },
		{ "X=gho_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "value_github" },
		{ "X=ghs_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "value_github" },
		{ "X=github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789", "value_github" },
		{ "GIT_ASKPASS_VALUE=token=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "value_github" },
		{ "X=AKIAIOSFODNN7EXAMPLE", "value_aws_key_id" },
		{ "X=ASIAIOSFODNN7EXAMPLE", "value_aws_key_id" },
		{ "X=id:AKIAIOSFODNN7EXAMPLE,", "value_aws_key_id" },
		{ "X=xoxb-123456789012-123456789012-AbCdEfGhIjKl", "value_slack" },
		{ "X=xoxp-1234567890-abcdef", "value_slack" },
		{ "X=xoxa-2-1234567890-abcdef", "value_slack" },
		{ "X=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "value_jwt" },
		{ "X=-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
		  "value_private_key" },
		{ "X=-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl", "value_private_key" },
		{ "X=-----BEGIN PRIVATE KEY-----", "value_private_key" },
		{ "X=-----BEGIN EC PRIVATE KEY-----", "value_private_key" },
		{ "DATABASE_URL=postgres://app:hunter2@db.internal:5432/app", "value_url_password" },
		{ "X=https://u:p@host", "value_url_password" },
		{ "GIT_REMOTE=https://oauth2:abc@gitlab.example.com/group/repo.git", "value_url_password" },
		{ "X=redis://:s3cret@cache:6379/0", "value_url_password" },
		/* a well-known key never hides behind its value */
		{ "OPENAI_API_KEY=sk-T3BlbkFJ9aB8cD7eF6gH5iJ4kL3mN2oP", "key_well_known" },
	};

	expect(cases, ARRAY_LEN(cases));
}

static void test_credscan_flags_long_random_strings(void **state)
{
	static const struct hit cases[] = {
		/* AWS's documented example secret key, under a key that does not say so */
		{ "AWS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "value_entropy" },
		{ "X=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "value_entropy" },
		{ "X=q8Zr4TnX2vLw9kPb3MmYc7Hs1DfGj6Ke", "value_entropy" },
		{ "X=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u", "value_entropy" },
		{ "AUTH=Bearer q8Zr4TnX2vLw9kPb3MmYc7Hs1DfGj6Ke", "value_entropy" },
		{ "X=https://s3.example.com/b/o?X-Sig=q8Zr4TnX2vLw9kPb3MmYc7Hs1DfGj6Ke", "value_entropy" },
	};

	expect(cases, ARRAY_LEN(cases));
}

static void test_credscan_leaves_ordinary_values_alone(void **state)
{
	static const struct hit cases[] = {
		{ "X=true", NULL },
		{ "X=4096", NULL },
		{ "X=-1.5e10", NULL },
		{ "X=/home/agent/.cache/huggingface/hub/models--Org--Model1234567890Abc", NULL },
		{ "X=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL },
		{ "X=./build/Release/x86_64/libSomething2Static.a.tmp.output", NULL },
		{ "X=~/Projects/MyVeryLongProjectName2024/SubModuleX9", NULL },
		{ "X=https://example.com/Some/Path/With/CamelCase1234567890abcdefGh", NULL },
		{ "X=https://user@example.com/repo.git", NULL },
		{ "X=ssh://git@github.com/org/repo.git", NULL },
		{ "X=git@github.com:org/repo.git", NULL },
		{ "X=http://proxy.internal:3128", NULL },
		{ "X=550e8400-e29b-41d4-a716-446655440000", NULL },
		{ "X=0123456789abcdef0123456789abcdef01234567", NULL },
		{ "X=E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", NULL },
		{ "X=sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", NULL },
		{ "X=aGVsbG8gd29ybGQ=", NULL },
		{ "X=c2hvcnQgdGhpbmc=", NULL },
		{ "X=MyApplicationServiceConfigurationName1", NULL },
		{ "X=com.example.MyVeryLongClassNameForTesting2024", NULL },
		{ "X=Xterm256ColorTerminalEmulatorV2Configuration", NULL },
		{ "X=org.springframework.boot.autoconfigure.Application2", NULL },
		{ "X=HTTP2ServerPushEnabledForAllClients2024", NULL },
		{ "X=registry.example.com/team/image-name:v1.2.3-Build45678", NULL },
		{ "X=-Xmx2g -XX:+UseG1GC -Dfile.encoding=UTF-8", NULL },
		{ "X=MAX_CONNECTIONS_PER_HOST_DEFAULT_VALUE_12345", NULL },
		{ "X=the quick brown fox jumps over the lazy dog again and again", NULL },
		{ "X=task-runner-for-the-nightly-build-2024-v2", NULL },
		{ "X=disk-image-builder-cache-volume-2024", NULL },
		{ "X=sk-learn-preprocessing-pipeline-v2", NULL },
		{ "X=sk-SK", NULL },
		{ "X=ghp_short", NULL },
		{ "X=AKIAIOSFODNN7EXAMPLEX", NULL },
		{ "X=AKIAshort", NULL },
		{ "X=xoxb-", NULL },
		{ "X=eyJ.not.a.jwt", NULL },
		{ "X=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", NULL },
		{ "X=-----BEGIN PUBLIC KEY-----\nPRIVATE KEY----- is elsewhere", NULL },
		{ "X=https://user:@example.com/", NULL },
		{ "X=", NULL },
	};

	expect(cases, ARRAY_LEN(cases));
}

/* credscan_pair takes a key that is not NUL-terminated, and a value apart. */
static void test_credscan_pair_reads_only_key_len_bytes_of_the_key(void **state)
{
	const char line[] = "GITHUB_TOKENS_COUNT";

	assert_string_equal(credscan_pair(line, 12, "abc"), "key_well_known");
	assert_null(credscan_pair(line, strlen(line), "3"));
	assert_string_equal(credscan_pair("X", 1, "AKIAIOSFODNN7EXAMPLE"), "value_aws_key_id");
	assert_string_equal(credscan_pair("API_KEY", 7, NULL), "key_api_key");
	assert_null(credscan_pair("X", 1, NULL));
	/* a token pasted where the name belongs */
	assert_string_equal(credscan_pair("ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", 40, "1"),
			    "value_github");
	assert_string_equal(credscan_entry("AKIAIOSFODNN7EXAMPLE=x"), "value_aws_key_id");
	assert_string_equal(credscan_value("sk-ant-aaaaaaaaaaaaaaaaaaaaaa"), "value_sk_ant");
	assert_null(credscan_value("GITHUB_TOKEN"));
}

/* The answer is one of the fixed words, never a piece of the value. */
static void test_credscan_answers_a_fixed_word_never_the_value(void **state)
{
	static const char *const words[] = {
		"key_well_known", "key_api_key", "key_token", "key_secret", "key_password",
		"key_access_key", "key_private_key", "value_sk_ant", "value_sk", "value_stripe",
		"value_github", "value_aws_key_id", "value_slack", "value_jwt", "value_private_key",
		"value_url_password", "value_entropy",
	};
	static const char *const entries[] = {
		"HF_TOKEN=hf_CanaryValue123", "X=sk-ant-CanaryValueCanaryValue123",
		"X=q8Zr4TnX2vLw9kPb3MmYc7Hs1DfGj6Ke", "X=https://u:CanaryPw@h",
	};

	for (size_t i = 0; i < ARRAY_LEN(entries); i++) {
		const char *got = credscan_entry(entries[i]);
		bool known = false;

		assert_non_null(got);
		for (size_t w = 0; w < ARRAY_LEN(words); w++)
			known = known || got == words[w] || strcmp(got, words[w]) == 0;
		assert_true(known);
		assert_null(strstr(got, "Canary"));
	}
}

/* Long values are judged in bounded time and the whole value is scanned. */
static void test_credscan_scans_long_values_to_their_end(void **state)
{
	static char v[70000];

	memset(v, 'a', sizeof(v) - 1);
	v[sizeof(v) - 1] = '\0';
	assert_null(credscan_pair("X", 1, v));
	memcpy(v + sizeof(v) - 1 - 20, "AKIAIOSFODNN7EXAMPLE", 20);
	v[sizeof(v) - 1 - 21] = ' ';
	assert_string_equal(credscan_pair("X", 1, v), "value_aws_key_id");
}

/* Values made of nothing but rule starts: every one is tried, each byte read a bounded
 * number of times (a quadratic scan of these took seconds). */
static void test_credscan_values_full_of_rule_starts_are_judged(void **state)
{
	static const char *const units[] = { "sk-x-", "-eyJ", "=eyJ.", "-----BEGIN ", "ghp_-",
					     "://@", "xoxb+" };
	static char v[65536];

	for (size_t u = 0; u < ARRAY_LEN(units); u++) {
		size_t len = strlen(units[u]), n = 0;

		while (n + len < sizeof(v)) {
			memcpy(v + n, units[u], len);
			n += len;
		}
		v[n] = '\0';
		if (credscan_pair("X", 1, v)) {
			print_error("%s: %s\n", units[u], credscan_pair("X", 1, v));
			fail();
		}
	}
	/* and one that matches at the very end */
	strcpy(v + sizeof(v) - 40, " -----BEGIN EC PRIVATE KEY-----");
	assert_string_equal(credscan_pair("X", 1, v), "value_private_key");
}

/* Holes found by attacking it: shapes an operator hits that passed as no credential (so a
 * create with them was admitted under min_tier = T1). A base64 secret starts with '/' one
 * time in 64 (an AWS secret access key does), and an absolute path was taken as "where a
 * secret is"; *APIKEY and *PASSWD keys, GitLab tokens, a hex Bearer token, a token in a URL's
 * query. What must stay unflagged next to them is checked too. */
static void test_credscan_flags_shapes_that_were_missed(void **state)
{
	static const struct hit cases[] = {
		{ "AWS_SECRET_ACCESS_KEY=/9xK2mQ7vR4tL8wP1nB6cZ3yH5jD0fG+Ae7Ws9Uk", "key_well_known" },
		{ "DB_SECRET=/q8Zr4TnX2vLw9kPb3MmYc7Hs1DfGj6Ke", "key_secret" },
		{ "OPENAI_APIKEY=abc", "key_api_key" },
		{ "apikey=abc", "key_api_key" },
		{ "SMTP_PASSWD=hunter2", "key_password" },
		{ "X=glpat-abcdefghij1234567890", "value_gitlab" },
		{ "HDR=Authorization: Bearer 8f3a9c2e1b7d4f6a0c5e9b2d8f1a3c7e", "value_bearer" },
		{ "HOOK=https://api.example.com/x?access_token=abc123def456ghi789", "value_url_token" },
		{ "HOOK=https://h.example/a?x=1&Token=abcdefgh12", "value_url_token" },
		{ "BLOB=https://a.blob.example/c/f?sv=2021&sig=AbCdEf0123456789", "value_url_token" },
		/* still none */
		{ "SSH_PRIVATE_KEY=/home/agent/.ssh/id_ed25519", NULL },
		{ "CLIENT_SECRET=/etc/agentic/Secrets/Client2Key.json", NULL },
		{ "DOCS=https://example.com/search?q=hello&token=", NULL },
		{ "DOCS=https://example.com/?page=2&sort=asc&key=abcdefgh", NULL },
		{ "HDR=Bearer short", NULL },
	};
	(void)state;
	expect(cases, sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_credscan_flags_credential_key_shapes_in_any_case),
		cmocka_unit_test(test_credscan_leaves_ordinary_keys_and_secret_file_pointers_alone),
		cmocka_unit_test(test_credscan_flags_vendor_token_values_under_any_key),
		cmocka_unit_test(test_credscan_flags_long_random_strings),
		cmocka_unit_test(test_credscan_leaves_ordinary_values_alone),
		cmocka_unit_test(test_credscan_pair_reads_only_key_len_bytes_of_the_key),
		cmocka_unit_test(test_credscan_answers_a_fixed_word_never_the_value),
		cmocka_unit_test(test_credscan_scans_long_values_to_their_end),
		cmocka_unit_test(test_credscan_values_full_of_rule_starts_are_judged),
		cmocka_unit_test(test_credscan_flags_shapes_that_were_missed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
