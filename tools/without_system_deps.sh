#!/usr/bin/env bash
# Runs a command with the system's OpenBLAS, FFTW, GoogleTest and libgfortran hidden, as on a
# GPU machine that lacks them: in a private mount namespace (root, util-linux unshare), their
# folders are covered by empty tmpfs mounts and their files by /dev/null. Tests that a build
# with CONVCORE_DEPS_PREFIX uses only make gpu-deps' packages, e.g.
#   tools/without_system_deps.sh make gpu-check DRY_RUN=1
set -euo pipefail
if [ "${1:-}" != "--inside" ]; then
  exec unshare --mount --propagation private "$0" --inside "$@"
fi
shift
lib=/usr/lib/x86_64-linux-gnu
for dir in /usr/include/x86_64-linux-gnu/openblas-openmp $lib/openblas-openmp /usr/include/openblas \
           $lib/cmake/GTest $lib/cmake/openblas /usr/include/gtest /usr/include/gmock /usr/src/googletest; do
  [ -d "$dir" ] && mount -t tmpfs none "$dir"
done
for file in /usr/include/fftw3* $lib/libfftw3* $lib/libgtest* $lib/libgmock* $lib/libopenblas* \
            $lib/libblas.so* $lib/liblapack.so* $lib/libgfortran.so* $lib/libquadmath.so*; do
  [ -e "$file" ] || [ -L "$file" ] || continue
  [ -e "$file" ] && mount --bind /dev/null "$file"
done
echo "== hidden: Debian's OpenBLAS, FFTW, GoogleTest, libgfortran, libquadmath" >&2
exec "$@"
