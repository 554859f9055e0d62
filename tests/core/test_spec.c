/* Spec and profile tests: every profile fills every field consistently, the
 * table documents each, the rule and recipe trait tables are complete, every
 * name list comes from the tables, unknown names and undefined formats are
 * rejected, describe names every rule, parse/name helpers round-trip. */
#include "../check_main.h"
#include <stdio.h>
#include <string.h>

#include <fp4scope/spec.h>

static const fp4s_format fmts[3] = {FP4S_MXFP4, FP4S_NVFP4, FP4S_FP8};

START_TEST(profile_list_documents_every_profile)
{
    const fp4s_profile_info *p;
    size_t n = 0;
    static const char *required[] = {"ocp", "ceil", "torchao", "torchao-rceil", "te", "modelopt",
                                     "ggml", "microxcaling", "fp8-tensor", "fp8-1x128", "fp8-128x128",
                                     "even", "vllm", "te-2d", "vllm@pre-43557", "sglang", "flashinfer",
                                     "flashinfer-exact", "trtllm", "trtllm-exact", "aiter", "aiter@pre-3212",
                                     "quark", "brevitas-ceil"};
    for (; (p = fp4s_profile_at(n)); n++) {
        ck_assert_msg(p->name && *p->name, "profile %zu: no name", n);
        ck_assert_msg(p->reproduces && strlen(p->reproduces) > 20, "%s: reproduces text", p->name);
        ck_assert_msg(p->engine && strlen(p->engine) > 2, "%s: engine", p->name);
        ck_assert_msg(p->version && p->source, "%s: version / source", p->name);
        /* "cuda sm_90": the GPU architecture the arithmetic was measured on */
        ck_assert_msg(p->device && (!strcmp(p->device, "any") || !strcmp(p->device, "cpu") ||
                                    !strcmp(p->device, "cuda") || !strcmp(p->device, "cuda sm_90") ||
                                    !strcmp(p->device, "cuda sm_100") ||
                                    !strcmp(p->device, "rocm")), "%s: device '%s'", p->name, p->device);
        ck_assert_msg(p->formats != 0, "%s: no format", p->name);
        ck_assert_ptr_eq(fp4s_profile_find(p->name), p);
        if (p->alias_of) ck_assert_msg(fp4s_profile_find(p->alias_of), "%s: alias of nothing", p->name);
        for (size_t j = 0; j < n; j++) ck_assert_str_ne(fp4s_profile_at(j)->name, p->name);
    }
    ck_assert_uint_eq(n, fp4s_profile_count());
    ck_assert_ptr_null(fp4s_profile_at(n));
    ck_assert_ptr_null(fp4s_profile_find("nope"));
    ck_assert_ptr_null(fp4s_profile_find(NULL));
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        ck_assert_msg(fp4s_profile_find(required[i]), "missing profile %s", required[i]);
    ck_assert_uint_ge(n, 14);
}
END_TEST

