/* Result records (fp4scope/record.h): every record type's table covers every
 * byte of its struct but alignment padding (a member added without its row
 * fails here), and a record filled with a pattern, its arrays and strings
 * included, comes back from fp4s_record_put / fp4s_record_get byte for
 * byte; a truncated or inconsistent record is refused. */
#include <fp4scope/channels.h>
#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/record.h>
#include <fp4scope/remedy.h>

#include "../check_main.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const fp4s_rtype *(*const types[])(void) = {
    fp4s_rtype_decomp_result, fp4s_rtype_compare_site, fp4s_rtype_remedy, fp4s_rtype_remedy_cost,
    fp4s_rtype_remedy_time,   fp4s_rtype_remedy_site,  fp4s_rtype_remedy_result, fp4s_rtype_channel_stat,
    fp4s_rtype_mm_metrics,    fp4s_rtype_mm_run,        fp4s_rtype_batch_result,
};
#define NTYPES (sizeof types / sizeof types[0])

static size_t elem_size(const fp4s_rfield *f)
{
    switch (f->type) {
    case FP4S_FT_F64: return sizeof(double);
    case FP4S_FT_SIZE: return sizeof(size_t);
    case FP4S_FT_U64: return sizeof(uint64_t);
    case FP4S_FT_I64: return sizeof(int64_t);
    case FP4S_FT_U32: return sizeof(uint32_t);
    case FP4S_FT_U16: return sizeof(uint16_t);
    case FP4S_FT_ENUM: return sizeof(int);
    case FP4S_FT_BOOL: return sizeof(bool);
    case FP4S_FT_CHARS: return 1;
    case FP4S_FT_STRUCT: return f->sub()->size;
    default: return sizeof(void *);
    }
}

/* Every byte of each struct is some row's, but for padding: a run of
 * uncovered bytes shorter than the alignment of the member that follows it.
 * A new member without its row leaves a run that is not padding (an 8-byte
 * one always: doubles, counts, pointers). */
START_TEST(tables_cover_every_member)
{
    for (size_t t = 0; t < NTYPES; t++) {
        const fp4s_rtype *ty = types[t]();
        unsigned char *cov = calloc(ty->size, 1);
        for (size_t i = 0; i < ty->nfields; i++) {
            const fp4s_rfield *f = &ty->fields[i];
            size_t n = (f->type == FP4S_FT_STRUCT || f->type <= FP4S_FT_CHARS) ? f->count * elem_size(f)
                                                                               : sizeof(void *);
            ck_assert_msg(f->offset + n <= ty->size, "%s.%s: past the struct", ty->name, f->name);
            for (size_t b = 0; b < n; b++) {
                ck_assert_msg(!cov[f->offset + b], "%s.%s overlaps another row", ty->name, f->name);
                cov[f->offset + b] = 1;
            }
        }
        for (size_t b = 0; b < ty->size;) {
            if (cov[b]) {
                b++;
                continue;
            }
            size_t e = b;
            while (e < ty->size && !cov[e]) e++;
            /* padding: shorter than the alignment of the member after it */
            bool pad = e == ty->size ? e - b < 8
                                     : (e % 8 == 0 && e - b < 8) || (e % 4 == 0 && e - b < 4) || (e % 2 == 0 && e - b < 2);
            ck_assert_msg(pad, "%s: bytes [%zu, %zu) belong to no row (a member without its row?)", ty->name, b, e);
            b = e;
        }
        /* a count's row comes before the rows it counts */
        for (size_t i = 0; i < ty->nfields; i++) {
            const fp4s_rfield *f = &ty->fields[i];
            if (f->count_of < 0 || f->type == FP4S_FT_STRUCT || f->type <= FP4S_FT_CHARS) continue;
            bool before = false;
            for (size_t j = 0; j < i; j++) before |= (ptrdiff_t)ty->fields[j].offset == f->count_of;
            ck_assert_msg(before, "%s.%s: its count's row comes after it", ty->name, f->name);
        }
        free(cov);
    }
}
END_TEST

