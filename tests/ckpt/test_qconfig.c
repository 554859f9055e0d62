/* Unit tests of the quantization configs (lib/io/qconfig.c): each method's
 * exclude rule as vLLM applies it (fp4-ckpt(1) names the source). */
#include <fp4scope/ckpt.h>

#include "../check_main.h"

static void setup(void) { check_dir_make("fp4s_qcfg_"); }
static void teardown(void) { check_dir_remove(); }

static fp4s_qconfig *cfg(const char *json)
{
    const char *p = check_path("config.json");
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(json, f);
    fclose(f);
    fp4s_qconfig *q = NULL;
    ck_assert_msg(fp4s_qconfig_open(p, &q) == 0, "%s", fp4s_last_error());
    return q;
}

static int ex(fp4s_qconfig *q, const char *m, const char *const *mods, size_t n, size_t *entry)
{
    return fp4s_qconfig_excludes(q, m, mods, n, entry);
}

START_TEST(engine_names_fuse_as_vllm)
{
    char b[256];
    fp4s_qconfig_engine_name("model.layers.0.self_attn.k_proj", b, sizeof b);
    ck_assert_str_eq(b, "model.layers.0.self_attn.qkv_proj");
    fp4s_qconfig_engine_name("model.layers.0.mlp.up_proj", b, sizeof b);
    ck_assert_str_eq(b, "model.layers.0.mlp.gate_up_proj");
    fp4s_qconfig_engine_name("model.layers.3.mlp.experts.17.down_proj", b, sizeof b);
    ck_assert_str_eq(b, "model.layers.3.mlp.experts");
    fp4s_qconfig_engine_name("lm_head", b, sizeof b);
    ck_assert_str_eq(b, "lm_head");
}
END_TEST

START_TEST(modelopt_exact_substring_fnmatch_experts)
{
    fp4s_qconfig *q = cfg("{\"quantization\": {\"quant_algo\": \"NVFP4\", \"group_size\": 16, \"exclude_modules\": "
                          "[\"lm_head\", \"model.layers.1.mlp.gate\", \"model.layers.2.*\", "
                          "\"model.layers.5.mlp.experts.3.down_proj\"]}}");
    ck_assert_int_eq(fp4s_qconfig_method_of(q), FP4S_QCFG_MODELOPT);
    ck_assert_str_eq(fp4s_qconfig_algo(q), "NVFP4");
    ck_assert(fp4s_qconfig_static_input(q) && !fp4s_qconfig_weight_only(q));
    const char *mods[] = {"lm_head", "model.layers.1.mlp.gate", "model.layers.1.mlp.gate_proj",
                          "model.layers.1.mlp.up_proj", "model.layers.2.self_attn.o_proj",
                          "model.layers.0.self_attn.q_proj", "model.layers.5.mlp.experts.0.gate_proj"};
    size_t n = sizeof mods / sizeof mods[0], e;
    ck_assert_int_eq(ex(q, "lm_head", mods, n, &e), 1);
    ck_assert_uint_eq(e, 0);
    ck_assert_int_eq(ex(q, "model.layers.1.mlp.gate", mods, n, &e), 1);
    ck_assert_uint_eq(e, 1);
    /* vLLM's legacy substring rule: "model.layers.1.mlp.gate" is in "...mlp.gate_up_proj" */
    ck_assert_int_eq(ex(q, "model.layers.1.mlp.gate_proj", mods, n, &e), 1);
    ck_assert_uint_eq(e, 1);
    ck_assert_int_eq(ex(q, "model.layers.2.self_attn.o_proj", mods, n, &e), 1);
    ck_assert_uint_eq(e, 2);
    ck_assert_int_eq(ex(q, "model.layers.0.self_attn.q_proj", mods, n, &e), 0);
    /* one expert named: the whole FusedMoE layer of that block is excluded, not another block's */
    ck_assert_int_eq(ex(q, "model.layers.5.mlp.experts.0.gate_proj", mods, n, &e), 1);
    ck_assert_uint_eq(e, 3);
    ck_assert_int_eq(ex(q, "model.layers.4.mlp.experts.0.gate_proj", mods, n, &e), 0);
    ck_assert(!fp4s_qconfig_exclude_is_pattern(q, 0) && fp4s_qconfig_exclude_is_pattern(q, 2));
    fp4s_qconfig_close(&q);
    ck_assert_ptr_null(q);
}
END_TEST

START_TEST(modelopt_fused_shards_must_agree)
{
    fp4s_qconfig *q = cfg("{\"quantization\": {\"quant_algo\": \"NVFP4\", \"exclude_modules\": "
                          "[\"model.layers.0.self_attn.q_proj\"]}}");
    const char *mods[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                          "model.layers.0.self_attn.v_proj"};
    size_t e;
    ck_assert_int_eq(ex(q, "model.layers.0.self_attn.k_proj", mods, 3, &e), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "some but not all shards of the fused layer "
                                                    "model.layers.0.self_attn.qkv_proj"));
    fp4s_qconfig_close(&q);
    q = cfg("{\"quantization\": {\"quant_algo\": \"W4A16_NVFP4\", \"exclude_modules\": "
            "[\"model.layers.0.self_attn.q_proj\", \"model.layers.0.self_attn.k_proj\", "
            "\"model.layers.0.self_attn.v_proj\"]}}");
    ck_assert(fp4s_qconfig_weight_only(q) && !fp4s_qconfig_static_input(q));
    ck_assert_int_eq(ex(q, "model.layers.0.self_attn.v_proj", mods, 3, &e), 1);
    fp4s_qconfig_close(&q);
}
END_TEST

