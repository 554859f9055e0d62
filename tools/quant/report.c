/* fp4-quant: the summary of a run (and of --diff) as a table or as JSON. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static json_t *pos_json(const diffpos *pos, size_t n)
{
    json_t *fp = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "row", json_integer((json_int_t)pos[i].row));
        json_object_set_new(p, "col", json_integer((json_int_t)pos[i].col));
        json_object_set_new(p, "x", cli_json_real(pos[i].x));
        json_object_set_new(p, "code_a", json_integer(pos[i].c1));
        json_object_set_new(p, "code_b", json_integer(pos[i].c2));
        json_object_set_new(p, "a", cli_json_real(pos[i].d1));
        json_object_set_new(p, "b", cli_json_real(pos[i].d2));
        json_array_append_new(fp, p);
    }
    return fp;
}

/* ---- report helpers -------------------------------------------------------------------------- */
static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

static double rel_err(const fp4s_qstats *st) { return st->x2 > 0 ? sqrt(st->err2 / st->x2) : 0.0; }

static json_t *spec_json(const fp4s_spec *s)
{
    char desc[1024];
    fp4s_spec_describe(s, desc, sizeof desc);
    json_t *j = json_object();
    json_object_set_new(j, "profile", json_string(s->profile));
    json_object_set_new(j, "format", json_string(fp4s_format_name(s->format)));
    json_object_set_new(j, "block", json_integer(s->block));
    json_object_set_new(j, "round", json_string(fp4s_tie_name(s->tie)));
    json_object_set_new(j, "zero_sign", json_string(s->keep_neg_zero ? "keep" : "drop"));
    json_object_set_new(j, "packing", json_string(fp4s_packing_name(s->packing)));
    json_object_set_new(j, "nonfinite", json_string(fp4s_nonfinite_name(s->nonfinite)));
    if (s->format == FP4S_MXFP4) {
        json_object_set_new(j, "scale_rule", json_string(fp4s_mx_rule_name(s->mx_rule)));
        json_object_set_new(j, "zero_block_code", json_integer(s->mx_zero_block_code));
        json_object_set_new(j, "scale_is_ggml", json_boolean(s->mx_scale_is_ggml));
    } else if (s->format == FP4S_NVFP4) {
        json_object_set_new(j, "recipe", json_string(fp4s_nv_recipe_name(s->nv_recipe)));
        json_object_set_new(j, "global_scale", json_string(fp4s_global_scale_name(s->global_scale)));
        json_object_set_new(j, "scaling", json_string(s->tile2d ? "2d" : "1d"));
    } else {
        json_object_set_new(j, "fp8_gran", json_string(fp4s_fp8_gran_name(s->fp8_gran)));
    }
    json_object_set_new(j, "describe", json_string(desc));
    return j;
}

static json_t *stats_json(const run_t *r)
{
    const fp4s_qstats *st = &r->st;
    json_t *j = json_object();
    json_t *ts = json_object();
    json_object_set_new(ts, "amax", cli_json_real(r->ts.amax));
    if (r->spec.format == FP4S_NVFP4) {
        json_object_set_new(ts, "stored", cli_json_real(r->spec.global_scale == FP4S_GS_NONE ? 1.0 : r->ts.stored));
        json_object_set_new(ts, "s_enc", cli_json_real(r->ts.s_enc));
        json_object_set_new(ts, "s_dec", cli_json_real(r->ts.s_dec));
        json_object_set_new(ts, "convention", json_string(fp4s_global_scale_name(r->spec.global_scale)));
    } else if (r->spec.format == FP4S_FP8 && r->spec.fp8_gran == FP4S_FP8_TENSOR) {
        json_object_set_new(ts, "stored", cli_json_real(r->ts.fp8_scale));
    } else {
        json_object_set_new(ts, "stored", json_null());
    }
    json_object_set_new(j, "tensor_scale", ts);
    if (r->spec.format == FP4S_NVFP4) {
        json_object_set_new(ts, "scope", json_string(fp4s_nv_scope_name(r->spec.nv_scope)));
        if (r->spec.nv_input_scale > 0.0f) json_object_set_new(ts, "input_scale", cli_json_real(r->spec.nv_input_scale));
        if (r->rs_any || r->rs_nan) {
            json_object_set_new(ts, "row_min", r->rs_any ? cli_json_real(r->rs_min) : json_null());
            json_object_set_new(ts, "row_max", r->rs_any ? cli_json_real(r->rs_max) : json_null());
            json_object_set_new(ts, "row_nan", json_boolean(r->rs_nan));
        }
        json_object_set_new(j, "scale_clamped", json_integer((json_int_t)st->scale_clamped));
    }
    json_object_set_new(j, "elements", json_integer((json_int_t)st->elements));
    json_object_set_new(j, "blocks", json_integer((json_int_t)st->blocks));
    json_object_set_new(j, "saturated", json_integer((json_int_t)st->saturated));
    json_object_set_new(j, "zero_blocks", json_integer((json_int_t)st->zero_blocks));
    json_t *nf = json_object();
    json_object_set_new(nf, "total", json_integer((json_int_t)st->nonfinite));
    json_object_set_new(nf, "nan", json_integer((json_int_t)st->nan));
    json_object_set_new(nf, "inf", json_integer((json_int_t)st->inf));
    json_object_set_new(nf, "blocks", json_integer((json_int_t)st->nonfinite_blocks));
    json_object_set_new(nf, "policy", json_string(fp4s_nonfinite_name(r->spec.nonfinite)));
    json_object_set_new(j, "nonfinite", nf);
    json_object_set_new(j, "neg_zero", json_integer((json_int_t)st->neg_zero));
    json_object_set_new(j, "scale_underflow", json_integer((json_int_t)st->scale_underflow));
    json_object_set_new(j, "overflow_to_inf", json_integer((json_int_t)r->overflow_to_inf));
    json_object_set_new(j, "rel_error", cli_json_real(rel_err(st)));
    return j;
}

