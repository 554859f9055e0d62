/* CSV output of records (out.h). */
#include "out.h"

#include <math.h>
#include <stdio.h>

static bool is_number(const fp4s_rfield *f)
{
    return (f->flags & FP4S_FF_OUTPUT) && f->count == 1 &&
           (f->type == FP4S_FT_F64 || f->type == FP4S_FT_SIZE || f->type == FP4S_FT_U64 || f->type == FP4S_FT_I64 ||
            f->type == FP4S_FT_U32 || f->type == FP4S_FT_U16 || f->type == FP4S_FT_ENUM || f->type == FP4S_FT_BOOL);
}

void out_csv_header(const fp4s_rtype *t, const char *prefix)
{
    for (size_t i = 0; i < t->nfields; i++)
        if (is_number(&t->fields[i])) printf(",%s%s", prefix ? prefix : "", t->fields[i].name);
}

void out_csv_record(const fp4s_rtype *t, const void *rec)
{
    for (size_t i = 0; i < t->nfields; i++) {
        const fp4s_rfield *f = &t->fields[i];
        if (!is_number(f)) continue;
        double v = fp4s_record_value(f, rec, 0);
        putchar(',');
        if (f->type != FP4S_FT_F64) printf("%.0f", v);
        else if (isfinite(v)) printf("%.17g", v);
        else if (!isnan(v)) printf("%s", v > 0 ? "inf" : "-inf");
    }
}