START_TEST(every_profile_fills_a_valid_spec)
{
    const fp4s_profile_info *p;
    for (size_t i = 0; (p = fp4s_profile_at(i)); i++)
        for (int f = 0; f < 3; f++) {
            fp4s_spec s;
            memset(&s, 0xAB, sizeof s); /* garbage: the profile must overwrite every field */
            int rc = fp4s_spec_profile(&s, fmts[f], p->name);
            if (!(p->formats & (1u << fmts[f]))) {
                ck_assert_int_eq(rc, FP4S_ENOTSUP);
                continue;
            }
            ck_assert_msg(rc == 0, "%s/%s", p->name, fp4s_format_name(fmts[f]));
            ck_assert_int_eq(fp4s_spec_check(&s), 0);
            ck_assert_str_eq(s.profile, p->name);
            ck_assert_int_eq(s.format, fmts[f]);
            /* 92: aiter's and Brevitas' amax floor 1e-10 gives all-zero blocks code 92 */
            ck_assert(s.mx_zero_block_code == 0 || s.mx_zero_block_code == 127 || s.mx_zero_block_code == 92);
            ck_assert(s.keep_neg_zero == true || s.keep_neg_zero == false);
            ck_assert(s.mx_scale_is_ggml == true || s.mx_scale_is_ggml == false);
            ck_assert(s.tile2d == true || s.tile2d == false);
            for (size_t k = 0; k < sizeof s.reserved / sizeof s.reserved[0]; k++) ck_assert_uint_eq(s.reserved[k], 0);
            /* the convention the recipe's engine records (a per-token kernel may record the other one:
             * FlashInfer's returns the decode scale of each row) */
            if (fmts[f] == FP4S_NVFP4 && s.nv_scope == FP4S_SCOPE_TENSOR)
                ck_assert_int_eq(s.global_scale, fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale);
        }
    /* an alias fills the same spec as its target */
    fp4s_spec a, b;
    ck_assert_int_eq(fp4s_spec_profile(&a, FP4S_FP8, "deepseek"), 0);
    ck_assert_int_eq(fp4s_spec_profile(&b, FP4S_FP8, "fp8-1x128"), 0);
    memset(a.profile, 0, sizeof a.profile);
    memset(b.profile, 0, sizeof b.profile);
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    ck_assert_uint_eq(fp4s_spec_size(), sizeof(fp4s_spec));
}
END_TEST

/* The rule and recipe tables: one complete row per enum value, unique names
 * (aliases included), the reference in every row, consistent NVFP4 traits. */
START_TEST(trait_tables_are_complete)
{
    char seen[64][32];
    int nseen = 0;
    for (int r = 0; r < FP4S_MX_RULE_COUNT; r++) {
        const fp4s_mx_rule_traits *t = fp4s_get_mx_rule_traits((fp4s_mx_rule)r);
        ck_assert_ptr_nonnull(t);
        ck_assert_msg(t->name && *t->name && t->aliases && t->rule && strlen(t->rule) > 10 && t->used_by,
                      "mx rule %d: incomplete row", r);
        ck_assert_msg(t->kernels & FP4S_KERNEL_REF, "%s: no reference", t->name);
        ck_assert_str_eq(fp4s_mx_rule_name((fp4s_mx_rule)r), t->name);
        for (int j = 0; j < nseen; j++) ck_assert_str_ne(seen[j], t->name);
        snprintf(seen[nseen++], sizeof seen[0], "%s", t->name);
    }
    ck_assert_ptr_null(fp4s_get_mx_rule_traits(FP4S_MX_RULE_COUNT));
    ck_assert_ptr_null(fp4s_get_mx_rule_traits((fp4s_mx_rule)-1));
    nseen = 0;
    for (int r = 0; r < FP4S_NV_RECIPE_COUNT; r++) {
        const fp4s_nv_recipe_traits *t = fp4s_get_nv_recipe_traits((fp4s_nv_recipe)r);
        ck_assert_ptr_nonnull(t);
        ck_assert_msg(t->name && *t->name && t->aliases && t->recipe && strlen(t->recipe) > 10 && t->used_by,
                      "nv recipe %d: incomplete row", r);
        ck_assert_msg(t->kernels & FP4S_KERNEL_REF, "%s: no reference", t->name);
        ck_assert_uint_lt(t->tscale, FP4S_NV_TS_COUNT);
        ck_assert_uint_lt(t->elem, FP4S_NV_ELEM_COUNT);
        ck_assert_uint_lt(t->dequant, FP4S_NV_DQ_COUNT);
        ck_assert_uint_lt(t->scale_codec, FP4S_NV_SC_COUNT);
        ck_assert_msg(t->ties != 0 && t->ties < (1u << FP4S_TIE_COUNT), "%s: ties", t->name);
        /* no tensor scale <-> nothing recorded as one */
        ck_assert((t->tscale == FP4S_NV_TS_NONE) == (t->global_scale == FP4S_GS_NONE));
        ck_assert_str_eq(fp4s_nv_recipe_name((fp4s_nv_recipe)r), t->name);
        for (int j = 0; j < nseen; j++) ck_assert_str_ne(seen[j], t->name);
        snprintf(seen[nseen++], sizeof seen[0], "%s", t->name);
    }
    ck_assert_ptr_null(fp4s_get_nv_recipe_traits(FP4S_NV_RECIPE_COUNT));
    /* the recipe's traits gate the spec: ggml takes rtz only and no 2-D tiles */
    fp4s_spec s;
    fp4s_spec_profile(&s, FP4S_NVFP4, "ggml");
    s.tie = FP4S_TIE_EVEN;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    ck_assert_msg(strstr(fp4s_last_error(), "ggml") && strstr(fp4s_last_error(), "rne") &&
                  strstr(fp4s_last_error(), "rtz"), "%s", fp4s_last_error());
    s.tie = FP4S_TIE_ZERO;
    ck_assert_int_eq(fp4s_spec_check(&s), 0);
    /* its scale codec has no NaN code: no NaN blocks */
    for (int nf = 0; nf < FP4S_NF_COUNT; nf++) {
        s.nonfinite = (fp4s_nonfinite)nf;
        bool nan_block = nf == FP4S_NF_SCALE_NAN || nf == FP4S_NF_BLOCK_NAN;
        ck_assert_int_eq(fp4s_spec_check(&s), (nan_block ? FP4S_ENOTSUP : 0));
        if (nan_block)
            ck_assert_msg(strstr(fp4s_last_error(), fp4s_nonfinite_name(s.nonfinite)) &&
                          strstr(fp4s_last_error(), "ue4m3-ggml") && strstr(fp4s_last_error(), "ignore"),
                          "%s", fp4s_last_error());
    }
    s.nonfinite = FP4S_NF_IGNORE;
    s.tile2d = true;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    fp4s_spec_profile(&s, FP4S_NVFP4, "te");
    s.nv_recipe = FP4S_NV_RECIPE_COUNT;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
}
END_TEST

