/* Result records: the field table of every analysis result the tools
 * print, write and move between MPI ranks (fp4s_compare_site, the remedy
 * site and results, fp4s_channels_report, fp4s_mm_run, fp4s_decomp_result,
 * fp4s_batch_result).
 *
 * A record type is its C struct and a table with one row per member: the
 * name the outputs use, the type, the unit and a description, where it
 * lives (offset), how many values it holds (fixed, or a count held by
 * another member: the per-channel arrays) and, for an embedded struct, its
 * type. Serialization, deserialization and freeing walk the table, so a
 * record crosses an MPI exchange as bytes of its own format, never as raw
 * struct bytes with pointers patched by hand; the renderers of the tools
 * (table, JSON, CSV, HDF5) walk the same rows. A member left out of the
 * table is caught by the test that fills every byte of each struct and
 * round-trips it (tests/core/test_record.c).
 *
 * Experimental API: not included by <fp4scope/fp4scope.h>; the tables and
 * these structs may change between releases (libfp4scope(3)). */
#ifndef FP4SCOPE_RECORD_H
#define FP4SCOPE_RECORD_H

#include <fp4scope/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_ftype {
    FP4S_FT_F64,      /* double (NaN and Inf: JSON null, an empty CSV cell) */
    FP4S_FT_SIZE,     /* size_t: a count */
    FP4S_FT_U64,      /* uint64_t */
    FP4S_FT_I64,      /* int64_t */
    FP4S_FT_U32,      /* uint32_t (reserved words among them) */
    FP4S_FT_U16,      /* uint16_t */
    FP4S_FT_ENUM,     /* an enum (int-sized) */
    FP4S_FT_BOOL,     /* bool */
    FP4S_FT_CHARS,    /* char[count]: a fixed buffer holding a string */
    FP4S_FT_STR,      /* char *: a malloc'ed string or NULL (count 1) */
    FP4S_FT_PTR_F64,  /* double *: malloc'ed, count_of * count_mul entries, or NULL */
    FP4S_FT_PTR_SIZE, /* size_t *: the same */
    FP4S_FT_PTR_STR,  /* char **: malloc'ed array of malloc'ed strings, count_of entries, or NULL */
    FP4S_FT_PTR_STRUCT, /* a malloc'ed array of structs of type `sub`, count_of entries, or NULL */
    FP4S_FT_STRUCT,   /* an embedded struct of type `sub` (count of them) */
    FP4S_FT_CPTR      /* a pointer the record does not own (static data): not serialized, NULL after */
} fp4s_ftype;

/* Flags of a row. */
#define FP4S_FF_OUTPUT 1u /* an output field: the renderers show it (the rest are internal) */

typedef struct fp4s_rtype fp4s_rtype;

typedef struct fp4s_rfield {
    const char *name;       /* as the outputs name it */
    fp4s_ftype type;
    size_t offset;          /* of the member in the struct */
    size_t count;           /* values held in place (fixed arrays); 1 for a scalar */
    ptrdiff_t count_of;     /* PTR types: offset of the size_t member that counts them (its row
                             * comes earlier in the table) */
    size_t count_mul;       /* ... times this (ch_contrib: k * FP4S_CMP_COUNT) */
    const fp4s_rtype *(*sub)(void); /* STRUCT, PTR_STRUCT: the type of the struct (its function) */
    unsigned flags;         /* FP4S_FF_* */
    const char *unit;       /* "" when none; "1" for a ratio; "s", "FLOPs", "bytes", "bits", ... */
    const char *desc;
    ptrdiff_t count_of2;    /* PTR types: a second count member the first is multiplied by (-1: none) */
} fp4s_rfield;

struct fp4s_rtype {
    const char *name;       /* "compare_site", "remedy_result", ... */
    size_t size;            /* sizeof the struct */
    const fp4s_rfield *fields;
    size_t nfields;
};

/* Rows of a table, for a module's records.c: a scalar member, a fixed array
 * of n, a heap array counted by member cnt (times mul), an embedded struct
 * of type st (its function), the reserved words; and the type's function. */
