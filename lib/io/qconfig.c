/* Quantization configs of checkpoints (ckpt.h): what the rollout engine
 * quantizes, by vLLM's rules for each method. */
#include "internal.h"
#include "fp4s_config.h"

#include <fp4scope/ckpt.h>

#include <ctype.h>
#include <fnmatch.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fp4s_qconfig_method_name(fp4s_qconfig_method m)
{
    switch (m) {
    case FP4S_QCFG_MODELOPT: return "modelopt";
    case FP4S_QCFG_COMPRESSED_TENSORS: return "compressed-tensors";
    case FP4S_QCFG_MXFP4: return "mxfp4";
    }
    return "?";
}

size_t fp4s_qconfig_engine_name(const char *module, char *buf, size_t n)
{
    static const char *fuse[][2] = {{"q_proj", "qkv_proj"}, {"k_proj", "qkv_proj"}, {"v_proj", "qkv_proj"},
                                    {"gate_proj", "gate_up_proj"}, {"up_proj", "gate_up_proj"}};
    /* the experts of an MoE: one FusedMoE layer "...experts" */
    const char *ex = strstr(module, ".experts.");
    if (ex && isdigit((unsigned char)ex[9])) {
        int len = snprintf(buf, n, "%.*s.experts", (int)(ex - module), module);
        return len < 0 ? 0 : (size_t)len;
    }
    const char *dot = strrchr(module, '.');
    const char *leaf = dot ? dot + 1 : module;
    for (size_t i = 0; i < sizeof fuse / sizeof fuse[0]; i++)
        if (strcmp(leaf, fuse[i][0]) == 0) {
            int len = snprintf(buf, n, "%.*s%s", (int)(leaf - module), module, fuse[i][1]);
            return len < 0 ? 0 : (size_t)len;
        }
    int len = snprintf(buf, n, "%s", module);
    return len < 0 ? 0 : (size_t)len;
}

#if FP4S_HAVE_JANSSON

struct fp4s_qconfig {
    char *path;
    fp4s_qconfig_method method;
    char algo[64], key[64];
    bool static_input, weight_only;
    char **ex;
    regex_t *re;      /* compressed-tensors "re:" entries, compiled (NULL entries unused) */
    bool *has_re;
    size_t nex;
};

/* Python's re pattern as a POSIX extended one, anchored at the start as re.match is. */
static int py_regex(const char *pat, regex_t *out, char *err, size_t errn)
{
    size_t n = strlen(pat);
    char *b = malloc(n * 12 + 8);
    if (!b) {
        snprintf(err, errn, "out of memory");
        return -1;
    }
    size_t k = 0;
    b[k++] = '^';
    b[k++] = '(';
    for (size_t i = 0; i < n; i++) {
        if (pat[i] == '\\' && i + 1 < n) {
            const char *rep = NULL;
            switch (pat[i + 1]) {
            case 'd': rep = "[0-9]"; break;
            case 'D': rep = "[^0-9]"; break;
            case 'w': rep = "[[:alnum:]_]"; break;
            case 'W': rep = "[^[:alnum:]_]"; break;
            case 's': rep = "[[:space:]]"; break;
            case 'S': rep = "[^[:space:]]"; break;
            }
            if (rep) {
                k += (size_t)sprintf(b + k, "%s", rep);
                i++;
                continue;
            }
            b[k++] = pat[i++];
            b[k++] = pat[i];
            continue;
        }
        if (pat[i] == '(' && i + 2 < n && pat[i + 1] == '?' && pat[i + 2] == ':') {
            b[k++] = '(';
            i += 2;
            continue;
        }
        /* lazy quantifiers: whether a match exists does not depend on laziness */
        if (pat[i] == '?' && i > 0 && (pat[i - 1] == '*' || pat[i - 1] == '+' || pat[i - 1] == '?' ||
                                       pat[i - 1] == '}'))
            continue;
        b[k++] = pat[i];
    }
    b[k++] = ')';
    b[k] = '\0';
    int rc = regcomp(out, b, REG_EXTENDED | REG_NOSUB);
    if (rc) regerror(rc, out, err, errn);
    free(b);
    return rc ? -1 : 0;
}

void fp4s_qconfig_close(fp4s_qconfig **qp)
{
    if (!qp || !*qp) return;
    fp4s_qconfig *q = *qp;
    for (size_t i = 0; i < q->nex; i++) {
        if (q->has_re && q->has_re[i]) regfree(&q->re[i]);
        free(q->ex[i]);
    }
    free(q->ex);
    free(q->re);
    free(q->has_re);
    free(q->path);
    free(q);
    *qp = NULL;
}