/* Every name list is generated from the tables: all of them, aliases shown,
 * "or" before the last, and each name parses back to its value. */
START_TEST(name_lists_come_from_the_tables)
{
    char buf[1024];
    size_t n = fp4s_names(FP4S_NAMES_MX_RULE, ", ", " or ", buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "floor, ceil (rceil), even, log2f, rtn, ceil-log2f, rceil-mul, even-nan, rceil-rcp-ftz, "
                          "floor-rcp, rceil-min, round-min, even-sat or ceil-log2f-min");
    fp4s_names(FP4S_NAMES_FORMAT, ", ", " or ", buf, sizeof buf);
    ck_assert_str_eq(buf, "mxfp4, nvfp4 or fp8");
    fp4s_names(FP4S_NAMES_NV_RECIPE, "|", NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "te|torchao-div|modelopt|ggml|torchao (torchao-rcp)|torchao-cuda|torchao-div-cuda|"
                          "flashinfer (trtllm)|flashinfer-exact (trtllm-exact)|vllm (sglang)|te-4over6 (4over6)|te-sdiv|te-sdiv0|"
                     "te-bf16|flashinfer-4over6 (trtllm-4over6)|flashinfer-4over6-exact (trtllm-4over6-exact)");
    fp4s_names(FP4S_NAMES_PACKING, ", ", NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "pairs, split");
    fp4s_names(FP4S_NAMES_PROFILE_FP8, ", ", NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "fp8-tensor, fp8-1x128, fp8-128x128, deepseek");
    /* the MXFP4 profiles are exactly those that define MXFP4 */
    fp4s_names(FP4S_NAMES_PROFILE_MXFP4, "\n", NULL, buf, sizeof buf);
    const fp4s_profile_info *p;
    for (size_t i = 0; (p = fp4s_profile_at(i)); i++) {
        char line[64];
        snprintf(line, sizeof line, "%s", p->name);
        bool listed = false;
        for (char *t = buf; t && *t; t = strchr(t, '\n') ? strchr(t, '\n') + 1 : NULL)
            listed |= !strncmp(t, line, strlen(line)) && (t[strlen(line)] == '\n' || !t[strlen(line)]);
        ck_assert_msg(listed == !!(p->formats & (1u << FP4S_MXFP4)), "%s", p->name);
    }
    /* truncation: the length needed, a terminated prefix */
    char small[10];
    n = fp4s_names(FP4S_NAMES_MX_RULE, ", ", " or ", small, sizeof small);
    ck_assert_uint_eq(n, strlen("floor, ceil (rceil), even, log2f, rtn, ceil-log2f, rceil-mul, even-nan, "
                                "rceil-rcp-ftz, floor-rcp, rceil-min, round-min, even-sat or ceil-log2f-min"));
    ck_assert_str_eq(small, "floor, ce");
    /* each name (and alias) of each kind parses back */
    for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_MX_RULE, fp4s_mx_rule_name((fp4s_mx_rule)r)), r);
    for (int r = 0; r < FP4S_NV_RECIPE_COUNT; r++) {
        fp4s_nv_recipe o;
        ck_assert_int_eq(fp4s_nv_recipe_parse(fp4s_nv_recipe_name((fp4s_nv_recipe)r), &o), 0);
        ck_assert_int_eq(o, r);
    }
    for (int t = 0; t < FP4S_TIE_COUNT; t++) ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_TIE, fp4s_tie_name((fp4s_tie)t)), t);
    for (int g = 0; g < FP4S_GS_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_GLOBAL_SCALE, fp4s_global_scale_name((fp4s_global_scale)g)), g);
    for (int g = 0; g < FP4S_NF_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_NONFINITE, fp4s_nonfinite_name((fp4s_nonfinite)g)), g);
    for (int g = 0; g < FP4S_PACK_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_PACKING, fp4s_packing_name((fp4s_packing)g)), g);
    for (int g = 0; g < FP4S_FP8_GRAN_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_FP8_GRAN, fp4s_fp8_gran_name((fp4s_fp8_gran)g)), g);
    for (int g = 0; g < FP4S_ZIN_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_ZERO_IN, fp4s_zero_in_name((fp4s_zero_in)g)), g);
    for (int g = 0; g < FP4S_TAMAX_COUNT; g++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_TENSOR_AMAX, fp4s_tensor_amax_name((fp4s_tensor_amax)g)), g);
    ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_NV_RECIPE, "torchao-rcp"), FP4S_NV_TORCHAO_RCP);
    for (size_t i = 0; (p = fp4s_profile_at(i)); i++)
        ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_PROFILE, p->name), (int)i);
    fp4s_tie t;
    ck_assert_int_eq(fp4s_tie_parse("away", &t), 0);
    ck_assert_int_eq(t, FP4S_TIE_AWAY);
    ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_PROFILE_NVFP4, "ocp"), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_NONFINITE, "nan"), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_last_error(), "non-finite policy 'nan': expected scale-nan, block-nan, ignore or cvt");
    ck_assert_int_eq(fp4s_name_index(FP4S_NAMES_COUNT, "x"), FP4S_EINVAL);
}
END_TEST