/* Fill rec of type ty: every scalar byte a pattern, every count small,
 * every array and string allocated and filled. */
static void fill(const fp4s_rtype *ty, unsigned char *rec, unsigned seed)
{
    for (size_t i = 0; i < ty->nfields; i++) {
        const fp4s_rfield *f = &ty->fields[i];
        unsigned char *at = rec + f->offset;
        switch (f->type) {
        case FP4S_FT_STRUCT:
            for (size_t j = 0; j < f->count; j++) fill(f->sub(), at + j * f->sub()->size, seed + 7 * (unsigned)j);
            break;
        case FP4S_FT_SIZE: { /* counts stay small so that arrays are too */
            size_t v = 2 + (seed + i) % 3;
            memcpy(at, &v, sizeof v);
            break;
        }
        case FP4S_FT_BOOL: *(bool *)at = (seed + i) & 1; break;
        case FP4S_FT_CHARS:
            for (size_t j = 0; j + 1 < f->count; j++) at[j] = (unsigned char)('a' + (seed + j) % 26);
            at[f->count - 1] = 0;
            break;
        case FP4S_FT_STR: {
            char *s = strdup("a string");
            memcpy(at, &s, sizeof s);
            break;
        }
        case FP4S_FT_CPTR: break;
        case FP4S_FT_PTR_F64:
        case FP4S_FT_PTR_SIZE:
        case FP4S_FT_PTR_STR:
        case FP4S_FT_PTR_STRUCT: break; /* after the counts */
        default:
            for (size_t b = 0; b < f->count * elem_size(f); b++) at[b] = (unsigned char)(0x5A ^ (seed + b * 13 + i));
        }
    }
    for (size_t i = 0; i < ty->nfields; i++) {
        const fp4s_rfield *f = &ty->fields[i];
        unsigned char *at = rec + f->offset;
        size_t n = fp4s_record_count(f, rec);
        void *a = NULL;
        if (f->type == FP4S_FT_PTR_F64 || f->type == FP4S_FT_PTR_SIZE) {
            a = malloc(n * 8 + 1);
            for (size_t b = 0; b < n * 8; b++) ((unsigned char *)a)[b] = (unsigned char)(seed * 3 + b);
        } else if (f->type == FP4S_FT_PTR_STR) {
            char **v = calloc(n + 1, sizeof *v);
            for (size_t j = 0; j < n; j++) v[j] = j == 1 ? NULL : strdup("name");
            a = v;
        } else if (f->type == FP4S_FT_PTR_STRUCT) {
            unsigned char *v = calloc(n + 1, f->sub()->size);
            for (size_t j = 0; j < n; j++) fill(f->sub(), v + j * f->sub()->size, seed + 11 * (unsigned)j);
            a = v;
        } else {
            continue;
        }
        memcpy(at, &a, sizeof a);
    }
}

