/* Hash maps of the trace and log readers (internal): names (run names,
 * column names) to indices, and int64 keys (steps) to indices, by open
 * addressing at load <= 1/2, so that every lookup of a long trace or log is
 * O(1) whatever the number of steps, runs or columns. */
#include "mm_internal.h"

#include <stdlib.h>
#include <string.h>

_Thread_local uint64_t mm_work; /* per thread: readers on several threads do not race on it */

/* For the unit test (not exported from the shared library). */
uint64_t fp4s_mm_work_internal(void);
uint64_t fp4s_mm_work_internal(void) { return mm_work; } /* of the calling thread */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, then mixed */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return mm_mix64(h ^ n);
}

/* ---- names ----------------------------------------------------------------------------- */
long mm_strmap_get(const mm_strmap *m, const char *key, size_t len)
{
    if (!m->cap) return -1;
    uint64_t h = hash_bytes(key, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const mm_strmap_entry *e = &m->e[i];
        mm_work++;
        if (!e->key) return -1;
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) return (long)e->value;
    }
}

int mm_strmap_put(mm_strmap *m, const char *key, size_t len, size_t value)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 64;
        mm_strmap_entry *ne = calloc(nc, sizeof *ne);
        if (!ne) return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].key) continue;
            size_t j = m->e[i].hash & (nc - 1);
            while (ne[j].key) j = (j + 1) & (nc - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->cap = nc;
    }
    uint64_t h = hash_bytes(key, len);
    size_t i = h & (m->cap - 1);
    while (m->e[i].key) i = (i + 1) & (m->cap - 1);
    m->e[i] = (mm_strmap_entry){key, len, h, value};
    m->n++;
    return 0;
}

void mm_strmap_free(mm_strmap *m)
{
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* ---- int64 keys ------------------------------------------------------------------------- */
long mm_i64map_get(const mm_i64map *m, int64_t key)
{
    if (!m->cap) return -1;
    for (size_t i = mm_mix64((uint64_t)key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        mm_work++;
        if (!m->used[i]) return -1;
        if (m->key[i] == key) return (long)m->value[i];
    }
}

int mm_i64map_put(mm_i64map *m, int64_t key, size_t value)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 64;
        int64_t *nk = malloc(nc * sizeof *nk);
        size_t *nv = malloc(nc * sizeof *nv);
        uint8_t *nu = calloc(nc, 1);
        if (!nk || !nv || !nu) {
            free(nk);
            free(nv);
            free(nu);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->used[i]) continue;
            size_t j = mm_mix64((uint64_t)m->key[i]) & (nc - 1);
            while (nu[j]) j = (j + 1) & (nc - 1);
            nu[j] = 1;
            nk[j] = m->key[i];
            nv[j] = m->value[i];
        }
        free(m->key);
        free(m->value);
        free(m->used);
        m->key = nk;
        m->value = nv;
        m->used = nu;
        m->cap = nc;
    }
    size_t i = mm_mix64((uint64_t)key) & (m->cap - 1);
    while (m->used[i] && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    if (!m->used[i]) m->n++;
    m->used[i] = 1;
    m->key[i] = key;
    m->value[i] = value;
    return 0;
}

void mm_i64map_free(mm_i64map *m)
{
    free(m->key);
    free(m->value);
    free(m->used);
    memset(m, 0, sizeof *m);
}
