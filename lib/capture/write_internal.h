/* The capture writer's state, shared by its two files (internal): write.c
 * (create, open for append, the two-phase commit, flush, close, abort) and
 * write_put.c (names, step groups, the dataset cache, puts, attributes). */
#ifndef FP4S_CAPTURE_WRITE_INTERNAL_H
#define FP4S_CAPTURE_WRITE_INTERNAL_H

#include "h5util.h"

/* Open datasets kept between puts (closed at each flush), by path. */
typedef struct dslot {
    char *path;    /* NULL = empty */
    hid_t d;
    size_t rows, cols;
    size_t rows0;  /* rows when opened in this flush interval (fp4s_capture_abort cuts back to it) */
    fp4s_dtype dt;
} dslot;

/* Objects created since the last flush, not yet linked into the file: the
 * groups of new steps (anonymous until the flush commits them) and new
 * constant weights. Also steps that existed and were reopened to append. */
typedef struct pend {
    int64_t step;     /* >= 0: a step group; FP4S_CAPTURE_CONST_STEP: /weights/<name> */
    char name[256];
    hid_t obj;
    bool anon;        /* created in this flush interval: link at commit */
} pend;

struct fp4s_capture {
    hid_t file;
    fp4s_wlock lock;  /* the writer lock, held from before create/open until close */
    char *path;
    fp4s_capture_opts opts;
    dslot *slots;
    size_t nslots, used;
    pend *pend;
    size_t npend, cappend;
    /* links made since the last flush inside steps that were already linked
     * (a new site or dataset in an old step): fp4s_capture_abort removes them */
    char **made;
    size_t nmade, capmade;
};

/* write.c */
int capw_write_failed(fp4s_capture *c, const char *what); /* an HDF5 write error since the last check */
int capw_made_add(fp4s_capture *c, const char *path);     /* a link in an old step: abort removes it */
int capw_pend_add(fp4s_capture *c, int64_t step, const char *name, hid_t obj, bool anon);

/* write_put.c: the open datasets, by path */
dslot *capw_slot_find(fp4s_capture *c, const char *path);
int capw_slot_add(fp4s_capture *c, const char *path, hid_t d, size_t rows, size_t cols, fp4s_dtype dt,
                  dslot **out);
int capw_slots_close(fp4s_capture *c); /* every open dataset closed (at each flush) */

#endif
