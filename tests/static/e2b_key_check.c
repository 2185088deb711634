/* e2b_key_check.c: the E2B key store's own check, from outside agenticd: opens STATE_DIR's
 * e2b-keys as agenticd does (its owner and mode checked) and says whether the key read from
 * stdin (never argv: ps would show it) is one of its keys. Exit 0 valid, 1 not, 2 the file
 * refused (why on stderr). The positive control of tests/security/test_e2b_key_secrecy. */
#include <stdio.h>
#include <string.h>

#include "e2b/e2b_keys.h"

int main(int argc, char **argv)
{
	char key[128];
	int valid;

	if (argc != 2 || !fgets(key, sizeof(key), stdin))
		return 2;
	key[strcspn(key, "\n")] = '\0';
	if (e2b_keys_open(argv[1]) != 0) {
		fprintf(stderr, "e2b_key_check: %s\n", e2b_keys_error());
		return 2;
	}
	valid = e2b_key_valid(key);
	memset(key, 0, sizeof(key));
	puts(valid ? "valid" : "invalid");
	return valid ? 0 : 1;
}