START_TEST(config_json_modelopt_uses_ignore)
{
    fp4s_qconfig *q = cfg("{\"architectures\": [\"X\"], \"quantization_config\": {\"quant_method\": \"modelopt\", "
                          "\"quant_algo\": \"NVFP4\", \"ignore\": [\"lm_head\"]}}");
    ck_assert_str_eq(fp4s_qconfig_key(q), "quantization_config.ignore");
    ck_assert_int_eq(ex(q, "lm_head", NULL, 0, NULL), 1);
    fp4s_qconfig_close(&q);
}
END_TEST

START_TEST(compressed_tensors_exact_and_re)
{
    fp4s_qconfig *q = cfg("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
                          "\"format\": \"nvfp4-pack-quantized\", \"config_groups\": {\"group_0\": {\"targets\": "
                          "[\"Linear\"], \"input_activations\": {\"dynamic\": false, \"num_bits\": 4}}}, "
                          "\"ignore\": [\"lm_head\", \"re:.*mlp\\\\.gate$\", \"re:model\\\\.layers\\\\.\\\\d+\\\\.self_attn\\\\.o_proj\"]}}");
    ck_assert_int_eq(fp4s_qconfig_method_of(q), FP4S_QCFG_COMPRESSED_TENSORS);
    ck_assert(fp4s_qconfig_static_input(q));
    size_t e;
    ck_assert_int_eq(ex(q, "lm_head", NULL, 0, &e), 1);
    ck_assert_int_eq(ex(q, "model.layers.7.mlp.gate", NULL, 0, &e), 1);
    ck_assert_uint_eq(e, 1);
    /* no substring rule here: gate_proj is not the router */
    ck_assert_int_eq(ex(q, "model.layers.7.mlp.gate_proj", NULL, 0, &e), 0);
    ck_assert_int_eq(ex(q, "model.layers.12.self_attn.o_proj", NULL, 0, &e), 1);
    ck_assert_uint_eq(e, 2);
    /* re.match anchors at the start only */
    ck_assert_int_eq(ex(q, "x.model.layers.12.self_attn.o_proj", NULL, 0, &e), 0);
    ck_assert(fp4s_qconfig_entry_matches(q, 2, "model.layers.3.self_attn.o_proj"));
    fp4s_qconfig_close(&q);
}
END_TEST

START_TEST(mxfp4_quantizes_experts_only)
{
    fp4s_qconfig *q = cfg("{\"quantization_config\": {\"quant_method\": \"mxfp4\", \"modules_to_not_convert\": "
                          "[\"model.layers.*.self_attn\", \"lm_head\"]}}");
    size_t e;
    ck_assert_int_eq(ex(q, "model.layers.0.mlp.experts.3.gate_up_proj", NULL, 0, &e), 0);
    ck_assert_int_eq(ex(q, "model.layers.0.mlp.router", NULL, 0, &e), 1);
    ck_assert_uint_eq(e, SIZE_MAX);
    fp4s_qconfig_close(&q);
}
END_TEST

START_TEST(bad_configs_are_named)
{
    const char *p = check_path("c.json");
    const char *cases[][2] = {
        {"{\"quantization_config\": {\"quant_method\": \"awq\"}}", "quant_method 'awq' is not modelopt"},
        {"{\"quantization\": {\"exclude_modules\": \"lm_head\"}}", "quantization.exclude_modules is not a list"},
        {"{\"quantization\": {\"exclude_modules\": [3]}}", "quantization.exclude_modules[0] is not a string"},
        {"{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"re:a(\"]}}",
         "ignore[0] 're:a(': not a regular expression"},
        {"{\"a\": 1}", "no quantization config"},
        {"{\"a\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(p, "w");
        fputs(cases[i][0], f);
        fclose(f);
        fp4s_qconfig *q = NULL;
        ck_assert_int_eq(fp4s_qconfig_open(p, &q), FP4S_EFORMAT);
        ck_assert_ptr_null(q);
        ck_assert_msg(strstr(fp4s_last_error(), cases[i][1]) && strstr(fp4s_last_error(), "c.json"), "%zu: %s", i,
                      fp4s_last_error());
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("qconfig");
    const check_case tests[] = {
        CHECK_CASE(engine_names_fuse_as_vllm),
        CHECK_CASE(modelopt_exact_substring_fnmatch_experts),
        CHECK_CASE(modelopt_fused_shards_must_agree),
        CHECK_CASE(config_json_modelopt_uses_ignore),
        CHECK_CASE(compressed_tensors_exact_and_re),
        CHECK_CASE(mxfp4_quantizes_experts_only),
        CHECK_CASE(bad_configs_are_named),
    };
    check_add_cases(s, tests, CHECK_NCASES(tests), setup, teardown, 0);
    return check_run(s, CK_NORMAL);
}
