#!/bin/sh
# Print the version defined in lib/include/fp4scope/version.h (read by meson.build).
h="$(dirname "$0")/../lib/include/fp4scope/version.h"
sed -n 's/^#define FP4S_VERSION_STRING "\(.*\)"$/\1/p' "$h"
