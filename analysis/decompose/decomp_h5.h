/* Internal HDF5 helper shared by the report writers (not installed). */
#ifndef FP4S_DECOMP_H5_H
#define FP4S_DECOMP_H5_H
#include <hdf5.h>
#include <stddef.h>
/* Write a 1-D dataset of n elements at name (intermediate groups created). */
int fp4s_decomp_h5_dset(hid_t loc, const char *name, hid_t mem_type, hid_t file_type,
                        const void *data, size_t n);
#endif