/* rec == got in every row, arrays and strings by content. */
static void same(const fp4s_rtype *ty, const unsigned char *a, const unsigned char *b)
{
    for (size_t i = 0; i < ty->nfields; i++) {
        const fp4s_rfield *f = &ty->fields[i];
        const unsigned char *x = a + f->offset, *y = b + f->offset;
        if (f->type == FP4S_FT_STRUCT) {
            for (size_t j = 0; j < f->count; j++) same(f->sub(), x + j * f->sub()->size, y + j * f->sub()->size);
        } else if (f->type == FP4S_FT_STR) {
            const char *p, *q;
            memcpy(&p, x, sizeof p);
            memcpy(&q, y, sizeof q);
            ck_assert_msg((!p && !q) || (p && q && !strcmp(p, q)), "%s.%s", ty->name, f->name);
        } else if (f->type >= FP4S_FT_PTR_F64 && f->type <= FP4S_FT_PTR_STRUCT && f->type != FP4S_FT_STR) {
            const unsigned char *p, *q;
            memcpy(&p, x, sizeof p);
            memcpy(&q, y, sizeof q);
            size_t n = fp4s_record_count(f, a);
            ck_assert_msg(n == fp4s_record_count(f, b), "%s.%s: count", ty->name, f->name);
            ck_assert_msg(!p == !q, "%s.%s: NULL", ty->name, f->name);
            if (!p) continue;
            if (f->type == FP4S_FT_PTR_STR) {
                for (size_t j = 0; j < n; j++) {
                    const char *s = ((char *const *)p)[j], *t = ((char *const *)q)[j];
                    ck_assert_msg((!s && !t) || (s && t && !strcmp(s, t)), "%s.%s[%zu]", ty->name, f->name, j);
                }
            } else if (f->type == FP4S_FT_PTR_STRUCT) {
                for (size_t j = 0; j < n; j++) same(f->sub(), p + j * f->sub()->size, q + j * f->sub()->size);
            } else {
                ck_assert_msg(!memcmp(p, q, n * 8), "%s.%s: contents", ty->name, f->name);
            }
        } else if (f->type != FP4S_FT_CPTR) {
            ck_assert_msg(!memcmp(x, y, f->count * elem_size(f)), "%s.%s differs after the round trip", ty->name,
                          f->name);
        }
    }
}

START_TEST(round_trip_byte_for_byte)
{
    for (size_t t = 0; t < NTYPES; t++) {
        const fp4s_rtype *ty = types[t]();
        unsigned char *rec = calloc(1, ty->size), *got = calloc(1, ty->size);
        fill(ty, rec, 3 + (unsigned)t);
        fp4s_buf b = {0};
        ck_assert_int_eq(fp4s_record_put(&b, ty, rec), 0);
        ck_assert_int_eq(fp4s_record_put(&b, ty, rec), 0); /* two in a row */
        const unsigned char *p = b.p, *end = b.p + b.n;
        for (int k = 0; k < 2; k++) {
            ck_assert_msg(fp4s_record_get(&p, end, ty, got) == 0, "%s: %s", ty->name, fp4s_last_error());
            same(ty, rec, got);
            fp4s_record_free(ty, got);
        }
        ck_assert(p == end);
        /* every truncation of one record is refused, and leaves nothing to free */
        for (size_t cut = 0; cut < b.n / 2; cut += 1 + b.n / 197) {
            p = b.p;
            ck_assert_int_eq(fp4s_record_get(&p, b.p + cut, ty, got), FP4S_EFORMAT);
        }
        free(b.p);
        fp4s_record_free(ty, rec);
        free(rec);
        free(got);
    }
}
END_TEST

/* An array whose length is not what its count says is refused. */
START_TEST(inconsistent_count_refused)
{
    const fp4s_rtype *ty = fp4s_rtype_compare_site();
    fp4s_compare_site s = {0};
    s.k = 2;
    double a[2] = {1, 2};
    s.ch_input_rel_diff = a;
    fp4s_buf b = {0};
    ck_assert_int_eq(fp4s_record_put(&b, ty, &s), 0);
    /* the k member is the third value written (m, n, k): make it 3 */
    size_t three = 3;
    memcpy(b.p + 2 * sizeof(size_t), &three, sizeof three);
    const unsigned char *p = b.p;
    fp4s_compare_site got;
    ck_assert_int_eq(fp4s_record_get(&p, b.p + b.n, ty, &got), FP4S_EFORMAT);
    ck_assert_ptr_null(strstr(fp4s_last_error(), "truncated"));
    free(b.p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    const check_case cases[] = {
        CHECK_CASE(tables_cover_every_member),
        CHECK_CASE(round_trip_byte_for_byte),
        CHECK_CASE(inconsistent_count_refused),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 60);
    return check_run(s, CK_NORMAL);
}
