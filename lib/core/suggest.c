/* "Did you mean": the names nearest to a mistyped one (fp4scope/suggest.h). */
#include <fp4scope/suggest.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SUGGEST_MAXLEN 256 /* longer names are compared by their first 256 characters */

static int lower(int c) { return tolower((unsigned char)c); }

/* Optimal string alignment distance of a and b (case-folded), or limit + 1
 * as soon as it must exceed limit. */
static size_t osa(const char *a, size_t la, const char *b, size_t lb, size_t limit)
{
    if (la > lb + limit || lb > la + limit) return limit + 1;
    size_t rows[3][SUGGEST_MAXLEN + 1];
    size_t *pp = rows[0], *p = rows[1], *c = rows[2];
    for (size_t j = 0; j <= lb; j++) p[j] = j;
    for (size_t i = 1; i <= la; i++) {
        c[0] = i;
        size_t best = c[0];
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower(a[i - 1]) != lower(b[j - 1]);
            size_t v = p[j] + 1;
            if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
            if (p[j - 1] + cost < v) v = p[j - 1] + cost;
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]) &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
            if (v < best) best = v;
        }
        if (best > limit) return limit + 1;
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[lb];
}

static int is_sep(char c) { return c == '.' || c == '/' || c == '_' || c == '-' || c == ':' || c == '@'; }

/* word (case-folded) is a part of name starting at its beginning or after a separator */
static int part_of(const char *word, size_t lw, const char *name)
{
    for (const char *p = name; *p; p++) {
        if (p != name && !is_sep(p[-1])) continue;
        size_t k = 0;
        while (k < lw && p[k] && lower(p[k]) == lower(word[k])) k++;
        if (k == lw) return 1;
    }
    return 0;
}

typedef struct cand {
    size_t idx, score;
} cand;

static int cmp_cand(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

size_t fp4s_suggest(const char *word, const char *const *names, size_t n, size_t *out, size_t max)
{
    if (!word || !names || !out || max == 0) return 0;
    size_t lw = strlen(word);
    if (lw > SUGGEST_MAXLEN) lw = SUGGEST_MAXLEN;
    cand best[16];
    size_t nb = 0, keep = max < 16 ? max : 16;
    for (size_t i = 0; i < n; i++) {
        const char *nm = names[i];
        if (!nm || strcmp(nm, word) == 0) continue;
        size_t ln = strlen(nm);
        if (ln > SUGGEST_MAXLEN) ln = SUGGEST_MAXLEN;
        size_t longer = ln > lw ? ln : lw, limit = longer / 3;
        if (limit < 1) limit = 1;
        if (limit > 4) limit = 4;
        size_t d = osa(word, lw, nm, ln, limit), score;
        if (d <= limit) score = d;
        else if (lw >= 3 && part_of(word, lw, nm)) score = 5; /* after every near miss (distance <= 4) */
        else continue;
        cand c = {i, score};
        if (nb < keep) best[nb++] = c;
        else if (cmp_cand(&c, &best[nb - 1]) < 0) best[nb - 1] = c;
        else continue;
        qsort(best, nb, sizeof *best, cmp_cand);
    }
    for (size_t k = 0; k < nb; k++) out[k] = best[k].idx;
    return nb;
}
