/* replay_main.c: runs a libFuzzer target over every file of its corpus, without libFuzzer,
 * so `make check` replays the corpora under ASan/UBSan with the system compiler. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data;
	long size;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return -1;
	}
	data = malloc((size_t)size + 1);
	if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(data, (size_t)size);
	free(data);
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	d = opendir(argv[1]);
	if (!d) {
		printf("not ok 1 - corpus %s is missing\n", argv[1]);
		return 1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		if (replay_file(path) != 0) {
			printf("not ok 1 - cannot read %s\n", path);
			closedir(d);
			return 1;
		}
		n++;
	}
	closedir(d);
	/* Reaching here means no input crashed or tripped a sanitizer. */
	printf("ok 1 - replayed %d corpus inputs of %s without a fault\n", n, argv[1]);
	return n > 0 ? 0 : 1;
}
