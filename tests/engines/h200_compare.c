/* fp4scope's engine profiles against the bytes measured on an H200.
 *
 *   h200_compare [--quiet] [--by-tensor] FILE.h5
 *
 * FILE.h5 is written by scripts/gpu/engines/pack_results.py from the output
 * of scripts/gpu/engines/run.sh: BF16 tensors and, per recipe (the engines'
 * arithmetic run on the GPU with the GPU's instructions, and FlashInfer's own
 * kernel where it was built), the E2M1 codes, scale bytes and global scale
 * it gave. Each recipe names the fp4scope profile and format it must equal:
 * the tensors go through fp4scope (the scalar reference and each SIMD level,
 * public API only) and every global scale, scale byte and code is compared.
 * Prints one line per recipe (and per tensor with --by-tensor): tensors,
 * scales and codes compared and differing, the first differences; exits 1
 * if anything differs, 3 if the file is unreadable. */
#include <fp4scope/quant.h>

#include <hdf5.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int quiet, by_tensor;

static void *read_all(hid_t f, const char *path, hid_t type, size_t size, size_t *n)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t sp = H5Dget_space(d);
    hssize_t k = H5Sget_simple_extent_npoints(sp);
    void *buf = malloc((size_t)(k > 0 ? k : 1) * size);
    if (!buf || H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    H5Sclose(sp);
    H5Dclose(d);
    *n = (size_t)k;
    return buf;
}

static float bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

typedef struct tensors {
    size_t n;
    char **name;
    int64_t *rows, *cols, *off;
    uint16_t *x;
} tensors;

static const char *const levels[] = {"ref", "avx2", "avx512"};

