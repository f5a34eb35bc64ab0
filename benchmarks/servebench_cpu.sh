#!/usr/bin/env bash
# servebench (PyPI) against `mini-infer serve` with the bundled SmolLM2 on loopback, at concurrency 1, 4 and 16.
# Usage: bash benchmarks/servebench_cpu.sh   (writes benchmarks/results/cpu-2core_servebench_<date>.json and .md)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PORT=${PORT:-8123}
DATE=$(date +%F)
OUT=benchmarks/results/cpu-2core_servebench_$DATE
export OMP_NUM_THREADS=2 MINI_INFER_THREADS=2 HF_HUB_OFFLINE=1
$BIN/mini-infer serve --port "$PORT" --max-num-batched-tokens 512 > "$OUT.server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 1; done
$BIN/servebench run --url "http://127.0.0.1:$PORT/v1" --model SmolLM2-135M-Instruct --concurrency 1,4,16 \
  --input-len 128 --output-len 32 --endpoint completions --ignore-eos --temperature 0 --seed 0 --no-gpu \
  --num-requests 32 --warmup 2 --label mini_infer-cpu --out "$OUT.json" 2>&1 | tee "$OUT.txt"
$BIN/servebench report "$OUT.json" --out "$OUT.md"
