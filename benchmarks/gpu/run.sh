#!/bin/bash
# On a CUDA machine, from the project root, after benchmarks/gpu/make_kit.sh made .gpu-kit/ here:
#   bash benchmarks/gpu/run.sh PHASES       PHASES: comma list of build,models,load,exact,rows,steps,ours,split,ab,tuner,ruler,pack
# build: stock llama.cpp with CUDA from the pinned source into /tmp/llb (about 5 minutes on 16 cores; reused
# while the machine stays up); models: zero-weight copies of the default pair and of a 7B-class target, token 0
# every model's greedy choice; rows: llama-bench's row costs; ours: our engine alone, c against c_floor and
# Python's share per depth; ruler: ours against llama-server, interleaved. Results in $OUT (default /tmp/gpu-out).
set -u
KIT=$(pwd)/.gpu-kit
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
B=/tmp/llb; SRC=/tmp/llsrc; M=/tmp/models
PHASES=,${1:-build,models,load,exact,rows,ours,tuner,ruler},
DEADLINE=${DEADLINE:-580}
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/run.log"; }
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
want() { [[ $PHASES == *,$1,* ]] || return 1; [ "$(left)" -ge "$2" ] || { log "$1: skipped, $(left) s left"; return 1; }; log "$1"; }
export PYTHONPATH=$(pwd):$KIT/py LLAMA_CPP_LIB_PATH=$B/bin PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MODELS=$M LLAMA_BIN=$B/bin
command -v nvcc > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | tee -a "$OUT/run.log"

if want build 0; then
  TARGETS=${BUILD_TARGETS:-llama-server llama-bench}  # the ruler needs llama-server; rows, llama-bench
  if [ ! -d $B/bin ] && ls "$KIT"/build/llb.txz.* > /dev/null 2>&1; then  # a build an earlier call packed
    mkdir -p $B/bin && cat "$KIT"/build/llb.txz.* | xz -dc | tar xf - -C $B/bin && log "build: unpacked from the kit"
  fi
  if (cd $B/bin 2> /dev/null && ls $TARGETS > /dev/null 2>&1); then log "build: reusing $B"; else
    rm -rf $SRC && mkdir -p $SRC && tar xJf "$KIT/llama.cpp-src.tar.xz" -C $SRC
    cmake -S $SRC/src -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_BUILD_APP=OFF > "$OUT/build.log" 2>&1 || { log "configure failed"; tail -20 "$OUT/build.log"; exit 1; }
    cmake --build $B -j"$(nproc)" --target $TARGETS >> "$OUT/build.log" 2>&1 \
      || { log "build failed"; grep -m5 -i error "$OUT/build.log"; exit 1; }
    log "build: done"
  fi
fi

if want models 30; then
  mkdir -p $M
  for n in target drafter target7b; do
    xz -dc "$KIT/hdr/$n.hdr.xz" > $M/$n.hdr
    python3 "$HERE/patch_models.py" $M/$n.hdr "$(cat "$KIT/hdr/$n.size")" $M/$n.gguf | tee -a "$OUT/run.log"
  done
fi

if want load 20; then  # which import order loads a model on CUDA: numpy first, llama_cpp first, the engine first
  L="l.llama_backend_init(); m = l.llama_model_load_from_file(b'$M/target.gguf', l.llama_model_default_params())"
  for first in "import numpy; import llama_cpp.llama_cpp as l" "import llama_cpp.llama_cpp as l; import numpy" \
      "import jinja2; import llama_cpp.llama_cpp as l"; do
    python3 -c "$first; $L; print('loaded')" > /dev/null 2>&1; echo "load after '$first': exit $?" | tee -a "$OUT/run.log"
  done
  python3 -c "from engine.runtime import Model, RuntimeOptions; Model('$M/target.gguf', RuntimeOptions())" > /dev/null 2>&1
  echo "load with the engine imported first: exit $?" | tee -a "$OUT/run.log"
fi

if want exact 60; then
  python3 "$HERE/make_random_model.py" $M/random.gguf && timeout $(( $(left) - 5 )) python3 "$HERE/measure.py" exact $M/random.gguf 2>> "$OUT/exact.err" | tee "$OUT/exact.md"
fi

if want rows 60; then
  LB="$B/bin/llama-bench -ngl 99 -fa 1 -r 5 -o jsonl -ctk q8_0 -ctv q8_0 -d 256"
  { for t in target target7b; do $LB -m $M/$t.gguf -p 0 -n 64; $LB -m $M/$t.gguf -p 2,3,4,5,6 -n 0; done
    $LB -m $M/drafter.gguf -p 0 -n 64; } > "$OUT/rows.jsonl" 2> "$OUT/rows.err"
  for pair in small 7b; do python3 "$HERE/measure.py" floor "$OUT/rows.jsonl" $pair | tee -a "$OUT/run.log"; done
fi

if want steps 40; then  # a one-row step taken apart: llama.cpp alone, its sampler, the engine's decode, the copy
  timeout $(( $(left) - 5 )) python3 "$HERE/steps.py" 2>> "$OUT/steps.err" | tee "$OUT/steps.md"
fi

if want ours 60; then
  for pair in small 7b; do
    timeout $(( $(left) - 5 )) python3 "$HERE/measure.py" ours $pair ${OURS_ARGS:-} 2>> "$OUT/ours.err" | tee -a "$OUT/ours.md"
  done
fi

if want split 60; then  # where a round's Python goes, by phase
  for pair in small 7b; do
    timeout $(( $(left) - 5 )) python3 "$HERE/python_split.py" $pair 2>> "$OUT/split.err" | tee -a "$OUT/split.md"
  done
fi

if want ab 60; then  # the device's normalisers and the guess's held row, on and off, interleaved
  for pair in small 7b; do
    timeout $(( $(left) - 5 )) python3 "$HERE/normaliser_ab.py" $pair ${AB_REPEATS:-5} ${AB_MODE:-} 2>> "$OUT/ab.err" | tee -a "$OUT/ab.md"
  done
fi

if want tuner 60; then
  for pair in ${TUNER_PAIRS:-7b small}; do
    timeout $(( $(left) - 5 )) python3 "$HERE/measure.py" tuner $pair 2>> "$OUT/ours.err" | tee -a "$OUT/tuner.md"
  done
fi

if want ruler 60; then
  for pair in small 7b; do
    timeout $(( $(left) - 5 )) python3 "$HERE/measure.py" ruler $pair /tmp/ruler-$pair ${RULER_ARGS:-} 2>> "$OUT/ruler.err" | tee -a "$OUT/ruler.md"
  done
fi
if want pack 30; then  # the build, for .gpu-kit/build/ here: a later call (a fresh machine) skips the build
  (cd $B/bin && tar cf - $(ls | grep -E '\.so|^llama-(bench|server)$') | xz -T0 -2 | split -b 15M - "$OUT/llb.txz.")
  log "pack: $(ls "$OUT"/llb.txz.* | wc -l) pieces in $OUT; copy them to .gpu-kit/build/"
fi
log "end"
