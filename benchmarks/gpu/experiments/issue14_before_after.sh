#!/bin/bash
# Issue 14 before/after on one H200 (device call from the repository root, carrying .whl/ with the fastcore and
# gguf wheels and gpu_run/old/ = `git archive 2de5bd0 mini_infer benchmarks`): the tree before the serving-core
# reshape and this one, alternating old/new/new/old. With the argument `profile`: a cProfile and torch.profiler
# look at batch-1 decode of both trees instead (decode_profile_batch1.py).
set -u
for w in .whl/*.whl; do python3 -m zipfile -e $w /tmp/wh; done
ROOT=$PWD
if [ "${1:-}" = profile ]; then
  for tree in old new; do
    if [ $tree = old ]; then src=$ROOT/gpu_run/old; else src=$ROOT; fi
    echo "=== $tree"; SRC=$src PYTHONPATH=$src:/tmp/wh python3 benchmarks/gpu/experiments/decode_profile_batch1.py
  done
  exit
fi
i=0
for tree in old new new old; do
  if [ $tree = old ]; then src=$ROOT/gpu_run/old; else src=$ROOT; fi
  i=$((i + 1)); mkdir -p $OUT/$i-$tree; echo "=== round $i tree $tree"
  (cd $src/benchmarks/gpu && PYTHONPATH=$src:/tmp/wh python3 throughput.py --skip-hf --out $OUT/$i-$tree)
  if [ $i -le 2 ]; then
    (cd $src/benchmarks/gpu && PYTHONPATH=$src:/tmp/wh python3 decode_latency.py --weights bf16 \
      --shapes Qwen2.5-0.5B --out $OUT/$i-$tree)
  fi
done