/* An enum field of fp4s_spec a profile sets, by offset and name. */
#define SPEC_ENUM(f) offsetof(fp4s_spec, f), #f
#define SPEC_ENUM_IS_INT(f) _Static_assert(sizeof(((fp4s_spec *)0)->f) == sizeof(int), #f " is not an int");
SPEC_ENUM_IS_INT(fp8_gran)
SPEC_ENUM_IS_INT(global_scale)
SPEC_ENUM_IS_INT(mx_rule)
SPEC_ENUM_IS_INT(nonfinite)
SPEC_ENUM_IS_INT(nv_recipe)
SPEC_ENUM_IS_INT(packing)
SPEC_ENUM_IS_INT(tensor_amax)
SPEC_ENUM_IS_INT(tie)
SPEC_ENUM_IS_INT(zero_in)

START_TEST(profiles_set_the_documented_rules)
{
    static const struct {
        fp4s_format format;
        const char *profile;
        size_t offset;
        const char *field;
        int want;
    } rules[] = {
        {FP4S_MXFP4, "ocp", SPEC_ENUM(mx_rule), FP4S_MX_FLOOR},
        {FP4S_MXFP4, "ocp", SPEC_ENUM(tie), FP4S_TIE_EVEN},
        {FP4S_MXFP4, "ocp", SPEC_ENUM(packing), FP4S_PACK_PAIRS},
        {FP4S_MXFP4, "ceil", SPEC_ENUM(mx_rule), FP4S_MX_CEIL},
        {FP4S_MXFP4, "torchao-rceil@0.18", SPEC_ENUM(mx_rule), FP4S_MX_CEIL},
        {FP4S_MXFP4, "vllm", SPEC_ENUM(mx_rule), FP4S_MX_EVEN},
        {FP4S_MXFP4, "ggml", SPEC_ENUM(mx_rule), FP4S_MX_LOG2F},
        {FP4S_MXFP4, "ggml", SPEC_ENUM(tie), FP4S_TIE_ZERO},
        {FP4S_MXFP4, "ggml", SPEC_ENUM(packing), FP4S_PACK_SPLIT},
        {FP4S_MXFP4, "ggml", SPEC_ENUM(nonfinite), FP4S_NF_IGNORE},
        {FP4S_MXFP4, "microxcaling", SPEC_ENUM(tie), FP4S_TIE_AWAY},
        {FP4S_MXFP4, "microxcaling", SPEC_ENUM(nonfinite), FP4S_NF_BLOCK_NAN},
        {FP4S_MXFP4, "modelopt", SPEC_ENUM(mx_rule), FP4S_MX_CEIL_LOG2F},
        {FP4S_MXFP4, "modelopt", SPEC_ENUM(tie), FP4S_TIE_ZERO},
        {FP4S_MXFP4, "modelopt", SPEC_ENUM(zero_in), FP4S_ZIN_NEG},
        {FP4S_NVFP4, "te", SPEC_ENUM(nv_recipe), FP4S_NV_TE},
        {FP4S_NVFP4, "te", SPEC_ENUM(global_scale), FP4S_GS_ENCODE},
        {FP4S_NVFP4, "te", SPEC_ENUM(tensor_amax), FP4S_TAMAX_ALL},
        {FP4S_NVFP4, "torchao", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_RCP},
        {FP4S_NVFP4, "torchao", SPEC_ENUM(global_scale), FP4S_GS_DECODE},
        {FP4S_NVFP4, "torchao", SPEC_ENUM(tensor_amax), FP4S_TAMAX_ALL},
        /* torchao's versions and devices */
        {FP4S_NVFP4, "torchao@0.18", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_RCP},
        {FP4S_NVFP4, "torchao@0.16", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_DIV},
        {FP4S_NVFP4, "torchao-cuda", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_CUDA},
        {FP4S_NVFP4, "torchao-cuda@0.18", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_CUDA},
        {FP4S_NVFP4, "torchao-cuda@0.16", SPEC_ENUM(nv_recipe), FP4S_NV_TORCHAO_DIV_CUDA},
        {FP4S_MXFP4, "torchao", SPEC_ENUM(mx_rule), FP4S_MX_FLOOR},
        {FP4S_MXFP4, "torchao", SPEC_ENUM(nonfinite), FP4S_NF_BLOCK_NAN},
        {FP4S_MXFP4, "torchao@0.18", SPEC_ENUM(mx_rule), FP4S_MX_FLOOR},
        {FP4S_MXFP4, "torchao@0.18", SPEC_ENUM(nonfinite), FP4S_NF_SCALE_NAN},
        {FP4S_MXFP4, "torchao-rceil", SPEC_ENUM(mx_rule), FP4S_MX_RCEIL_MUL},
        {FP4S_MXFP4, "torchao-rceil", SPEC_ENUM(nonfinite), FP4S_NF_BLOCK_NAN},
        {FP4S_MXFP4, "even", SPEC_ENUM(mx_rule), FP4S_MX_EVEN_NAN},
        {FP4S_MXFP4, "even", SPEC_ENUM(nonfinite), FP4S_NF_BLOCK_NAN},
        {FP4S_MXFP4, "even@0.18", SPEC_ENUM(mx_rule), FP4S_MX_EVEN},
        {FP4S_MXFP4, "even@0.18", SPEC_ENUM(nonfinite), FP4S_NF_SCALE_NAN},
        {FP4S_NVFP4, "vllm", SPEC_ENUM(tensor_amax), FP4S_TAMAX_FINITE},
        {FP4S_NVFP4, "modelopt", SPEC_ENUM(nv_recipe), FP4S_NV_MODELOPT},
        {FP4S_NVFP4, "ggml", SPEC_ENUM(nv_recipe), FP4S_NV_GGML},
        {FP4S_NVFP4, "ggml", SPEC_ENUM(global_scale), FP4S_GS_NONE},
        {FP4S_FP8, "fp8-128x128", SPEC_ENUM(fp8_gran), FP4S_FP8_128x128},
        {FP4S_FP8, "fp8-tensor", SPEC_ENUM(fp8_gran), FP4S_FP8_TENSOR},
    };
    fp4s_spec s;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        ck_assert_int_eq(fp4s_spec_profile(&s, rules[i].format, rules[i].profile), 0);
        int got;
        memcpy(&got, (const char *)&s + rules[i].offset, sizeof got);
        ck_assert_msg(got == rules[i].want, "%s: %s is %d, expected %d", rules[i].profile, rules[i].field, got,
                      rules[i].want);
    }
    /* the other fields */
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    ck_assert_int_eq(s.block, 32);
    fp4s_spec_profile(&s, FP4S_MXFP4, "ggml");
    ck_assert(!s.keep_neg_zero);
    ck_assert(s.mx_scale_is_ggml);
    fp4s_spec_profile(&s, FP4S_NVFP4, "te");
    ck_assert(!s.tile2d);
    ck_assert_int_eq(s.block, 16);
    fp4s_spec_profile(&s, FP4S_NVFP4, "te-2d");
    ck_assert(s.tile2d);
    ck_assert_uint_eq(fp4s_spec_row_align(&s), 16);
    fp4s_spec_profile(&s, FP4S_FP8, "fp8-128x128");
    ck_assert_uint_eq(fp4s_spec_row_align(&s), 128);
    ck_assert_uint_eq(fp4s_spec_blocks_per_row(&s, 512), 4);
    fp4s_spec_profile(&s, FP4S_FP8, NULL);
    ck_assert_str_eq(s.profile, "fp8-1x128");
    fp4s_spec_profile(&s, FP4S_NVFP4, "");
    ck_assert_str_eq(s.profile, "te");
}
END_TEST

