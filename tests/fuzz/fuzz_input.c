/* libFuzzer target over the readers of fp4scope's own parsers, through the
 * public API: each input is written to a file and read back whole.
 * FUZZ_KIND (compile time): 0 .npy, 1 .safetensors (tensor "w"), 2 CSV trace,
 * 3 JSONL trace. Built by -Dfuzzers=true with clang; see tests/fuzz/README.md. */
#include <fp4scope/mismatch.h>
#include <fp4scope/tensor.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FUZZ_KIND
#error "define FUZZ_KIND"
#endif

static const char *const ext[] = {"npy", "safetensors", "csv", "jsonl"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[128];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fp4s-fuzz-%d.%s", dir, (int)getpid(), ext[FUZZ_KIND]);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort(); /* the harness itself is broken: say so loudly */
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
#if FUZZ_KIND <= 1
    char spec[160];
    snprintf(spec, sizeof spec, FUZZ_KIND == 1 ? "%s:w" : "%s", path);
    float *x = NULL;
    size_t rows, cols;
    if (fp4s_source_read_all(spec, &x, &rows, &cols) == 0) free(x);
#else
    fp4s_mm_result r;
    memset(&r, 0, sizeof r);
    (void)fp4s_mm_analyze(path, NULL, NULL, NULL, &r);
    fp4s_mm_result_free(&r);
#endif
    return 0;
}
