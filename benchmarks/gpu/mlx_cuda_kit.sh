#!/usr/bin/env bash
# Assemble MLX's CUDA build for the H200 under the device's 64 MiB carry: `bash benchmarks/gpu/mlx_cuda_kit.sh KIT`
# from the root of the checkout that the device tool sends (KIT git-ignored there: `echo /KIT/ >> .git/info/exclude`).
#   KIT/base   (about 23 MB) libmlx.so stripped of its symbol table with each of its 99 fatbins cut to the sm_90
#              cubin (prune_fatbin.py: 145.7 MB -> 62 MB, 15 MB xz), the rest of the mlx-cuda-13 wheel (tar.xz),
#              the mlx (cp312) and mlx-lm wheels, llama-cpp-python's package and lib (engine imports it), and
#              this branch's engine/benchmarks/tests as src.tar.gz
#   KIT/fallA, KIT/fallB  the whole stripped libmlx.so, xz, in two parts (34 MB + 35 MB): a fallback for two
#              calls in a row on one warm machine, if the pruned library will not load
# Then on the device: bash benchmarks/gpu/mlx_cuda_run.sh KIT (see docs/benchmarks/mlx_cuda.md).
set -euo pipefail
KIT=$(realpath -m "${1:?usage: mlx_cuda_kit.sh KITDIR}")
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
PY=${PY:-python3}; case $PY in */*) PY=$(realpath "$PY") ;; esac  # the script changes directory below
T=${TMPDIR:-/tmp}/mlxcuda-kit; mkdir -p "$T" "$KIT/base" "$KIT/fallA" "$KIT/fallB"
cd "$T"
[ -f mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl ] || $PY -m pip download -q --no-deps -d . 'mlx-cuda-13==0.32.4'
[ -f mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl ] || $PY -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_35_x86_64 -d . mlx==0.32.4
[ -f mlx_lm-0.32.2-py3-none-any.whl ] || $PY -m pip download -q --no-deps -d . mlx-lm==0.32.2
rm -rf x && mkdir x && (cd x && $PY -m zipfile -e ../mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl .)
strip --strip-unneeded -o libmlx.stripped.so x/mlx/lib/libmlx.so
$PY "$HERE/prune_fatbin.py" libmlx.stripped.so libmlx.sm90.so 90
xz -T0 -9 -c libmlx.sm90.so > "$KIT/base/libmlx.sm90.so.xz"
(cd x && tar cf - --exclude=mlx/lib/libmlx.so mlx mlx_cuda_13-0.32.4.dist-info mlx_cuda_13.libs) | xz -T0 -9 > "$KIT/base/cuda-rest.tar.xz"
cp mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl mlx_lm-0.32.2-py3-none-any.whl "$KIT/base/"
# llama-cpp-python as installed here (engine.runtime imports it; the ruler reads llama.cpp's system info), each
# library once, its other names as links; libgomp in case the device has none
SITE=$($PY -c 'import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parents[1])')
rm -rf lc && mkdir -p lc/gomp && cp -r "$SITE/llama_cpp" "$SITE/diskcache" lc/ && rm -rf lc/llama_cpp/server
(cd lc/llama_cpp/lib && for f in *.so; do for g in $f.*; do [ -f "$g" ] && ln -sf "$f" "$g"; done; done)
cp -L "$(ldconfig -p | awk '/libgomp.so.1 /{print $NF; exit}')" lc/gomp/libgomp.so.1
tar cJf "$KIT/base/llama_cpp.tar.xz" -C lc .
(cd "$SRC" && git ls-files -z engine benchmarks tests | xargs -0 tar czf "$KIT/base/src.tar.gz")
xz -T0 -9 -c libmlx.stripped.so > libmlx.stripped.so.xz
head -c 34000000 libmlx.stripped.so.xz > "$KIT/fallA/libmlx.part1"
tail -c +34000001 libmlx.stripped.so.xz > "$KIT/fallB/libmlx.part2"
sha256sum libmlx.stripped.so libmlx.sm90.so | tee "$KIT/base/SHA256SUMS"
du -b "$KIT"/*/* | sort -n
