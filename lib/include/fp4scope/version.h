/* fp4scope version: the one place it is defined. meson.build reads the three
 * numbers below; the soname is the major version. */
#ifndef FP4SCOPE_VERSION_H
#define FP4SCOPE_VERSION_H

#define FP4S_VERSION_MAJOR 0
#define FP4S_VERSION_MINOR 1
#define FP4S_VERSION_PATCH 0
#define FP4S_VERSION_STRING "0.1.0"

#endif
