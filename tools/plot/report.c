/* fp4-plot: reading the JSON reports of fp4-decompose and fp4-channels. */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* " (synthetic data)" for the default title when a report's inputs came from a
 * synthetic capture (decompose: inputs[].synthetic; channels: its source). */
const char *report_synthetic(json_t *j)
{
    json_t *in = json_object_get(j, "inputs");
    size_t i;
    json_t *e;
    if (json_is_array(in))
        json_array_foreach(in, i, e) if (json_is_true(json_object_get(e, "synthetic"))) return " (synthetic data)";
    json_t *src = json_object_get(j, "source");
    if (json_is_string(src) && cli_source_synthetic(json_string_value(src))) return " (synthetic data)";
    return "";
}

/* "mxfp4, ceil" / "mxfp4 ocp, scale rule ceil" / "nvfp4 te": the quantizer
 * of an fp4-decompose or fp4-channels report as it ran, with the scale rule
 * when it differs from the profile's (a CEIL run of the ocp profile is not
 * "ocp"). */
void report_quantizer(json_t *j, char *buf, size_t n)
{
    json_t *fmt = json_object_get(j, "format"), *prof = json_object_get(j, "profile"),
           *rule = json_object_get(j, "scale_rule");
    const char *f = json_is_string(fmt) ? json_string_value(fmt) : "", *p = json_is_string(prof) ? json_string_value(prof) : "";
    size_t k = (size_t)snprintf(buf, n, "%s%s%s", f, *f && *p ? " " : "", p);
    if (json_is_string(rule) && k < n) {
        const char *r = json_string_value(rule);
        fp4s_spec sp;
        fp4s_mx_rule pr;
        int same = *p && fp4s_spec_profile(&sp, FP4S_MXFP4, p) == 0 && fp4s_mx_rule_parse(r, &pr) == 0 &&
                   pr == sp.mx_rule;
        if (!same) snprintf(buf + k, n - k, ", scale rule %s", r);
    }
}

/* ---- JSON report helpers --------------------------------------------------------------- */
static const char *report_path;

void bad_report(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fp4-plot: %s: ", report_path);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(FP4S_EXIT_INPUT);
}

json_t *load_report(const char *path, const char *tool)
{
    report_path = path;
    json_error_t err;
    json_t *j = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &err) : json_load_file(path, 0, &err);
    if (!j) {
        if (strcmp(path, "-") != 0 && access(path, R_OK) != 0)
            cli_die(FP4S_EXIT_INPUT, "%s: cannot open: %s", path, strerror(errno));
        bad_report("invalid JSON at line %d: %s", err.line, err.text);
    }
    if (!json_is_object(j)) bad_report("expected a JSON object (the output of %s --json)", tool);
    json_t *t = json_object_get(j, "tool");
    if (t && (!json_is_string(t) || strcmp(json_string_value(t), tool) != 0))
        bad_report("\"tool\" is %s%s%s, expected \"%s\"", json_is_string(t) ? "\"" : "",
                   json_is_string(t) ? json_string_value(t) : "not a string", json_is_string(t) ? "\"" : "", tool);
    return j;
}

double num_field(json_t *o, const char *key, const char *where, int required)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) bad_report("%s: missing number '%s'", where, key);
        return NAN;
    }
    if (!json_is_number(v)) bad_report("%s: '%s' is not a number", where, key);
    return json_number_value(v);
}

json_t *arr_field(json_t *o, const char *key, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_array(v)) bad_report("%s: missing array '%s'", where, key);
    return v;
}

json_t *obj_field(json_t *o, const char *key, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_object(v)) bad_report("%s: missing object '%s'", where, key);
    return v;
}

/* Label of an fp4-decompose input: site, else source base name; with step and side. */
void input_label(json_t *in, size_t i, char *buf, size_t n)
{
    json_t *site = json_object_get(in, "site"), *src = json_object_get(in, "source");
    json_t *step = json_object_get(in, "step"), *side = json_object_get(in, "side");
    const char *name = json_is_string(site) ? json_string_value(site) : NULL;
    char tmp[512];
    if (!name && json_is_string(src)) {
        const char *s = json_string_value(src);
        const char *b = strrchr(s, '/');
        snprintf(tmp, sizeof tmp, "%s", b ? b + 1 : s);
        name = tmp;
    }
    if (!name) {
        snprintf(tmp, sizeof tmp, "input %zu", i);
        name = tmp;
    }
    size_t k = (size_t)snprintf(buf, n, "%s", name);
    int st = json_is_integer(step), sd = json_is_string(side);
    if ((st || sd) && k < n) k += (size_t)snprintf(buf + k, n - k, " [");
    if (st && k < n) k += (size_t)snprintf(buf + k, n - k, "step %lld%s", (long long)json_integer_value(step), sd ? ", " : "");
    if (sd && k < n) k += (size_t)snprintf(buf + k, n - k, "%s", json_string_value(side));
    if ((st || sd) && k < n) snprintf(buf + k, n - k, "]");
}