#define FP4S_RF(T, m, ty, fl, u, d) {#m, ty, offsetof(T, m), 1, -1, 0, NULL, fl, u, d, -1}
#define FP4S_RF_ARR(T, m, ty, n, fl, u, d) {#m, ty, offsetof(T, m), n, -1, 0, NULL, fl, u, d, -1}
#define FP4S_RF_PTR(T, m, ty, cnt, mul, fl, u, d) \
    {#m, ty, offsetof(T, m), 1, offsetof(T, cnt), mul, NULL, fl, u, d, -1}
#define FP4S_RF_SUB(T, m, st, fl, d) {#m, FP4S_FT_STRUCT, offsetof(T, m), 1, -1, 0, st, fl, "", d, -1}
#define FP4S_RF_PTR_SUB(T, m, cnt, st, fl, d) \
    {#m, FP4S_FT_PTR_STRUCT, offsetof(T, m), 1, offsetof(T, cnt), 1, st, fl, "", d, -1}
#define FP4S_RF_RESERVED(T, n) \
    {"reserved", FP4S_FT_U32, offsetof(T, reserved), n, -1, 0, NULL, 0, "", "zero; room for fields added later", -1}
#define FP4S_RTYPE_DEFINE(fn, T, tname, rows) \
    const fp4s_rtype *fn(void) \
    { \
        static const fp4s_rtype t = {tname, sizeof(T), rows, sizeof rows / sizeof rows[0]}; \
        return &t; \
    }

/* The record types. */
FP4S_API const fp4s_rtype *fp4s_rtype_decomp_result(void);
FP4S_API const fp4s_rtype *fp4s_rtype_compare_site(void);
FP4S_API const fp4s_rtype *fp4s_rtype_remedy(void);
FP4S_API const fp4s_rtype *fp4s_rtype_remedy_cost(void);
FP4S_API const fp4s_rtype *fp4s_rtype_remedy_time(void);
FP4S_API const fp4s_rtype *fp4s_rtype_remedy_site(void);
FP4S_API const fp4s_rtype *fp4s_rtype_remedy_result(void);
FP4S_API const fp4s_rtype *fp4s_rtype_channel_stat(void);
FP4S_API const fp4s_rtype *fp4s_rtype_mm_metrics(void);
FP4S_API const fp4s_rtype *fp4s_rtype_mm_run(void);
FP4S_API const fp4s_rtype *fp4s_rtype_batch_result(void);

/* A growable byte buffer (zero-initialise; free(b->p) when done). */
typedef struct fp4s_buf {
    unsigned char *p;
    size_t n, cap;
} fp4s_buf;

/* Append n bytes to b: 0 or FP4S_ENOMEM. */
FP4S_API int fp4s_buf_put(fp4s_buf *b, const void *src, size_t n);

/* Append record `rec` of type t to b: every row in table order, arrays with
 * their length. 0 or FP4S_ENOMEM. */
FP4S_API int fp4s_record_put(fp4s_buf *b, const fp4s_rtype *t, const void *rec);
/* Read one record of type t from *p (end: the buffer's end) into rec (every
 * byte set: members the table has, zero elsewhere; arrays malloc'ed), and
 * advance *p. FP4S_EFORMAT for a truncated or malformed record (rec then
 * holds nothing to free). */
FP4S_API int fp4s_record_get(const unsigned char **p, const unsigned char *end, const fp4s_rtype *t, void *rec);
/* Free what a record owns (its strings and arrays, those of embedded
 * records) and set those pointers to NULL. */
FP4S_API void fp4s_record_free(const fp4s_rtype *t, void *rec);

/* The value of scalar row f of rec as a double (index i of a fixed or heap
 * array; counts and enums converted; NaN for a string or an absent array). */
FP4S_API double fp4s_record_value(const fp4s_rfield *f, const void *rec, size_t i);
/* The number of values row f holds in rec (count, or the heap array's length). */
FP4S_API size_t fp4s_record_count(const fp4s_rfield *f, const void *rec);
/* Row `name` of t, or NULL. */
FP4S_API const fp4s_rfield *fp4s_record_field(const fp4s_rtype *t, const char *name);

#ifdef __cplusplus
}
#endif
#endif
