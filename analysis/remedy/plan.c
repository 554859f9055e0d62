/* --plan: one remedy per site minimising the summed predicted mismatch
 * within an extra-FLOP budget (remedy.h, fp4-remedy(1)). A multiple-choice
 * knapsack solved by the greedy over each site's lower convex hull. */
#include "remedy_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pt {
    size_t c;
    double cost, err;
} pt;

static int cmp_pt(const void *a, const void *b)
{
    const pt *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->err != y->err) return x->err < y->err ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

typedef struct up {
    size_t site, step;      /* upgrade from hull point step to step + 1 */
    double dc, de, slope;
} up;

static int cmp_up(const void *a, const void *b)
{
    const up *x = a, *y = b;
    if (x->slope != y->slope) return x->slope < y->slope ? -1 : 1;
    if (x->site != y->site) return x->site < y->site ? -1 : 1;
    return (x->step > y->step) - (x->step < y->step);
}

int fp4s_remedy_plan(const fp4s_plan_item *items, size_t nsites, size_t ncand, double budget, size_t *choice,
                     double *err_total, double *cost_total)
{
    if (!items || !choice || nsites == 0 || ncand == 0)
        return fp4s_error_set(FP4S_EINVAL, "plan: nothing to plan");
    if (!(budget >= 0)) return fp4s_error_set(FP4S_ERANGE, "plan: the budget must be >= 0");
    pt **hull = calloc(nsites, sizeof *hull);
    size_t *nh = calloc(nsites, sizeof *nh), *at = calloc(nsites, sizeof *at);
    pt *tmp = malloc(ncand * sizeof *tmp);
    up *ups = malloc((nsites * ncand + 1) * sizeof *ups);
    int rc = 0;
    if (!hull || !nh || !at || !tmp || !ups) {
        rc = fp4s_error_set(FP4S_ENOMEM, "plan: out of memory");
        goto done;
    }
    double spent = 0;
    size_t nup = 0;
    for (size_t s = 0; s < nsites; s++) {
        size_t n = 0;
        for (size_t c = 0; c < ncand; c++) {
            const fp4s_plan_item *it = &items[s * ncand + c];
            if (it->ok && isfinite(it->cost) && isfinite(it->err)) tmp[n++] = (pt){c, it->cost, it->err};
        }
        if (n == 0) {
            rc = fp4s_error_set(FP4S_EINVAL, "plan: site %zu has no candidate", s);
            goto done;
        }
        qsort(tmp, n, sizeof *tmp, cmp_pt);
        hull[s] = malloc(n * sizeof **hull);
        if (!hull[s]) {
            rc = fp4s_error_set(FP4S_ENOMEM, "plan: out of memory");
            goto done;
        }
        /* lower-left convex hull: strictly decreasing error, convex */
        size_t h = 0;
        for (size_t i = 0; i < n; i++) {
            if (h && tmp[i].err >= hull[s][h - 1].err) continue;
            if (h && tmp[i].cost == hull[s][h - 1].cost) h--; /* same cost, lower error */
            while (h >= 2) {
                pt *a = &hull[s][h - 2], *b = &hull[s][h - 1];
                /* b is above the segment a -> tmp[i]: drop it */
                double lhs = (b->err - a->err) * (tmp[i].cost - a->cost);
                double rhs = (tmp[i].err - a->err) * (b->cost - a->cost);
                if (lhs >= rhs) h--;
                else break;
            }
            hull[s][h++] = tmp[i];
        }
        nh[s] = h;
        spent += hull[s][0].cost;
        for (size_t i = 0; i + 1 < h; i++) {
            double dc = hull[s][i + 1].cost - hull[s][i].cost, de = hull[s][i + 1].err - hull[s][i].err;
            ups[nup++] = (up){s, i, dc, de, de / dc};
        }
    }
    if (spent > budget * (1 + 1e-12)) {
        rc = fp4s_error_set(FP4S_ERANGE, "plan: the cheapest choice per site already costs %.6g extra FLOPs, "
                            "above the budget of %.6g", spent, budget);
        goto done;
    }
    qsort(ups, nup, sizeof *ups, cmp_up);
    bool *frozen = calloc(nsites, sizeof *frozen);
    if (!frozen) {
        rc = fp4s_error_set(FP4S_ENOMEM, "plan: out of memory");
        goto done;
    }
    for (size_t u = 0; u < nup; u++) {
        up *p = &ups[u];
        if (frozen[p->site] || at[p->site] != p->step) continue;
        if (spent + p->dc > budget * (1 + 1e-12)) {
            frozen[p->site] = true;
            continue;
        }
        spent += p->dc;
        at[p->site]++;
    }
    free(frozen);
    double et = 0, ct = 0;
    for (size_t s = 0; s < nsites; s++) {
        choice[s] = hull[s][at[s]].c;
        et += hull[s][at[s]].err;
        ct += hull[s][at[s]].cost;
    }
    if (err_total) *err_total = et;
    if (cost_total) *cost_total = ct;
done:
    if (hull)
        for (size_t s = 0; s < nsites; s++) free(hull[s]);
    free(hull);
    free(nh);
    free(at);
    free(tmp);
    free(ups);
    return rc;
}
