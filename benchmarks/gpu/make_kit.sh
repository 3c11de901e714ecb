#!/usr/bin/env bash
# Assemble .gpu-kit/ (git-ignored, about 12 MiB) for a GPU machine that has no network: the pinned llama.cpp
# source, pruned; the pure-Python llama_cpp package of the pinned llama-cpp-python; the GGUF headers of the
# default pair (cut from the files in the model cache: `make models` first) and of a 7B-class target.
#   bash benchmarks/gpu/make_kit.sh            (from the project root)
set -euo pipefail
KIT=.gpu-kit
PY=${PY:-$(pwd)/.venv/bin/python}
MODELS=${MODELS:-$($PY -c 'from engine.models.catalog import models_dir; print(models_dir())')}
rm -rf "$KIT" && mkdir -p "$KIT/hdr" "$KIT/py"
T=$(mktemp -d)
$PY -m pip download -q --no-deps --no-binary :all: -d "$T" llama-cpp-python==0.3.36
tar xzf "$T"/llama_cpp_python-0.3.36.tar.gz -C "$T"
S="$T/llama_cpp_python-0.3.36"
mkdir -p "$T/src" && cp -r "$S/vendor/llama.cpp" "$T/src/src"
( cd "$T/src/src" && rm -rf .git docs models media gguf-py tests benches .github .devops ci conversion requirements skills \
    examples/llama.android examples/llama.swiftui )
tar cJf "$KIT/llama.cpp-src.tar.xz" -C "$T/src" src
cp -r "$S/llama_cpp" "$KIT/py/" && rm -rf "$KIT/py/llama_cpp/server"
mkdir -p "$KIT/py/llama_cpp_python-0.3.36.dist-info"
printf 'Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.36\n' > "$KIT/py/llama_cpp_python-0.3.36.dist-info/METADATA"
$PY -m pip download -q --no-deps -d "$T" diskcache==5.6.3 && (cd "$KIT/py" && $PY -m zipfile -e "$T"/diskcache-5.6.3-*.whl .)
# Headers: each file's bytes up to its tensor data (header, metadata, tensor table), and the full size.
TARGET="$MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" DRAFTER="$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
for pair in "target:$TARGET" "drafter:$DRAFTER"; do
  name=${pair%%:*} file=${pair#*:}
  start=$($PY -c "import sys; sys.path.insert(0, 'benchmarks/gpu'); from patch_models import tensor_table; print(tensor_table(__import__('pathlib').Path('$file'))[1])")
  head -c "$start" "$file" > "$KIT/hdr/$name.hdr"
  stat -c %s "$file" > "$KIT/hdr/$name.size"
done
$PY benchmarks/gpu/make_7b_header.py "$TARGET" "$KIT/hdr/target7b.hdr" > "$KIT/hdr/target7b.size"
xz -T0 -6 "$KIT"/hdr/*.hdr  # 5.7 MB each, mostly the tokenizer: 1.3 MB compressed
rm -rf "$T"
du -sh "$KIT"