int main(int argc, char **argv)
{
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--quiet")) quiet = 1;
        else if (!strcmp(argv[a], "--by-tensor")) by_tensor = 1;
        else { fprintf(stderr, "usage: h200_compare [--quiet] [--by-tensor] FILE.h5\n"); return 2; }
    }
    if (a + 1 != argc) { fprintf(stderr, "usage: h200_compare [--quiet] [--by-tensor] FILE.h5\n"); return 2; }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(argv[a], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) { fprintf(stderr, "h200_compare: %s: not an HDF5 file\n", argv[a]); return 3; }
    tensors t;
    size_t k1, k2, k3, nx;
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    H5Tset_cset(st, H5T_CSET_UTF8);
    t.name = read_all(f, "/tensors/name", st, sizeof(char *), &t.n);
    t.rows = read_all(f, "/tensors/rows", H5T_NATIVE_INT64, 8, &k1);
    t.cols = read_all(f, "/tensors/cols", H5T_NATIVE_INT64, 8, &k2);
    t.off = read_all(f, "/tensors/offset", H5T_NATIVE_INT64, 8, &k3);
    t.x = read_all(f, "/tensors/x", H5T_NATIVE_UINT16, 2, &nx);
    if (!t.name || !t.rows || !t.cols || !t.off || !t.x || k1 != t.n || k2 != t.n || k3 != t.n) {
        fprintf(stderr, "h200_compare: %s: /tensors incomplete\n", argv[a]);
        return 3;
    }
    hid_t g = H5Gopen2(f, "/recipes", H5P_DEFAULT);
    hsize_t nrec = 0;
    if (g < 0 || H5Gget_num_objs(g, &nrec) < 0) { fprintf(stderr, "h200_compare: no /recipes\n"); return 3; }
    long total_diff = 0;
    printf("%-18s %-24s %8s %10s %8s %12s %8s %8s\n", "recipe", "fp4scope profile", "tensors", "scales", "differ",
           "codes", "differ", "S differ");
    for (hsize_t r = 0; r < nrec; r++) {
        char rname[64], path[128], prof[64], fmtname[16];
        H5Gget_objname_by_idx(g, r, rname, sizeof rname);
        snprintf(path, sizeof path, "/recipes/%s", rname);
        hid_t rg = H5Gopen2(f, path, H5P_DEFAULT);
        hid_t at = H5Aopen(rg, "profile", H5P_DEFAULT);
        char *pstr = NULL;
        H5Aread(at, st, &pstr);
        H5Aclose(at);
        if (!pstr || sscanf(pstr, "%63s %15s", prof, fmtname) != 2) { fprintf(stderr, "%s: bad profile\n", rname); return 3; }
        H5free_memory(pstr);
        fp4s_format fmt;
        fp4s_spec s;
        if (fp4s_format_parse(fmtname, &fmt) || fp4s_spec_profile(&s, fmt, prof)) {
            fprintf(stderr, "h200_compare: %s: %s\n", rname, fp4s_last_error());
            return 3;
        }
        size_t nc, ns, ng;
        snprintf(path, sizeof path, "/recipes/%s/codes", rname);
        uint8_t *pk = read_all(f, path, H5T_NATIVE_UINT8, 1, &nc);
        snprintf(path, sizeof path, "/recipes/%s/scales", rname);
        uint8_t *sc = read_all(f, path, H5T_NATIVE_UINT8, 1, &ns);
        snprintf(path, sizeof path, "/recipes/%s/global_scale", rname);
        uint32_t *gs = read_all(f, path, H5T_NATIVE_UINT32, 4, &ng);
        if (!pk || !sc || !gs || ng != t.n || nc * 2 != nx || ns * s.block != nx) {
            fprintf(stderr, "h200_compare: %s: datasets missing or of the wrong size\n", rname);
            return 3;
        }
        long nscale = 0, nscale_d = 0, ncode = 0, ncode_d = 0, ngs_d = 0, shown = 0;
        for (int lv = 0; lv < 3; lv++) {
            if (fp4s_kernels_select(levels[lv]) != 0) continue;
            long lsd = 0, lcd = 0, lgd = 0;
            for (size_t i = 0; i < t.n; i++) {
                size_t rows = (size_t)t.rows[i], cols = (size_t)t.cols[i], n = rows * cols, o = (size_t)t.off[i];
                float *x = malloc(n * sizeof *x);
                uint8_t *codes = malloc(n), *scales = malloc(n / s.block);
                for (size_t j = 0; j < n; j++) x[j] = bf16(t.x[o + j]);
                fp4s_tscale ts;
                float amax = fp4s_spec_amax(&s, x, rows, cols, cols, NULL);
                int rc = fp4s_tscale_init(&s, amax, &ts);
                fp4s_qout q = {.codes = codes, .ld_codes = cols, .scales = scales,
                               .ld_scales = cols / s.block};
                if (!rc) rc = fp4s_quantize(&s, &ts, x, rows, cols, cols, 0, &q, NULL);
                if (rc) { fprintf(stderr, "h200_compare: %s %s: %s\n", rname, t.name[i], fp4s_last_error()); return 5; }
                long tsd = 0, tcd = 0;
                if (fmt == FP4S_NVFP4 && fbits(ts.s_enc) != gs[i]) {
                    lgd++;
                    if (!quiet && shown++ < 8)
                        printf("  %s %s [%s]: global scale fp4scope %08x, GPU %08x\n", rname, t.name[i], levels[lv],
                               fbits(ts.s_enc), gs[i]);
                }
                for (size_t b = 0; b < n / s.block; b++) {
                    uint8_t want = sc[(o / s.block) + b];
                    if (scales[b] != want) {
                        tsd++;
                        if (!quiet && shown++ < 8)
                            printf("  %s %s [%s]: block %zu (row %zu): scale fp4scope %02x, GPU %02x\n", rname,
                                   t.name[i], levels[lv], b, b * s.block / cols, scales[b], want);
                    }
                }
                for (size_t j = 0; j < n; j++) {
                    size_t p = o + j;
                    uint8_t want = (pk[p / 2] >> ((p & 1) * 4)) & 15;
                    if (codes[j] != want) {
                        tcd++;
                        if (!quiet && shown++ < 8)
                            printf("  %s %s [%s]: element %zu (row %zu col %zu, x = %a): code fp4scope %x, GPU %x\n",
                                   rname, t.name[i], levels[lv], j, j / cols, j % cols, (double)x[j], codes[j], want);
                    }
                }
                if (lv == 0) {
                    nscale += (long)(n / s.block);
                    ncode += (long)n;
                    if (by_tensor && (tsd || tcd))
                        printf("  %-16s %-40s scales %ld/%zu codes %ld/%zu differ\n", rname, t.name[i], tsd,
                               n / s.block, tcd, n);
                }
                lsd += tsd;
                lcd += tcd;
                free(x);
                free(codes);
                free(scales);
            }
            nscale_d += lsd;
            ncode_d += lcd;
            ngs_d += lgd;
        }
        fp4s_kernels_force_ref(false);
        fp4s_kernels_select(fp4s_kernels_cpu_level());
        char label[96];
        snprintf(label, sizeof label, "%s/%s", prof, fmtname);
        printf("%-18s %-24s %8zu %10ld %8ld %12ld %8ld %8ld\n", rname, label, t.n, nscale, nscale_d, ncode, ncode_d,
               ngs_d);
        total_diff += nscale_d + ncode_d + ngs_d;
        free(pk);
        free(sc);
        free(gs);
        H5Gclose(rg);
    }
    H5Gclose(g);
    H5Fclose(f);
    for (size_t i = 0; i < t.n; i++) H5free_memory(t.name[i]);
    free(t.name);
    free(t.rows);
    free(t.cols);
    free(t.off);
    free(t.x);
    H5Tclose(st);
    printf("h200_compare: %s\n", total_diff ? "DIFFERENCES" : "every scale, code and global scale equal");
    return total_diff ? 1 : 0;
}
