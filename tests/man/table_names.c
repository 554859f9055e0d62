/* Prints every name of the trait tables, one "KIND NAME" a line: each NVFP4
 * recipe and MXFP4 scale rule with its aliases, each profile. Read by
 * names_documented.sh, which finds each in the man pages. */
#include <fp4scope/spec.h>

#include <stdio.h>
#include <string.h>

static void print_names(const char *kind, const char *name, const char *aliases)
{
    printf("%s %s\n", kind, name);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", aliases ? aliases : "");
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
        printf("%s %s\n", kind, t);
}

int main(void)
{
    for (int i = 0; i < FP4S_NV_RECIPE_COUNT; i++) {
        const fp4s_nv_recipe_traits *t = fp4s_get_nv_recipe_traits((fp4s_nv_recipe)i);
        if (!t || !t->name) return 1;
        print_names("recipe", t->name, t->aliases);
    }
    for (int i = 0; i < FP4S_MX_RULE_COUNT; i++) {
        const fp4s_mx_rule_traits *t = fp4s_get_mx_rule_traits((fp4s_mx_rule)i);
        if (!t || !t->name) return 1;
        print_names("rule", t->name, t->aliases);
    }
    const fp4s_profile_info *p;
    for (size_t i = 0; (p = fp4s_profile_at(i)); i++) printf("profile %s\n", p->name);
    return fflush(stdout) != 0;
}
