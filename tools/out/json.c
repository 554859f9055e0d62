/* JSON output of records (out.h). */
#include "out.h"

#include "../cli.h"

#include <string.h>

static bool is_scalar(fp4s_ftype t)
{
    return t == FP4S_FT_F64 || t == FP4S_FT_SIZE || t == FP4S_FT_U64 || t == FP4S_FT_I64 || t == FP4S_FT_U32 ||
           t == FP4S_FT_U16 || t == FP4S_FT_ENUM || t == FP4S_FT_BOOL || t == FP4S_FT_STR || t == FP4S_FT_CHARS;
}

static json_t *value(const fp4s_rfield *f, const void *rec, size_t i)
{
    const unsigned char *at = (const unsigned char *)rec + f->offset;
    switch (f->type) {
    case FP4S_FT_F64: return cli_json_real(fp4s_record_value(f, rec, i));
    case FP4S_FT_BOOL: return json_boolean(fp4s_record_value(f, rec, i) != 0);
    case FP4S_FT_STR: {
        const char *s;
        memcpy(&s, at, sizeof s);
        return s ? json_string(s) : json_null();
    }
    case FP4S_FT_CHARS: return json_stringn((const char *)at, strnlen((const char *)at, f->count));
    case FP4S_FT_SIZE: {
        size_t v;
        memcpy(&v, at + i * sizeof v, sizeof v);
        return json_integer((json_int_t)v);
    }
    case FP4S_FT_U64: {
        uint64_t v;
        memcpy(&v, at + i * sizeof v, sizeof v);
        return json_integer((json_int_t)v);
    }
    case FP4S_FT_I64: {
        int64_t v;
        memcpy(&v, at + i * sizeof v, sizeof v);
        return json_integer((json_int_t)v);
    }
    default: return json_integer((json_int_t)fp4s_record_value(f, rec, i));
    }
}

json_t *out_json_record(const fp4s_rtype *t, const void *rec, json_t *o)
{
    if (!o) o = json_object();
    for (size_t i = 0; i < t->nfields; i++) {
        const fp4s_rfield *f = &t->fields[i];
        if (!(f->flags & FP4S_FF_OUTPUT) || !is_scalar(f->type)) continue;
        if (f->count == 1 || f->type == FP4S_FT_CHARS) {
            json_object_set_new(o, f->name, value(f, rec, 0));
        } else {
            json_t *a = json_array();
            for (size_t j = 0; j < f->count; j++) json_array_append_new(a, value(f, rec, j));
            json_object_set_new(o, f->name, a);
        }
    }
    return o;
}