static int take_list(fp4s_qconfig *q, json_t *arr, const char *key)
{
    snprintf(q->key, sizeof q->key, "%s", key);
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr))
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s is not a list", q->path, key);
    size_t n = json_array_size(arr);
    q->ex = calloc(n ? n : 1, sizeof *q->ex);
    q->re = calloc(n ? n : 1, sizeof *q->re);
    q->has_re = calloc(n ? n : 1, sizeof *q->has_re);
    if (!q->ex || !q->re || !q->has_re) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", q->path);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_string(v))
            return fp4s_error_set(FP4S_EFORMAT, "%s: %s[%zu] is not a string", q->path, key, i);
        if (!(q->ex[i] = strdup(json_string_value(v)))) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
        q->nex = i + 1;
        if (q->method == FP4S_QCFG_COMPRESSED_TENSORS && strncmp(q->ex[i], "re:", 3) == 0) {
            char err[128];
            if (py_regex(q->ex[i] + 3, &q->re[i], err, sizeof err))
                return fp4s_error_set(FP4S_EFORMAT, "%s: %s[%zu] '%s': not a regular expression fp4scope can "
                                      "run: %s", q->path, key, i, q->ex[i], err);
            q->has_re[i] = true;
        }
    }
    return 0;
}

static const char *str_of(json_t *o, const char *k)
{
    json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int fp4s_qconfig_open(const char *path, fp4s_qconfig **out)
{
    if (!path || !out) return fp4s_error_set(FP4S_EINVAL, "fp4s_qconfig_open: NULL argument");
    *out = NULL;
    fp4s_qconfig *q = calloc(1, sizeof *q);
    if (!q) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    struct stat st;
    char buf[4096];
    const char *file = path;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, sizeof buf, "%s/hf_quant_config.json", path);
        if (access(buf, F_OK) != 0) snprintf(buf, sizeof buf, "%s/config.json", path);
        file = buf;
    }
    if (!(q->path = strdup(file))) {
        free(q);
        return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    json_error_t je;
    json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!root) {
        rc = access(file, F_OK) ? fp4s_error_set(FP4S_EOPEN, "%s: cannot open", file)
                                : fp4s_error_set(FP4S_EFORMAT, "%s: not valid JSON: %s (line %d)", file, je.text,
                                                 je.line);
    } else if (!json_is_object(root)) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: not a JSON object", file);
    } else if (json_is_object(json_object_get(root, "quantization"))) {
        /* ModelOpt's hf_quant_config.json */
        json_t *qq = json_object_get(root, "quantization");
        q->method = FP4S_QCFG_MODELOPT;
        const char *a = str_of(qq, "quant_algo");
        snprintf(q->algo, sizeof q->algo, "%s", a ? a : "");
        rc = take_list(q, json_object_get(qq, "exclude_modules"), "quantization.exclude_modules");
    } else {
        json_t *qc = json_object_get(root, "quantization_config");
        const char *key_prefix = qc ? "quantization_config." : "";
        if (!qc) qc = root;
        const char *m = str_of(qc, "quant_method");
        char key[64];
        if (!json_is_object(qc) || !m) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: no quantization config (neither hf_quant_config.json's "
                                "\"quantization\" nor a \"quantization_config\" with \"quant_method\")", file);
        } else if (strncmp(m, "modelopt", 8) == 0) {
            q->method = FP4S_QCFG_MODELOPT;
            const char *a = str_of(qc, "quant_algo");
            snprintf(q->algo, sizeof q->algo, "%s", a ? a : "");
            snprintf(key, sizeof key, "%signore", key_prefix);
            rc = take_list(q, json_object_get(qc, "ignore"), key);
        } else if (strcmp(m, "compressed-tensors") == 0) {
            q->method = FP4S_QCFG_COMPRESSED_TENSORS;
            const char *a = str_of(qc, "format");
            snprintf(q->algo, sizeof q->algo, "%s", a ? a : "");
            json_t *g = json_object_get(qc, "config_groups");
            const char *gk;
            json_t *gv;
            bool any_act = false;
            if (json_is_object(g))
                json_object_foreach(g, gk, gv) {
                    json_t *ia = json_object_get(gv, "input_activations");
                    if (json_is_object(ia)) {
                        any_act = true;
                        json_t *dyn = json_object_get(ia, "dynamic");
                        if (json_is_false(dyn)) q->static_input = true;
                    }
                    const char *fmt = str_of(gv, "format");
                    if (!q->algo[0] && fmt) snprintf(q->algo, sizeof q->algo, "%s", fmt);
                }
            q->weight_only = !any_act;
            snprintf(key, sizeof key, "%signore", key_prefix);
            rc = take_list(q, json_object_get(qc, "ignore"), key);
        } else if (strcmp(m, "mxfp4") == 0) {
            q->method = FP4S_QCFG_MXFP4;
            snprintf(q->algo, sizeof q->algo, "MXFP4");
            q->weight_only = true;
            snprintf(key, sizeof key, "%smodules_to_not_convert", key_prefix);
            rc = take_list(q, json_object_get(qc, "modules_to_not_convert"), key);
        } else {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: quant_method '%s' is not modelopt, compressed-tensors or mxfp4",
                                file, m);
        }
    }
    if (!rc && q->method == FP4S_QCFG_MODELOPT) {
        q->weight_only = strstr(q->algo, "W4A16") != NULL;
        q->static_input = !q->weight_only && strstr(q->algo, "FP4") != NULL;
    }
    json_decref(root);
    if (rc) {
        fp4s_qconfig_close(&q);
        return rc;
    }
    *out = q;
    return 0;
}

