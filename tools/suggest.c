/* "Did you mean" messages for every tool (suggest.h). */
#include "suggest.h"

#include "cli.h"

#include <fp4scope/suggest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append printf text to buf of len bytes at *used (truncated, always terminated). */
static void add(char *buf, size_t len, size_t *used, const char *fmt, const char *a)
{
    if (*used >= len) return;
    int k = snprintf(buf + *used, len - *used, fmt, a);
    if (k > 0) *used += (size_t)k < len - *used ? (size_t)k : len - *used - 1;
}

const char *cli_did_you_mean(const char *word, const char *const *names, size_t n, char *buf, size_t len)
{
    size_t idx[CLI_SUGGEST_MAX], used = 0;
    size_t k = fp4s_suggest(word, names, n, idx, CLI_SUGGEST_MAX);
    if (len) buf[0] = '\0';
    if (!k || !len) return buf;
    add(buf, len, &used, "%s", " did you mean ");
    for (size_t i = 0; i < k; i++) {
        add(buf, len, &used, "%s", i == 0 ? "'" : (i + 1 == k ? "' or '" : "', '"));
        add(buf, len, &used, "%s", names[idx[i]]);
    }
    add(buf, len, &used, "%s", "'?");
    return buf;
}

const char *cli_name_list(const char *const *names, size_t n, size_t cap, char *buf, size_t len)
{
    size_t used = 0, shown = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < n && (cap == 0 || shown < cap); i++) {
        if (!names[i]) continue;
        add(buf, len, &used, "%s", shown ? ", " : "");
        add(buf, len, &used, "%s", names[i]);
        shown++;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += names[i] != NULL;
    if (shown < total) {
        char t[64];
        snprintf(t, sizeof t, ", ... (%zu in all)", total);
        add(buf, len, &used, "%s", t);
    }
    return buf;
}

void cli_unknown(const char *opt, const char *what, const char *word, const char *what_plural,
                 const char *const *names, size_t n)
{
    char dym[1024], list[2048];
    cli_did_you_mean(word, names, n, dym, sizeof dym);
    cli_name_list(names, n, CLI_LIST_CAP, list, sizeof list);
    cli_usage("%s%sunknown %s '%s';%s %s: %s", opt ? opt : "", opt ? ": " : "", what, word, dym, what_plural,
              list);
}

