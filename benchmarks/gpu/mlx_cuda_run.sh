#!/bin/bash
# On the H200, from the repository root: bash benchmarks/gpu/mlx_cuda_run.sh KIT [PHASES]   (KIT from mlx_cuda_kit.sh)
# PHASES, a comma list: setup (MLX's CUDA build into /tmp/mlxsite, the kit's sources into /tmp/mlxsrc; kept while
# the machine stays warm), check (the default device, a matrix product), self, pair, random (benchmarks/mlx_cuda.py
# --pair self / --pair 0.5b --agree / --pair 0.5b), split (benchmarks/mlx_host_split.py --kind gpu, SPLIT_ARGS),
# paired (benchmarks/mlx_pair_profile.py: ours and mlx-lm alternated run by run on the --agree pair, PAIRED_ARGS).
# LIB=full reassembles the whole stripped library from KIT/fallA and KIT/fallB (or /tmp/mlxparts, where an earlier
# call on this machine left part 1) instead of the sm_90 one. DEADLINE (580 s) bounds the whole script. BENCH_ARGS
# goes to every bench (default --tokens 128 --repeats 3 --depths 0,1,2,3 --only code,qa).
# Logs and tables go to $OUT (8 files at most).
set -u
K=$(realpath "${1:?usage: mlx_cuda_run.sh KIT [PHASES]}"); PH=,${2:-setup,check,self,pair,random},
OUT=${OUT:-/tmp/mlx-out}; mkdir -p "$OUT"; S=${MLXSITE:-/tmp/mlxsite}; SRC=/tmp/mlxsrc; PARTS=/tmp/mlxparts
T0=$(date +%s); log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/run.log"; }
want() { [[ $PH == *,$1,* ]]; }
PYV=$(python3 -c 'import sys; print(sys.version.split()[0])'); IMG=$(python3 -c 'import site; print(site.getsitepackages()[0])')
log "host $(hostname) $(nproc) cores, python3 $PYV at $(command -v python3), site $IMG"
mkdir -p $PARTS; [ -f "$K/fallA/libmlx.part1" ] && cp "$K/fallA/libmlx.part1" $PARTS/
[ -f "$K/fallB/libmlx.part2" ] && cp "$K/fallB/libmlx.part2" $PARTS/
if want setup || [ ! -f $S/mlx/lib/libmlx.so ]; then
  rm -rf $S $SRC && mkdir -p $S $SRC
  python3 -m pip install -q --no-index --no-deps --no-compile --target $S "$K"/base/mlx-*.whl "$K"/base/mlx_lm-*.whl 2>&1 | tail -3
  tar xJf "$K/base/cuda-rest.tar.xz" -C $S && tar xJf "$K/base/llama_cpp.tar.xz" -C $S && tar xzf "$K/base/src.tar.gz" -C $SRC
  if [ "${LIB:-sm90}" = full ]; then
    cat $PARTS/libmlx.part1 $PARTS/libmlx.part2 | xz -dc > $S/mlx/lib/libmlx.so
  else
    xz -dc "$K/base/libmlx.sm90.so.xz" > $S/mlx/lib/libmlx.so
  fi
  (cd $S/mlx/lib && sha256sum libmlx.so) | tee -a "$OUT/run.log"; grep libmlx "$K/base/SHA256SUMS" | tee -a "$OUT/run.log"
  ln -sfn "$IMG/nvidia" $S/nvidia
  log "setup: done ($(du -sh $S | cut -f1)); nvidia libs: $(ls $S/nvidia/ | tr '\n' ' ')"
fi
export PYTHONPATH=$SRC:$S PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
[ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
ldconfig -p | grep -q 'libgomp.so.1 ' || export LD_LIBRARY_PATH=$S/gomp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if want check; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$OUT/run.log"
  timeout 120 python3 - <<'PY' 2>&1 | tee -a "$OUT/run.log"
import os, time, mlx.core as mx, mlx_lm, numpy
N = int(os.environ.get("CHECK_N", "8192"))
print("mlx", mx.__version__, "mlx-lm", mlx_lm.__version__, "default device", mx.default_device(), "numpy", numpy.__version__)
try:
    print("device info", {k: v for k, v in mx.device_info().items() if k in ("device_name", "architecture", "memory_size")})
except Exception as e:
    print("device info:", e)
for dt in (mx.float32, mx.bfloat16):
    a = mx.random.normal((N, N)).astype(dt); mx.eval(a @ a)
    t = time.perf_counter(); [mx.eval(a @ a) for _ in range(10)]; s = (time.perf_counter() - t) / 10
    print(f"{N}^3 {dt} matmul: {2 * N**3 / s / 1e12:.1f} TFLOP/s")
x = mx.arange(10.0); print("exp/sum (a JIT kernel):", mx.sum(mx.exp(x) * 2 + 1).item())
import engine.ruler.mlx_arms, engine.runtime.mlx.options as o; print("engine:", o.runtime_version())
PY
  rc=${PIPESTATUS[0]}; log "check: exit $rc"
  [ $rc = 0 ] || exit 1
fi
BA=${BENCH_ARGS:-"--tokens 128 --repeats 3 --depths 0,1,2,3 --only code,qa"}
run_bench() {  # run_bench NAME ARGS...
  local n=$1 left=$(( ${DEADLINE:-580} - $(date +%s) + T0 - 5 )); shift
  [ $left -lt 60 ] && { log "$n: skipped, $left s left"; return; }
  log "$n ($left s left): python3 benchmarks/mlx_cuda.py $* $BA"
  (cd $SRC && timeout $(( left < ${BENCH_TIMEOUT:-280} ? left : ${BENCH_TIMEOUT:-280} )) python3 benchmarks/mlx_cuda.py "$@" $BA --models /tmp/mlxmodels-$n --out /tmp/mlxres-$n) \
    > "$OUT/$n.md" 2> /tmp/mlx-$n.err
  log "$n: exit $?"; tail -4 /tmp/mlx-$n.err | tee -a "$OUT/run.log"; cp /tmp/mlxres-$n/bench-mlx.json "$OUT/$n.json" 2>/dev/null
  grep -v '^\[' /tmp/mlx-$n.err | tail -40 >> "$OUT/errors.log"
}
want self && run_bench self --pair self
want pair && run_bench pair --pair 0.5b --agree
want random && run_bench random --pair 0.5b
if want paired; then  # each run of ours beside one of mlx-lm's, seconds apart: a ratio per pair (mlx_pair_profile.py)
  log "paired: python3 benchmarks/mlx_pair_profile.py ${PAIRED_ARGS:---depths 0,1,2,3,4 --repeats 9}"
  (cd $SRC && timeout 300 python3 benchmarks/mlx_pair_profile.py ${PAIRED_ARGS:---depths 0,1,2,3,4 --repeats 9}) > "$OUT/paired.txt" 2>&1
  log "paired: exit $?"; grep -v '^    ' "$OUT/paired.txt" | tail -24 | tee -a "$OUT/run.log"
fi
if want split; then  # where a plain reply's host time goes (benchmarks/mlx_host_split.py), the 1.5B shape
  log "split: python3 benchmarks/mlx_host_split.py --kind gpu ${SPLIT_ARGS:---tokens 128 --repeats 7}"
  (cd $SRC && timeout 300 python3 benchmarks/mlx_host_split.py --kind gpu ${SPLIT_ARGS:---tokens 128 --repeats 7}) > "$OUT/split.txt" 2>&1
  log "split: exit $?"; tail -12 "$OUT/split.txt" | tee -a "$OUT/run.log"
fi
log end