fp4s_qconfig_method fp4s_qconfig_method_of(const fp4s_qconfig *q) { return q ? q->method : 0; }
const char *fp4s_qconfig_path(const fp4s_qconfig *q) { return q ? q->path : ""; }
const char *fp4s_qconfig_algo(const fp4s_qconfig *q) { return q ? q->algo : ""; }
const char *fp4s_qconfig_key(const fp4s_qconfig *q) { return q ? q->key : ""; }
bool fp4s_qconfig_static_input(const fp4s_qconfig *q) { return q && q->static_input; }
bool fp4s_qconfig_weight_only(const fp4s_qconfig *q) { return q && q->weight_only; }
size_t fp4s_qconfig_nexclude(const fp4s_qconfig *q) { return q ? q->nex : 0; }
const char *fp4s_qconfig_exclude_at(const fp4s_qconfig *q, size_t i) { return q && i < q->nex ? q->ex[i] : NULL; }

bool fp4s_qconfig_exclude_is_pattern(const fp4s_qconfig *q, size_t i)
{
    if (!q || i >= q->nex) return false;
    if (q->method == FP4S_QCFG_COMPRESSED_TENSORS) return q->has_re[i];
    return strpbrk(q->ex[i], "*?[") != NULL;
}

/* entry i against one name by the method's rule (exact, substring, fnmatch / exact, re:) */
static bool entry_hit(const fp4s_qconfig *q, size_t i, const char *name, bool substring)
{
    const char *e = q->ex[i];
    if (strcmp(e, name) == 0) return true;
    if (q->method == FP4S_QCFG_COMPRESSED_TENSORS)
        return q->has_re[i] && regexec(&q->re[i], name, 0, NULL, 0) == 0;
    if (substring && strstr(name, e)) return true;
    if (substring && strncmp(name, "language_model.", 15) == 0 && strstr(name + 15, e)) return true;
    return fnmatch(e, name, 0) == 0;
}

bool fp4s_qconfig_entry_matches(const fp4s_qconfig *q, size_t i, const char *module)
{
    if (!q || i >= q->nex || !module) return false;
    char eng[512];
    fp4s_qconfig_engine_name(module, eng, sizeof eng);
    return entry_hit(q, i, module, false) || entry_hit(q, i, eng, q->method == FP4S_QCFG_MODELOPT);
}

static bool in_list(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0) return true;
    return false;
}