static void print_row(const char *label, const char *a, const char *b)
{
    if (b) printf("  %-28s %-22s %s\n", label, a, b);
    else printf("  %-28s %s\n", label, a);
}

static const char *fmt_count(char *buf, size_t n, uint64_t c, uint64_t of)
{
    if (of) snprintf(buf, n, "%llu (%.4g%%)", (unsigned long long)c, pct(c, of));
    else snprintf(buf, n, "%llu", (unsigned long long)c);
    return buf;
}

static void rules_rows(const fp4s_spec *a, const fp4s_spec *b)
{
    char x[96], y[96];
#define ROW(label, fa, fb) do { snprintf(x, sizeof x, "%s", fa); if (b) snprintf(y, sizeof y, "%s", fb); \
        print_row(label, x, b ? y : NULL); } while (0)
    if (a->format == FP4S_MXFP4) ROW("scale rule", fp4s_mx_rule_name(a->mx_rule), b ? fp4s_mx_rule_name(b->mx_rule) : "");
    if (a->format == FP4S_NVFP4) {
        ROW("recipe (fp32 op order)", fp4s_nv_recipe_name(a->nv_recipe), b ? fp4s_nv_recipe_name(b->nv_recipe) : "");
        ROW("tensor scale stored as", fp4s_global_scale_name(a->global_scale), b ? fp4s_global_scale_name(b->global_scale) : "");
        ROW("block scaling", a->tile2d ? "2-D 16x16" : "1-D", b ? (b->tile2d ? "2-D 16x16" : "1-D") : "");
    }
    if (a->format == FP4S_FP8) ROW("scale granularity", fp4s_fp8_gran_name(a->fp8_gran), b ? fp4s_fp8_gran_name(b->fp8_gran) : "");
    ROW("element ties", fp4s_tie_name(a->tie), b ? fp4s_tie_name(b->tie) : "");
    ROW("negative zero", a->keep_neg_zero ? "kept (-0)" : "dropped (+0)", b ? (b->keep_neg_zero ? "kept (-0)" : "dropped (+0)") : "");
    ROW("NaN/Inf policy", fp4s_nonfinite_name(a->nonfinite), b ? fp4s_nonfinite_name(b->nonfinite) : "");
    if (a->format == FP4S_MXFP4) {
        snprintf(x, sizeof x, "%u", a->mx_zero_block_code);
        if (b) snprintf(y, sizeof y, "%u", b->mx_zero_block_code);
        print_row("all-zero block scale code", x, b ? y : NULL);
    }
    if (a->format != FP4S_FP8) ROW("nibble packing", fp4s_packing_name(a->packing), b ? fp4s_packing_name(b->packing) : "");
#undef ROW
}

