#!/usr/bin/env bash
# demo.sh - the quick start's first command: install what is missing,
# build, and run tide's main job on 4 local ranks: first the collectives
# (a ring of messages, a barrier, an allreduce, an all-gather and a
# reduce-scatter, each checked and printed), then FSDP training checked
# step by step against one process, traced (TIDE_TRACE) into
# build/demo-trace.json for https://ui.perfetto.dev; then elastic
# training that loses a rank and goes on; then PyTorch DDP training on
# tide's torch.distributed backend, checked against Gloo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
tools/packages.sh demo python3-torch python3-numpy python3-sklearn
echo "demo: part 1 of 4, collectives on 4 ranks (tide-run), each result checked"
build/tools/tide-run -n 4 -- build/tools/tide-ring-demo
echo
echo "demo: part 2 of 4, FSDP training on 4 ranks: full_shard, checked step by step against one process"
TIDE_TRACE=build/demo-trace.json \
  build/tools/tide-run -n 4 -- build/tools/tide-fsdp-train --strategy full_shard --prefetch 2 --steps 10 --check
echo
echo "demo: a timeline of that training is in build/demo-trace.json: open it at https://ui.perfetto.dev"
echo "      (each rank's all-gathers and reduce-scatters on the reactor tracks, its compute and waits below)"
echo
echo "demo: part 3 of 4, elastic hybrid_shard training on 4 ranks: rank 2 is killed in step 4's backward;"
echo "      the other 3 shrink the job, rebuild FSDP from their replicas, redo step 4 and go on"
build/tools/tide-run --keep-going -n 4 -- build/tools/tide-fsdp-train --elastic --strategy hybrid_shard \
  --kill 2@4 --steps 10
echo
echo "demo: part 4 of 4, PyTorch DDP on 4 ranks (sklearn's digits): Gloo, then tide, same parameters"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} TIDE_LIBRARY=$PWD/build/libtide.so
build/tools/tide-run -n 4 -- /usr/bin/python3 tools/ddp_demo.py --backend gloo --save build/ddp-gloo.pt
build/tools/tide-run -n 4 -- /usr/bin/python3 tools/ddp_demo.py --backend tide --compare build/ddp-gloo.pt
