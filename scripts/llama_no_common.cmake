# Passed as CMAKE_PROJECT_INCLUDE by scripts/install_llama.sh: read after every project() call.
# llama-cpp-python forces llama.cpp's "common" library on (argument parsing, chat templates,
# speculative decoding for llama.cpp's own tools), but its Python package never loads it, and it
# is most of the compile (about 12 minutes of both cores with it, 5 CPU-minutes without).
# Turning it off inside llama.cpp's own project scope is the one place the parent's FORCE cannot
# undo.
if(PROJECT_NAME STREQUAL "llama.cpp")
    set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
endif()