static void stats_rows(const run_t *a, const run_t *b)
{
    char x[96], y[96];
    snprintf(x, sizeof x, "%.6g", rel_err(&a->st));
    if (b) snprintf(y, sizeof y, "%.6g", rel_err(&b->st));
    print_row("rel. error ||Q(x)-x||/||x||", x, b ? y : NULL);
    if (a->spec.format == FP4S_NVFP4 || (a->spec.format == FP4S_FP8 && a->spec.fp8_gran == FP4S_FP8_TENSOR)) {
        float va = a->spec.format == FP4S_NVFP4 ? (a->spec.global_scale == FP4S_GS_NONE ? 1.0f : a->ts.stored) : a->ts.fp8_scale;
        snprintf(x, sizeof x, "%.9g", va);
        if (b) {
            float vb = b->spec.format == FP4S_NVFP4 ? (b->spec.global_scale == FP4S_GS_NONE ? 1.0f : b->ts.stored) : b->ts.fp8_scale;
            snprintf(y, sizeof y, "%.9g", vb);
        }
        print_row("tensor scale", x, b ? y : NULL);
    }
    if (a->spec.format == FP4S_NVFP4 && (row_scaled(&a->spec) || (b && row_scaled(&b->spec)))) {
        const run_t *rr[2] = {a, b};
        char *buf[2] = {x, y};
        for (int k = 0; k < (b ? 2 : 1); k++) {
            if (!row_scaled(&rr[k]->spec)) snprintf(buf[k], sizeof x, "-");
            else if (rr[k]->rs_any) snprintf(buf[k], sizeof x, "%.6g .. %.6g%s", rr[k]->rs_min, rr[k]->rs_max,
                                             rr[k]->rs_nan ? ", NaN" : "");
            else snprintf(buf[k], sizeof x, "NaN");
        }
        print_row("row tensor scales", x, b ? y : NULL);
    }
    if (a->spec.format == FP4S_NVFP4 && (a->spec.nv_input_scale > 0.0f || (b && b->spec.nv_input_scale > 0.0f))) {
        snprintf(x, sizeof x, "%.9g", a->spec.nv_input_scale);
        if (b) snprintf(y, sizeof y, "%.9g", b->spec.nv_input_scale);
        print_row("static input scale", x, b ? y : NULL);
    }
    if (a->spec.format == FP4S_NVFP4 && (a->st.scale_clamped || (b && b->st.scale_clamped)))
        print_row("block scales clamped at 448", fmt_count(x, sizeof x, a->st.scale_clamped, a->st.blocks),
                  b ? fmt_count(y, sizeof y, b->st.scale_clamped, b->st.blocks) : NULL);
    print_row("saturated elements", fmt_count(x, sizeof x, a->st.saturated, a->st.elements),
              b ? fmt_count(y, sizeof y, b->st.saturated, b->st.elements) : NULL);
    print_row("all-zero blocks", fmt_count(x, sizeof x, a->st.zero_blocks, a->st.blocks),
              b ? fmt_count(y, sizeof y, b->st.zero_blocks, b->st.blocks) : NULL);
    if (a->spec.format != FP4S_FP8)
        print_row("elements coded -0", fmt_count(x, sizeof x, a->st.neg_zero, a->st.elements),
                  b ? fmt_count(y, sizeof y, b->st.neg_zero, b->st.elements) : NULL);
    if (a->overflow_to_inf || (b && b->overflow_to_inf))
        print_row("finite inputs -> Inf/NaN", fmt_count(x, sizeof x, a->overflow_to_inf, a->st.elements),
                  b ? fmt_count(y, sizeof y, b->overflow_to_inf, b->st.elements) : NULL);
    if (a->spec.format != FP4S_FP8 && (a->st.scale_underflow || (b && b->st.scale_underflow)))
        print_row("scale underflow blocks", fmt_count(x, sizeof x, a->st.scale_underflow, a->st.blocks),
                  b ? fmt_count(y, sizeof y, b->st.scale_underflow, b->st.blocks) : NULL);
}

static const char *code_str(const fp4s_spec *s, uint8_t c, char *buf, size_t n)
{
    if (s->format == FP4S_FP8) snprintf(buf, n, "0x%02x", c);
    else snprintf(buf, n, "%2u", c);
    return buf;
}

