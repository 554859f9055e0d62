/* Replays a libFuzzer corpus without libFuzzer: each argument is a file, or a
 * directory whose files are read in name order, and each file is handed to
 * LLVMFuzzerTestOneInput (fuzz_input.c) as libFuzzer would hand it. Built
 * with any compiler, so the slow suite replays the committed corpus
 * (tests/fuzz/corpus) in every build, under the sanitizers in the sanitizer
 * build. A crash or sanitizer report fails the run; it prints the count. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t runs;

static int one(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b) {
            fclose(f);
            fprintf(stderr, "replay: out of memory\n");
            return 1;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        uint8_t *nb = realloc(b, cap);
        if (!nb) free(b);
        b = nb;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(b, n);
    free(b);
    runs++;
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (one(argv[i])) return 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) return 1;
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                char **nn = realloc(names, cap * sizeof *nn);
                if (!nn) return 1;
                names = nn;
            }
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[n] = malloc(l);
            if (!names[n]) return 1;
            snprintf(names[n++], l, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp);
        for (size_t k = 0; k < n; k++) {
            if (one(names[k])) return 1;
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %zu inputs, no crash\n", runs);
    return 0;
}
