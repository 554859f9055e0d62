/* fp4-remedy's text output: one table per site and, over several sites, the
 * table of every remedy pooled over them (man/fp4-remedy.1, OUTPUT). */
#ifndef FP4S_TOOLS_REMEDY_TABLE_H
#define FP4S_TOOLS_REMEDY_TABLE_H

#include <fp4scope/remedy.h>

#include <stdbool.h>
#include <stdint.h>

/* One evaluated site. */
typedef struct site_run {
    char *label;        /* the input as the user named it */
    char *site;         /* capture site or NULL */
    int64_t step;
    bool synthetic;
    fp4s_remedy_site info;
    fp4s_remedy_result *res;
} site_run;

void remedy_table_site(const site_run *s, size_t nr);
/* Every remedy over the nruns sites: errors and costs pooled as sums of
 * energies, FLOPs and predicted seconds. */
void remedy_table_pooled(const site_run *runs, size_t nruns, size_t nr);

#endif