int report_json(const job *jb)
{
    const run_t r1 = jb->r1, r2 = jb->r2;
    const diffacc da = jb->da;
    const bool diff = jb->diff;
    const fp4s_format fmt = r1.spec.format;
    const size_t blk = r1.spec.block, rows = jb->rows, cols = jb->cols, pcols = jb->pcols;
    json_t *j = json_object();
    json_object_set_new(j, "input", json_string(jb->input));
    json_object_set_new(j, "dtype", json_string(fp4s_dtype_name(jb->in_dt)));
    json_t *sh = json_array();
    if (jb->rank != 1) json_array_append_new(sh, json_integer((json_int_t)rows));
    json_array_append_new(sh, json_integer((json_int_t)cols));
    json_object_set_new(j, "shape", sh);
    if (jb->rank >= 3) { /* read as [prod(leading), last]: the shape it has in the file */
        json_t *ss = json_array();
        for (int d = 0; d < jb->rank; d++) json_array_append_new(ss, json_integer((json_int_t)jb->dims[d]));
        json_object_set_new(j, "source_shape", ss);
    }
    json_object_set_new(j, "padded_cols", json_integer((json_int_t)(pcols - cols)));
    json_object_set_new(j, "format", json_string(fp4s_format_name(fmt)));
    json_object_set_new(j, "profile", json_string(r1.spec.profile));
    json_object_set_new(j, "rules", spec_json(&r1.spec));
    json_object_set_new(j, "block", json_integer((json_int_t)blk));
    json_t *st = stats_json(&r1);
    json_object_update(j, st);
    json_decref(st);
    json_object_set_new(j, "kernels", json_string(fp4s_kernels_level()));
    json_object_set_new(j, "threads", json_integer(fp4s_get_threads()));
    if (diff) {
        json_t *d = json_object();
        json_object_set_new(d, "profile", json_string(r2.spec.profile));
        json_object_set_new(d, "rules", spec_json(&r2.spec));
        json_t *s2 = stats_json(&r2);
        json_object_update(d, s2);
        json_decref(s2);
        json_object_set_new(d, "scale_layouts_differ", json_boolean(da.scale_layouts_differ));
        json_object_set_new(d, "scale_codes_compared", json_integer((json_int_t)da.scales_total));
        json_object_set_new(d, "scale_codes_differ", json_integer((json_int_t)da.scales_diff));
        json_object_set_new(d, "scale_codes_differ_fraction", cli_json_real(da.scales_total ? (double)da.scales_diff / (double)da.scales_total : 0));
        if (da.have_scale_first) {
            json_t *fs = json_object();
            json_object_set_new(fs, "row", json_integer((json_int_t)da.scale_first_row));
            json_object_set_new(fs, "block", json_integer((json_int_t)da.scale_first_blk));
            json_object_set_new(d, "first_scale_difference", fs);
        } else {
            json_object_set_new(d, "first_scale_difference", json_null());
        }
        json_object_set_new(d, "element_codes_compared", json_integer((json_int_t)da.elems_total));
        json_object_set_new(d, "element_codes_differ", json_integer((json_int_t)da.elems_diff));
        json_object_set_new(d, "element_codes_differ_fraction", cli_json_real(da.elems_total ? (double)da.elems_diff / (double)da.elems_total : 0));
        json_object_set_new(d, "dequant_values_differ", json_integer((json_int_t)da.deq_diff));
        json_object_set_new(d, "dequant_values_differ_rounding_only", json_integer((json_int_t)da.deq_rounding));
        json_object_set_new(d, "nan_mismatch", json_integer((json_int_t)da.nan_mismatch));
        json_t *mx = json_object();
        /* null when the values that differ are all Inf or NaN on a side */
        json_object_set_new(mx, "abs", da.have_max ? cli_json_real(da.max_abs) : da.deq_diff ? json_null() : json_real(0.0));
        if (da.have_max) {
            json_object_set_new(mx, "row", json_integer((json_int_t)da.max_row));
            json_object_set_new(mx, "col", json_integer((json_int_t)da.max_col));
            json_object_set_new(mx, "x", cli_json_real(da.max_x));
            json_object_set_new(mx, "a", cli_json_real(da.max_d1));
            json_object_set_new(mx, "b", cli_json_real(da.max_d2));
        }
        json_object_set_new(d, "max_dequant_diff", mx);
        json_object_set_new(d, "first_differences", pos_json(da.pos, da.npos));
        json_object_set_new(d, "first_rounding_only_differences", pos_json(da.rpos, da.nrpos));
        json_object_set_new(d, "first_code_only_differences", pos_json(da.cpos, da.ncpos));
        json_object_set_new(j, "diff", d);
    }
    json_t *o = json_object();
    if (jb->out_h5) json_object_set_new(o, "h5", json_string(jb->out_h5));
    if (jb->codes) json_object_set_new(o, "codes", json_string(jb->codes));
    if (jb->scales) json_object_set_new(o, "scales", json_string(jb->scales));
    if (jb->dequant) json_object_set_new(o, "dequant", json_string(jb->dequant));
    json_object_set_new(j, "outputs", o);
    return cli_json_print(j);
}

