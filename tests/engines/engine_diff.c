/* Which engine profiles disagree, where and how often, on captures: the
 * table of fp4scope-formats(7), ENGINES COMPARED.
 *
 *   engine_diff [--roff] [--check PAGE] -f mxfp4|nvfp4 -p P1,P2,... CAPTURE...
 *
 * Every 2-D dataset of every capture (activations of both sides and weights)
 * whose column count is a multiple of 32 goes through each profile P (public
 * API, as fp4-quant does it: the tensor amax the profile takes, its tensor
 * scale, one chunk); for each pair of profiles it counts the blocks whose
 * scale byte differs, the elements whose code differs in a block whose scale
 * is the same (element rounding: ties, approximate factors, zero handling)
 * and in one whose scale differs. Pairs that never differ are listed at the
 * end. --roff prints the rows as the page's table body (tab-separated
 * percentages of blocks and elements); --check PAGE fails (exit 1) unless
 * each of those rows is a line of the page. */
#include <fp4scope/capture.h>
#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 24

typedef struct pair_count {
    unsigned long long scale, code_same, code_other;
} pair_count;

static char *names[MAXP];
static int np;
static pair_count cnt[MAXP][MAXP];
static unsigned long long nblocks, nelems, ntensors;

static int usage(void)
{
    fprintf(stderr, "usage: engine_diff [--roff] [--check PAGE] -f mxfp4|nvfp4 -p P1,P2,... CAPTURE...\n");
    return 2;
}

/* the page's line for one pair: "a b scale% same% other%" rounded as printed */
static void row(char *buf, size_t n, int i, int j, int roff)
{
    const pair_count *c = &cnt[i][j];
    double s = nblocks ? 100.0 * (double)c->scale / (double)nblocks : 0;
    double e1 = nelems ? 100.0 * (double)c->code_same / (double)nelems : 0;
    double e2 = nelems ? 100.0 * (double)c->code_other / (double)nelems : 0;
    if (roff)
        snprintf(buf, n, "%s\t%s\t%.3g%%\t%.3g%%\t%.3g%%\n", names[i], names[j], s, e1, e2);
    else
        snprintf(buf, n, "%-16s %-16s %10llu %8.3g%% %10llu %8.3g%% %10llu %8.3g%%", names[i], names[j], c->scale,
                 s, c->code_same, e1, c->code_other, e2);
}

int main(int argc, char **argv)
{
    int roff = 0, a = 1;
    const char *check = NULL, *fmt_s = NULL;
    char *plist = NULL;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--roff")) roff = 1;
        else if (!strcmp(argv[a], "--check") && a + 1 < argc) check = argv[++a];
        else if (!strcmp(argv[a], "-f") && a + 1 < argc) fmt_s = argv[++a];
        else if (!strcmp(argv[a], "-p") && a + 1 < argc) plist = argv[++a];
        else return usage();
    }
    if (!fmt_s || !plist || a >= argc) return usage();
    fp4s_format fmt;
    if (fp4s_format_parse(fmt_s, &fmt)) { fprintf(stderr, "engine_diff: %s\n", fp4s_last_error()); return 2; }
    fp4s_spec spec[MAXP];
    for (char *t = strtok(plist, ","); t && np < MAXP; t = strtok(NULL, ",")) {
        if (fp4s_spec_profile(&spec[np], fmt, t)) { fprintf(stderr, "engine_diff: %s\n", fp4s_last_error()); return 2; }
        names[np++] = t;
    }
    const uint32_t B = spec[0].block;
    for (; a < argc; a++) {
        fp4s_capture_entry *e;
        size_t ne;
        if (fp4s_capture_list(argv[a], &e, &ne)) {
            fprintf(stderr, "engine_diff: %s: %s\n", argv[a], fp4s_last_error());
            return 3;
        }
        for (size_t k = 0; k < ne; k++) {
            if (e[k].cols % 32 || e[k].rows == 0 || !strcmp(e[k].site, "logprobs") || e[k].rows * e[k].cols < 32)
                continue;
            char sp[1024];
            fp4s_capture_entry_spec(argv[a], &e[k], sp, sizeof sp);
            float *x;
            size_t rows, cols;
            if (fp4s_source_read_all(sp, &x, &rows, &cols)) continue; /* 1-D, tokens, ... */
            size_t n = rows * cols, nb = n / B;
            uint8_t *codes[MAXP], *scales[MAXP];
            for (int p = 0; p < np; p++) {
                codes[p] = malloc(n);
                scales[p] = malloc(nb);
                fp4s_tscale ts;
                float amax = fp4s_spec_amax(&spec[p], x, rows, cols, cols, NULL);
                int rc = fp4s_tscale_init(&spec[p], amax, &ts);
                fp4s_qout q = {.codes = codes[p], .ld_codes = cols, .scales = scales[p],
                               .ld_scales = cols / B};
                if (!rc) rc = fp4s_quantize(&spec[p], &ts, x, rows, cols, cols, 0, &q, NULL);
                if (rc) { fprintf(stderr, "engine_diff: %s %s: %s\n", sp, names[p], fp4s_last_error()); return 5; }
            }
            for (int i = 0; i < np; i++)
                for (int j = i + 1; j < np; j++)
                    for (size_t b = 0; b < nb; b++) {
                        int sd = scales[i][b] != scales[j][b];
                        cnt[i][j].scale += (unsigned)sd;
                        for (size_t q = b * B; q < (b + 1) * B; q++)
                            if (codes[i][q] != codes[j][q]) {
                                if (sd) cnt[i][j].code_other++;
                                else cnt[i][j].code_same++;
                            }
                    }
            nblocks += nb;
            nelems += n;
            ntensors++;
            for (int p = 0; p < np; p++) {
                free(codes[p]);
                free(scales[p]);
            }
            free(x);
        }
        free(e);
    }
    char line[512];
    char *page = NULL;
    if (check) {
        FILE *f = fopen(check, "r");
        if (!f) { fprintf(stderr, "engine_diff: %s: cannot read\n", check); return 3; }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        page = calloc((size_t)len + 1, 1);
        if (!page || fread(page, 1, (size_t)len, f) != (size_t)len) { fclose(f); return 3; }
        fclose(f);
    }
    int missing = 0;
    if (!roff && !check)
        printf("%llu tensors, %llu blocks, %llu elements\n%-16s %-16s %21s %21s %21s\n", ntensors, nblocks, nelems,
               "profile", "profile", "scale bytes differ", "codes (same scale)", "codes (other scale)");
    for (int i = 0; i < np; i++)
        for (int j = i + 1; j < np; j++) {
            const pair_count *c = &cnt[i][j];
            if (!c->scale && !c->code_same && !c->code_other) continue;
            row(line, sizeof line, i, j, roff || check);
            if (check) {
                /* the row must be a whole line of the page */
                char whole[520];
                snprintf(whole, sizeof whole, "\n%s", line);
                if (!strstr(page, whole)) {
                    fprintf(stderr, "engine_diff: %s lacks the row: %s", check, line);
                    missing++;
                }
            } else {
                printf("%s%s", line, roff ? "" : "\n");
            }
        }
    if (!check) {
        printf(roff ? "identical:" : "never differ:");
        for (int i = 0; i < np; i++)
            for (int j = i + 1; j < np; j++) {
                const pair_count *c = &cnt[i][j];
                if (!c->scale && !c->code_same && !c->code_other) printf(" %s=%s", names[i], names[j]);
            }
        printf("\n");
        if (roff) printf("(%llu tensors, %llu blocks, %llu elements)\n", ntensors, nblocks, nelems);
    }
    free(page);
    return missing ? 1 : 0;
}