int fp4s_qconfig_excludes(const fp4s_qconfig *q, const char *module, const char *const *modules, size_t nmodules,
                          size_t *entry)
{
    if (!q || !module) return fp4s_error_set(FP4S_EINVAL, "fp4s_qconfig_excludes: NULL argument");
    size_t dummy;
    if (!entry) entry = &dummy;
    *entry = SIZE_MAX;
    char eng[512];
    fp4s_qconfig_engine_name(module, eng, sizeof eng);
    bool expert = strstr(module, ".experts.") && strcmp(eng, module) != 0;
    if (q->method == FP4S_QCFG_MXFP4) {
        /* vLLM's Mxfp4Config: FusedMoE layers are MXFP4, linear layers unquantized */
        if (!expert) return 1;
        for (size_t i = 0; i < q->nex; i++)
            if (entry_hit(q, i, module, false) || entry_hit(q, i, eng, false)) {
                *entry = i;
                return 1;
            }
        return 0;
    }
    if (q->method == FP4S_QCFG_MODELOPT &&
        (strstr(eng, "vision_tower") || strstr(eng, "vision_model") || strstr(eng, "visual")))
        return 1;
    /* fused layers: every shard excluded or none (vLLM raises otherwise) */
    const char *dot = strrchr(eng, '.');
    const char *leaf = dot ? dot + 1 : eng;
    static const char *shards_qkv[] = {"q_proj", "k_proj", "v_proj"}, *shards_gu[] = {"gate_proj", "up_proj"};
    const char **sh = NULL;
    size_t nsh = 0;
    if (!expert && strcmp(leaf, "qkv_proj") == 0 && strcmp(eng, module)) sh = shards_qkv, nsh = 3;
    if (!expert && strcmp(leaf, "gate_up_proj") == 0 && strcmp(eng, module)) sh = shards_gu, nsh = 2;
    if (sh) {
        int first = -1;
        size_t first_entry = SIZE_MAX;
        char name[600], disagree[600] = "";
        for (size_t s = 0; s < nsh; s++) {
            snprintf(name, sizeof name, "%.*s%s", (int)(leaf - eng), eng, sh[s]);
            if (modules && nmodules && !in_list(modules, nmodules, name)) continue;
            size_t hit = SIZE_MAX;
            for (size_t i = 0; i < q->nex && hit == SIZE_MAX; i++)
                if (strcmp(q->ex[i], name) == 0 ||
                    (q->method == FP4S_QCFG_COMPRESSED_TENSORS && entry_hit(q, i, name, false)))
                    hit = i;
            int skipped = hit != SIZE_MAX;
            if (first < 0) {
                first = skipped;
                first_entry = hit;
            } else if (skipped != first) {
                snprintf(disagree, sizeof disagree, "%s", name);
            }
            if (skipped && first_entry == SIZE_MAX) first_entry = hit;
        }
        if (disagree[0])
            return fp4s_error_set(FP4S_EINVAL, "%s: some but not all shards of the fused layer %s are excluded (%s "
                                  "differs): vLLM refuses to load it", q->path, eng, disagree);
        if (first == 1) {
            *entry = first_entry;
            return 1;
        }
    } else if (expert && q->method == FP4S_QCFG_MODELOPT) {
        /* vLLM: an entry naming experts that contains the FusedMoE prefix */
        for (size_t i = 0; i < q->nex; i++)
            if (strstr(q->ex[i], "experts") && strstr(q->ex[i], eng)) {
                *entry = i;
                return 1;
            }
    } else {
        for (size_t i = 0; i < q->nex; i++)
            if (strcmp(q->ex[i], eng) == 0 || strcmp(q->ex[i], module) == 0) {
                *entry = i;
                return 1;
            }
    }
    for (size_t i = 0; i < q->nex; i++)
        if (entry_hit(q, i, eng, q->method == FP4S_QCFG_MODELOPT) ||
            (q->method == FP4S_QCFG_COMPRESSED_TENSORS && entry_hit(q, i, module, false))) {
            *entry = i;
            return 1;
        }
    return 0;
}

#else

struct fp4s_qconfig {
    int unused;
};
int fp4s_qconfig_open(const char *path, fp4s_qconfig **out)
{
    if (out) *out = NULL;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading configs needs jansson", path ? path : "?");
}
void fp4s_qconfig_close(fp4s_qconfig **q)
{
    if (q) *q = NULL;
}
fp4s_qconfig_method fp4s_qconfig_method_of(const fp4s_qconfig *q) { (void)q; return 0; }
const char *fp4s_qconfig_path(const fp4s_qconfig *q) { (void)q; return ""; }
const char *fp4s_qconfig_algo(const fp4s_qconfig *q) { (void)q; return ""; }
const char *fp4s_qconfig_key(const fp4s_qconfig *q) { (void)q; return ""; }
bool fp4s_qconfig_static_input(const fp4s_qconfig *q) { (void)q; return false; }
bool fp4s_qconfig_weight_only(const fp4s_qconfig *q) { (void)q; return false; }
size_t fp4s_qconfig_nexclude(const fp4s_qconfig *q) { (void)q; return 0; }
const char *fp4s_qconfig_exclude_at(const fp4s_qconfig *q, size_t i) { (void)q; (void)i; return NULL; }
bool fp4s_qconfig_exclude_is_pattern(const fp4s_qconfig *q, size_t i) { (void)q; (void)i; return false; }
bool fp4s_qconfig_entry_matches(const fp4s_qconfig *q, size_t i, const char *m) { (void)q; (void)i; (void)m; return false; }
int fp4s_qconfig_excludes(const fp4s_qconfig *q, const char *module, const char *const *modules, size_t n,
                          size_t *entry)
{
    (void)q; (void)module; (void)modules; (void)n; (void)entry;
    return fp4s_error_set(FP4S_ENOTSUP, "reading configs needs jansson");
}
#endif