const char **cli_kind_names(fp4s_name_kind kind, size_t *n)
{
    size_t need = fp4s_names(kind, "\n", NULL, NULL, 0) + 1;
    char *all = xmalloc(need);
    fp4s_names(kind, "\n", NULL, all, need);
    size_t cap = 16, k = 0;
    const char **v = xmalloc(cap * sizeof *v);
    /* "name" or "name (alias, alias)" per line */
    for (char *sv = NULL, *line = strtok_r(all, "\n", &sv); line; line = strtok_r(NULL, "\n", &sv)) {
        for (char *p = line; *p;) {
            size_t w = strcspn(p, " (),");
            if (w) {
                if (k == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
                char *nm = xmalloc(w + 1);
                memcpy(nm, p, w);
                nm[w] = '\0';
                v[k++] = nm;
            }
            p += w;
            p += strspn(p, " (),");
        }
    }
    free(all);
    *n = k;
    return v;
}

void cli_names_free(const char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free((void *)names[i]);
    free(names);
}

const char *cli_did_you_mean_glob(const char *glob, const char *const *names, size_t n, char *buf, size_t len)
{
    size_t lit = strcspn(glob, "*?[");
    if (!glob[lit]) return cli_did_you_mean(glob, names, n, buf, len);
    if (len) buf[0] = '\0';
    if (lit == 0) return buf;
    /* a glob: its literal prefix against each name cut to about that length
     * (2 shorter to 2 longer: a letter missing or extra), the nearest cut of
     * each name kept (cuts that end a part of the name, before a separator or
     * its end, first: a tie goes to "self_attn*" rather than "self_att*"); each
     * distinct cut offered once, with the rest of the glob after it */
    char *word0 = xmalloc(lit + 1);
    memcpy(word0, glob, lit);
    word0[lit] = '\0';
    char **pre = xmalloc((n + 1) * sizeof *pre);
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        size_t ln = strlen(names[i]), m = 0, best;
        char *cut[5];
        for (int pass = 0; pass < 2; pass++)
            for (size_t l = lit > 2 ? lit - 2 : 1; l <= lit + 2 && l <= ln; l++) {
                char nx = names[i][l];
                int whole = nx == '\0' || nx == '.' || nx == '/' || nx == '_' || nx == '-' || nx == ':' || nx == '@';
                if (whole != (pass == 0)) continue;
                cut[m] = xmalloc(l + 1);
                memcpy(cut[m], names[i], l);
                cut[m][l] = '\0';
                m++;
            }
        int keep = -1;
        for (size_t q = 0; q < m && keep < 0; q++)
            if (!strcmp(cut[q], word0)) keep = -2; /* the prefix is right: the rest of the glob is not */
        if (keep == -1 && fp4s_suggest(word0, (const char *const *)cut, m, &best, 1)) keep = (int)best;
        size_t j = 0;
        while (keep >= 0 && j < np && strcmp(pre[j], cut[keep])) j++;
        for (size_t q = 0; q < m; q++)
            if ((int)q != keep || j < np) free(cut[q]);
        if (keep >= 0 && j == np) pre[np++] = cut[keep];
    }
    free(word0);
    char *word = xmalloc(lit + 1);
    memcpy(word, glob, lit);
    word[lit] = '\0';
    size_t idx[CLI_SUGGEST_MAX], used = 0;
    size_t k = fp4s_suggest(word, (const char *const *)pre, np, idx, CLI_SUGGEST_MAX);
    for (size_t i = 0; i < k; i++) {
        add(buf, len, &used, "%s", i == 0 ? " did you mean '" : (i + 1 == k ? "' or '" : "', '"));
        add(buf, len, &used, "%s", pre[idx[i]]);
        add(buf, len, &used, "%s", glob + lit);
    }
    if (k) add(buf, len, &used, "%s", "'?");
    size_t one;
    if (!k && glob[0] != '*' && fp4s_suggest(word, names, n, &one, 1)) { /* a part of a name: "*qkv*" */
        add(buf, len, &used, "%s", " did you mean '*");
        add(buf, len, &used, "%s", glob);
        add(buf, len, &used, "%s", "'?");
    }
    for (size_t i = 0; i < np; i++) free(pre[i]);
    free(pre);
    free(word);
    return buf;
}

const char *cli_sites_hint(const char *capture, const char *glob, char *buf, size_t len)
{
    if (len) buf[0] = '\0';
    if (!glob || !capture) return buf;
    fp4s_capture_entry *e = NULL;
    size_t ne = 0;
    if (fp4s_capture_list_raw(capture, &e, &ne)) {
        fp4s_error_clear();
        return buf;
    }
    const char **sites = xmalloc((ne ? ne : 1) * sizeof *sites);
    size_t ns = 0;
    bool any = false;
    for (size_t i = 0; i < ne; i++) {
        if (!strcmp(e[i].site, "logprobs")) continue;
        any |= fp4s_site_match(glob, e[i].site);
        size_t j = 0;
        while (j < ns && strcmp(sites[j], e[i].site)) j++;
        if (j == ns) sites[ns++] = e[i].site;
    }
    if (!any && ns) {
        char dym[1024], list[2048];
        cli_did_you_mean_glob(glob, sites, ns, dym, sizeof dym);
        cli_name_list(sites, ns, CLI_LIST_CAP, list, sizeof list);
        snprintf(buf, len, ";%s sites: %s", dym, list);
    }
    free(sites);
    free(e);
    return buf;
}