START_TEST(unknown_profile_and_undefined_format_rejected)
{
    fp4s_spec s;
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_MXFP4, "nope"), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "nope") && strstr(fp4s_last_error(), "ocp"));
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_NVFP4, "ocp"), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_NVFP4, "microxcaling"), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_FP8, "te"), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_MXFP4, "fp8-1x128"), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_spec_profile(NULL, FP4S_MXFP4, "ocp"), FP4S_EINVAL);
}
END_TEST

START_TEST(spec_check_rejects_bad_combinations)
{
    fp4s_spec s;
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    s.block = 16;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    s.mx_zero_block_code = 0xFF;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    s.tile2d = true;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    s.mx_rule = FP4S_MX_RULE_COUNT;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
    fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
    s.mx_elem = FP4S_MX_ELEM_COUNT;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
    fp4s_spec_profile(&s, FP4S_NVFP4, "ggml");
    s.tile2d = true;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    fp4s_spec_profile(&s, FP4S_FP8, "fp8-tensor");
    s.block = 128;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_ENOTSUP);
    s.format = (fp4s_format)0;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
}
END_TEST

START_TEST(describe_names_every_rule)
{
    char buf[600];
    fp4s_spec s;
    fp4s_spec_profile(&s, FP4S_MXFP4, "ggml");
    size_t n = fp4s_spec_describe(&s, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    static const char *mx_keys[] = {"format=mxfp4", "profile=ggml", "block=32", "scale_rule=log2f",
                                    "zero_block_code=0", "scale_byte=ggml", "round=rtz", "neg_zero=drop",
                                    "zero_input=", "packing=split", "nonfinite=ignore"};
    for (size_t i = 0; i < sizeof mx_keys / sizeof mx_keys[0]; i++)
        ck_assert_msg(strstr(buf, mx_keys[i]), "%s missing in %s", mx_keys[i], buf);
    fp4s_spec_profile(&s, FP4S_NVFP4, "te-2d");
    fp4s_spec_describe(&s, buf, sizeof buf);
    static const char *nv_keys[] = {"format=nvfp4", "recipe=te", "global_scale=encode", "tiles=16x16",
                                    "round=rne", "neg_zero=keep", "packing=pairs", "nonfinite=scale-nan",
                                    "tensor_amax=all"};
    for (size_t i = 0; i < sizeof nv_keys / sizeof nv_keys[0]; i++)
        ck_assert_msg(strstr(buf, nv_keys[i]), "%s missing in %s", nv_keys[i], buf);
    fp4s_spec_profile(&s, FP4S_FP8, "fp8-128x128");
    fp4s_spec_describe(&s, buf, sizeof buf);
    ck_assert(strstr(buf, "granularity=128x128"));
    /* truncation: returns the needed length */
    char small[8];
    size_t need = fp4s_spec_describe(&s, small, sizeof small);
    ck_assert_uint_gt(need, 8);
    ck_assert_uint_eq(strlen(small), 7);
}
END_TEST

START_TEST(parse_and_name_helpers_round_trip)
{
    for (int r = 0; r < FP4S_MX_RULE_COUNT; r++) {
        fp4s_mx_rule o;
        ck_assert_int_eq(fp4s_mx_rule_parse(fp4s_mx_rule_name((fp4s_mx_rule)r), &o), 0);
        ck_assert_int_eq(o, r);
    }
    fp4s_mx_rule o;
    ck_assert_int_eq(fp4s_mx_rule_parse("rceil", &o), 0);
    ck_assert_int_eq(o, FP4S_MX_CEIL);
    ck_assert_int_eq(fp4s_mx_rule_parse("round", &o), FP4S_EINVAL);
    /* the error lists every rule, ceil-log2f and the rceil alias included */
    ck_assert_str_eq(fp4s_last_error(), "scale rule 'round': expected floor, ceil (rceil), even, log2f, rtn, "
                                        "ceil-log2f, rceil-mul, even-nan, rceil-rcp-ftz, floor-rcp, rceil-min, "
                                        "round-min, even-sat or ceil-log2f-min");
    for (int f = 0; f < 3; f++) {
        fp4s_format g;
        ck_assert_int_eq(fp4s_format_parse(fp4s_format_name(fmts[f]), &g), 0);
        ck_assert_int_eq(g, fmts[f]);
    }
    fp4s_format g;
    ck_assert_int_eq(fp4s_format_parse("int4", &g), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_default_profile(FP4S_MXFP4), "ocp");
    ck_assert_str_eq(fp4s_default_profile(FP4S_NVFP4), "te");
    ck_assert_str_eq(fp4s_nonfinite_name(FP4S_NF_BLOCK_NAN), "block-nan");
    ck_assert_str_eq(fp4s_packing_name(FP4S_PACK_SPLIT), "split");
    ck_assert_str_eq(fp4s_global_scale_name(FP4S_GS_DECODE), "decode");
    ck_assert_str_eq(fp4s_nv_recipe_name(FP4S_NV_MODELOPT), "modelopt");
    ck_assert_str_eq(fp4s_fp8_gran_name(FP4S_FP8_1x128), "1x128");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec");
    const check_case cases[] = {
        CHECK_CASE(profile_list_documents_every_profile),
        CHECK_CASE(every_profile_fills_a_valid_spec),
        CHECK_CASE(trait_tables_are_complete),
        CHECK_CASE(name_lists_come_from_the_tables),
        CHECK_CASE(profiles_set_the_documented_rules),
        CHECK_CASE(unknown_profile_and_undefined_format_rejected),
        CHECK_CASE(spec_check_rejects_bad_combinations),
        CHECK_CASE(describe_names_every_rule),
        CHECK_CASE(parse_and_name_helpers_round_trip),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return check_run(s, CK_ENV);
}
