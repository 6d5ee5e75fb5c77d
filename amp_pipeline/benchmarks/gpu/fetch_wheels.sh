#!/usr/bin/env bash
# Fetches, here, the wheels benchmarks/gpu/run.sh installs on the device machine (Python 3.12
# there; it has JAX, numpy, absl-py, h5py, ml-dtypes and rich, not Keras): into .whl/, which
# .git/info/exclude keeps out of git and the device tool's `carry` takes along.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
KERAS=$(grep -i '^keras==' requirements.lock)
pip=(python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 -d .whl)
"${pip[@]}" "$KERAS" namex optree
ls -l .whl
