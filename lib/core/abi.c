/* The sizes of the public structs a caller allocates, in one place: the
 * fp4s_<name>_size() functions (for bindings that mirror a struct, such as
 * the Python adapter, or allocate it blindly) and the check that each keeps
 * its size while fields are added (abi_structs.h). */
#include "abi_structs.h"

#include <fp4scope/fp4scope.h>
#include <fp4scope/outfile.h>
#include <fp4scope/rl.h>

#define FP4S_SIZE_FN(name, bytes, room) \
    size_t fp4s_##name##_size(void) { return sizeof(fp4s_##name); }
FP4S_ABI_STRUCTS(FP4S_SIZE_FN)

/* Checked on the 64-bit ABIs whose sizes the list records. */
#if defined(__x86_64__) || defined(__aarch64__)
#define FP4S_SIZE_CHECK(name, bytes, room) \
    _Static_assert(sizeof(fp4s_##name) == (bytes), \
                   "fp4s_" #name " changed size: take the new field from its reserved[] (abi_structs.h)");
FP4S_ABI_STRUCTS(FP4S_SIZE_CHECK)
#endif