int report_text(const job *jb)
{
    const run_t r1 = jb->r1, r2 = jb->r2;
    const diffacc da = jb->da;
    const bool diff = jb->diff;
    const fp4s_format fmt = r1.spec.format;
    const size_t blk = r1.spec.block, cols = jb->cols, pcols = jb->pcols;
    char a[256], b[128];
    const char *pn1 = r1.spec.profile, *pn2 = diff ? r2.spec.profile : NULL;
    if (diff)
        printf("fp4-quant: %s through two %s profiles, %s vs %s\n", jb->input, fp4s_format_name(fmt), pn1, pn2);
    else
        printf("fp4-quant: %s as %s, profile %s\n", jb->input, fp4s_format_name(fmt), pn1);
    print_row("shape", jb->shape, NULL);
    print_row("stored dtype", fp4s_dtype_name(jb->in_dt), NULL);
    if (pcols != cols) {
        snprintf(a, sizeof a, "%zu zero columns added (last dim %zu -> %zu)", pcols - cols, cols, pcols);
        print_row("padding", a, NULL);
    }
    if (fmt == FP4S_FP8)
        snprintf(a, sizeof a, "%llu scale tiles (%s)", (unsigned long long)r1.st.blocks, fp4s_fp8_gran_name(r1.spec.fp8_gran));
    else
        snprintf(a, sizeof a, "%llu blocks of %zu", (unsigned long long)r1.st.blocks, blk);
    print_row("blocks", a, NULL);
    snprintf(a, sizeof a, "%.9g", (double)r1.ts.amax);
    if (needs_amax(&r1.spec) || (diff && needs_amax(&r2.spec))) print_row("tensor amax", a, NULL);
    snprintf(a, sizeof a, "%llu (NaN %llu, Inf %llu) in %llu blocks", (unsigned long long)r1.st.nonfinite,
             (unsigned long long)r1.st.nan, (unsigned long long)r1.st.inf, (unsigned long long)r1.st.nonfinite_blocks);
    print_row("non-finite inputs", a, NULL);
    printf("\n");
    if (diff) print_row("", pn1, pn2);
    else print_row("rules", "", NULL);
    rules_rows(&r1.spec, diff ? &r2.spec : NULL);
    stats_rows(&r1, diff ? &r2 : NULL);
    if (diff) {
        printf("\n  where they disagree\n");
        if (da.scale_layouts_differ) {
            snprintf(a, sizeof a, "not comparable (%s vs %s tiles)", fp4s_fp8_gran_name(r1.spec.fp8_gran),
                     fp4s_fp8_gran_name(r2.spec.fp8_gran));
            print_row("scales differing", a, NULL);
        } else {
            print_row(fmt == FP4S_FP8 ? "scales differing" : "scale codes differing",
                      fmt_count(a, sizeof a, da.scales_diff, da.scales_total), NULL);
            snprintf(b, sizeof b, "of %llu %s", (unsigned long long)da.scales_total, fmt == FP4S_FP8 ? "tiles" : "blocks");
            printf("  %-28s %s\n", "", b);
            if (da.have_scale_first) {
                snprintf(b, sizeof b, "first at row %llu, block %llu (cols %llu..%llu)",
                         (unsigned long long)da.scale_first_row, (unsigned long long)da.scale_first_blk,
                         (unsigned long long)(da.scale_first_blk * blk),
                         (unsigned long long)(da.scale_first_blk * blk + blk - 1));
                printf("  %-28s %s\n", "", b);
            }
        }
        print_row("element codes differing", fmt_count(a, sizeof a, da.elems_diff, da.elems_total), NULL);
        snprintf(b, sizeof b, "of %llu elements", (unsigned long long)da.elems_total);
        printf("  %-28s %s\n", "", b);
        print_row("dequantized values differ", fmt_count(a, sizeof a, da.deq_diff, da.elems_total), NULL);
        if (da.deq_rounding) {
            snprintf(b, sizeof b, "%llu of them only in the last bits: same code and scale,",
                     (unsigned long long)da.deq_rounding);
            printf("  %-28s %s\n", "", b);
            printf("  %-28s %s\n", "", "the profiles multiply in another float order");
        }
        if (da.nan_mismatch) print_row("NaN in one only", fmt_count(a, sizeof a, da.nan_mismatch, da.elems_total), NULL);
        if (da.have_max) {
            snprintf(a, sizeof a, "%.6g at (row %zu, col %zu)", da.max_abs, da.max_row, da.max_col);
            print_row("largest |dequant diff|", a, NULL);
            snprintf(a, sizeof a, "x = %.6g: %s gives %.6g, %s gives %.6g", (double)da.max_x, pn1, (double)da.max_d1,
                     pn2, (double)da.max_d2);
            printf("  %-28s %s\n", "", a);
        } else if (da.deq_diff == 0) {
            print_row("largest |dequant diff|", "0 (identical dequantized values)", NULL);
        } else {
            print_row("largest |dequant diff|", "none between two finite values:", NULL);
            snprintf(b, sizeof b, "the %llu that differ are Inf or NaN on a side", (unsigned long long)da.deq_diff);
            printf("  %-28s %s\n", "", b);
        }
        printf("\n  (code: %s)\n", fmt == FP4S_FP8 ? "the E4M3 byte" : "E2M1 0..15, sign in bit 3");
        for (int pass = 0; pass < 3; pass++) {
            const diffpos *pos = pass == 0 ? da.pos : pass == 1 ? da.cpos : da.rpos;
            size_t np = pass == 0 ? da.npos : pass == 1 ? da.ncpos : da.nrpos;
            /* the later lists only while the first leaves room */
            if (!np || (pass && da.npos >= da.show)) continue;
            if (pass == 2 && da.ncpos) continue;
            if (pass == 0)
                printf("  first elements whose values differ through their code or scale\n");
            else if (pass == 1)
                printf("  first elements with different codes but the same value (their scales differ too)\n");
            else
                printf("  first elements whose values differ only in the last bits\n");
            char h1[48], h2[48];
            snprintf(h1, sizeof h1, "%s code value", pn1);
            snprintf(h2, sizeof h2, "%s code value", pn2);
            printf("  %6s %6s %13s  %20s  %20s %12s\n", "row", "col", "x", h1, h2, "difference");
            for (size_t i = 0; i < np; i++) {
                char c1[8], c2[8];
                double dd = (double)pos[i].d1 - (double)pos[i].d2;
                printf("  %6zu %6zu %13.7g  %6s %13.7g  %6s %13.7g %12.6g\n", pos[i].row, pos[i].col,
                       (double)pos[i].x, code_str(&r1.spec, pos[i].c1, c1, sizeof c1), (double)pos[i].d1,
                       code_str(&r2.spec, pos[i].c2, c2, sizeof c2), (double)pos[i].d2, dd);
            }
        }
        if (!da.scale_layouts_differ && da.scales_diff == 0 && da.elems_diff == 0 && da.deq_diff == 0)
            printf("\n  in short: %s and %s agree on every %s and element code of this tensor", pn1, pn2,
                   fmt == FP4S_FP8 ? "tile scale" : "block scale");
        else if (da.scale_layouts_differ)
            printf("\n  in short: %s and %s differ in %.4g%% of the dequantized values", pn1, pn2,
                   pct(da.deq_diff - da.deq_rounding, da.elems_total));
        else
            printf("\n  in short: %s and %s differ in %.4g%% of the %s and %.4g%% of the dequantized values",
                   pn1, pn2, pct(da.scales_diff, da.scales_total), fmt == FP4S_FP8 ? "tile scales" : "block scales",
                   pct(da.deq_diff - da.deq_rounding, da.elems_total));
        if (da.have_max) printf(" (by up to %.6g)", da.max_abs);
        if (da.deq_rounding)
            printf(",\n  plus %.4g%% only in the last bits", pct(da.deq_rounding, da.elems_total));
        printf(";\n  relative error %.6g vs %.6g\n", rel_err(&r1.st), rel_err(&r2.st));
    }
    if (jb->ndone) {
        printf("\n");
        for (int i = 0; i < jb->ndone; i++) print_row(i ? "" : "written", jb->done[i], NULL);
    }
    return cli_stdout_flush();
}
