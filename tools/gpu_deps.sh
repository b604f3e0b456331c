#!/usr/bin/env bash
# Fetches the Debian packages that the GPU build and checks need and a GPU machine lacks into one
# folder (default .gpu-deps, ignored by git), as .deb files: OpenBLAS (OpenMP build), FFTW and
# GoogleTest, with the runtime libraries OpenBLAS needs (libgfortran5, libquadmath0). make
# gpu-check unpacks them into its build folder (CMake option CONVCORE_DEPS_PREFIX) on the GPU
# machine, which has no network. Run on a Debian/Ubuntu machine with network access.
#   tools/gpu_deps.sh [FOLDER]
set -euo pipefail

DEPS_DIR=${1:-.gpu-deps}
MAX_MIB=30
PACKAGES=(
  libopenblas0-openmp libopenblas-openmp-dev   # cblas.h, libopenblas.so (OpenMP threads)
  libgfortran5 libquadmath0                    # what libopenblas.so.0 loads
  libfftw3-single3 libfftw3-double3 libfftw3-dev
  libgtest-dev libgmock-dev                    # static libgtest + its CMake config
)

mkdir -p "$DEPS_DIR/debs"
cd "$DEPS_DIR/debs"
rm -f ./*.deb
# apt-get download needs the package lists; fetch them only when a package is unknown.
if ! apt-cache show "${PACKAGES[@]}" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt-get update -q; else sudo apt-get update -q; fi
fi
# As root, apt's download sandbox user (_apt) cannot write here: download as the caller.
apt-get download -q -o APT::Sandbox::User="$(id -un)" "${PACKAGES[@]}"

{
  echo "# Debian packages for make gpu-check (fetched $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"))"
  for deb in ./*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" "$(sha256sum "$deb" | cut -d' ' -f1)"
  done
} > ../MANIFEST
cd ..
kib=$(du -sk . | cut -f1)
echo "$DEPS_DIR: ${#PACKAGES[@]} packages, $((kib / 1024)) MiB ($kib KiB)"
if [ "$kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "error: $DEPS_DIR is over $MAX_MIB MiB" >&2
  exit 1
fi
