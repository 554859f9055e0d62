/* Helpers of the tests (and benchmarks) that make capture files by hand or
 * compare two listings of one. Include after <hdf5.h>; capture_same_listing
 * is defined where <fp4scope/capture.h> and check_main.h come first. */
#ifndef FP4S_TESTS_CAPTURE_TEST_H
#define FP4S_TESTS_CAPTURE_TEST_H

#include <stdbool.h>
#include <string.h>

/* The root attribute fp4scope_schema = v on file f, written by HDF5 itself
 * (not through the library under test): a fixed-length string, ASCII and
 * null-terminated, or with utf8 as h5py writes np.bytes_ with an explicit
 * UTF-8 type (null-padded). */
static inline void capture_put_schema(hid_t f, const char *v, bool utf8)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v));
    if (utf8) {
        H5Tset_cset(t, H5T_CSET_UTF8);
        H5Tset_strpad(t, H5T_STR_NULLPAD);
    }
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "fp4scope_schema", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, v);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

#if defined(FP4S_TESTS_CHECK_MAIN_H) && defined(FP4SCOPE_CAPTURE_H)
/* Listing e1[n1] names the same datasets with the same shapes as e0[n0]
 * (fp4s_capture_list, before and after); frees both. */
static inline void capture_same_listing(fp4s_capture_entry *e0, size_t n0, fp4s_capture_entry *e1, size_t n1)
{
    ck_assert_uint_eq(n1, n0);
    for (size_t i = 0; i < n0; i++) {
        ck_assert_str_eq(e1[i].path, e0[i].path);
        ck_assert_uint_eq(e1[i].rows, e0[i].rows);
        ck_assert_uint_eq(e1[i].cols, e0[i].cols);
    }
    free(e0);
    free(e1);
}
#endif

#endif
