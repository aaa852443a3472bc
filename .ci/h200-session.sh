#!/usr/bin/env bash
# The GPU-host session that produced outputs/reference/h200-<date>/: GPU tests, benchmarks and
# reference sweeps, stage by stage, each under a time limit so one hang cannot eat the session.
#
#   bash .ci/h200-session.sh STAGE [STAGE ...]
#
# Through the tool library's device entry: `python .ci/device_tree.py fit` here first (what travels must fit 64 MiB),
# then after the call `python .ci/device_tree.py ingest FILES_AT` (rows and logs into outputs/reference/<GEMMLAB_REF>).
# Needs the wheels in .whl/ (../shared/gpu-host/wheels.sh .whl) and $OUT (where logs and a tarball
# of outputs/reference go). Stages: gpu_all gpu_a gpu_b core kernels hopper cutlass_bench cutlass cutlass_n8192
# cutlass_odd ladder tc tune tune_mma tune_ws tune_ws_fp16 ws_repeat ws_seeds ws_standalone ws_llama ws_nt_tests tune_ws_nt
# ws_nt_bench ws_streamk_diag fidelity_default hopper_fp8 tune_fp8
# fp8_scaled fp8_scaled_tests fp8_scaled_sweeps fp8_block fp8_block_tests ds3_fp8_block tune_fp8_block fp8_block_diag wgmma_peak mma_peak mma_quick ncu_mma pitfalls cublas counters claims fidelity timer_study
# noise_study validity negative_controls correctness exact concurrent contended energy_tests energy
# iso_smoke isolation second_job second_job_first second_job_fresh second_job_cause conduct sanitize precompile_default default_run default_run_noguard fidelity_default
# issue_path cache_roofs inputs_power workloads tuning_regret compare compare_paired decode_tests decode decode_cupti decode_ablation decode_ncu decode_v2 decode_v3 read_patterns decode_trace decode_rows_ncu fp8_ncu fp8_block_gaps fp8_block_split fp8_block_ds3_candidates ws_ncu decode_rows_tests decode_rows decode_rows_sweep decode_rows_wide decode_rows_xf16 decode_rows_frag decode_wide_ncu decode_wgmma_tests decode_wgmma decode_wgmma_quick decode_wgmma_auto decode_wgmma_experiment decode_wgmma_ncu decode_wgmma_trace decode_wgmma_dyn decode_wgmma_maps decode_wgmma_rules tune_fp8_repeat maps_top candidates34 maps_fp8_block search_tests decode_deep decode_fixed decode_fixed_quick decode_unsplit decode_unsplit_fp8 decode_unsplit_bf16 unsplit_bf16_qkv unsplit_t64 decode_default ws70b_now ws_now ds3_maps lt_fp8_any_m h200_short h200_next h100_next pinning multi_gpu
# (the last two on a host with two GPUs). One-off stages of a past session (a catch-up after a cut run: gpu_rest41,
# gpu_tail44, timer_flaky45) are gone once their logs are committed; a README row's stage is in the row's commit.
# Logs go to $OUT/logs.tgz and rows to
# $OUT/reference.tgz: only 8 files come back from $OUT.
# The device tool may hand out an H100 when an H200 is asked for: pick the stages by the card found, so a call is never
# wasted on rows that cannot back an H200 bar, e.g. (session37)
#   DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200 || echo h100)
#   if [ $DEV = h200 ]; then S="decode_unsplit"; else S="validity isolation"; fi; bash .ci/h200-session.sh $S
# Set GEMMLAB_GIT_COMMIT to the commit being measured: the tree copied to a GPU host may carry a
# stale .git, and the rows' git_commit would name that one.
set -u
[ -n "${GEMMLAB_GIT_COMMIT:-}" ] || echo "warning: GEMMLAB_GIT_COMMIT is not set: rows name whatever .git says"
# SESSION_DRY=FILE: run nothing; record each step (name, limit, command) in FILE instead (tests/test_session_plan.py
# composes every run.py command of every stage on a machine without a GPU)
[ -n "${SESSION_DRY:-}" ] || source .ci/gpu-env.sh || exit 1
: "${OUT:=/tmp/gemmlab-out}"; mkdir -p "$OUT"
LOGS=${LOGS:-/tmp/gemmlab-logs}; mkdir -p "$LOGS"
REF=outputs/reference/${GEMMLAB_REF:-h200-$(date +%Y-%m-%d)}
Q="run.progress=false"
# every default variant, square + odd + rect, every precision (the correctness reference sweep)
CORRECTNESS=(variant=default "precision=[fp64,fp32,tf32,fp16,bf16,fp8]"
  "sizes.square=[128,256,512,1024,2048,4096,8192,1000,1023,4097]"
  "sizes.shapes=[[8192,1024,1024],[1024,8192,1024],[1024,1024,8192],[4096,1,4096],[1,4096,4096],[4096,16,4096]]")

step() {  # step NAME SECONDS CMD...: run, keep the tail in the log, never stop the session
  local name=$1 secs=$2; shift 2
  # dry: the fields NUL-terminated, an ASCII record separator after the command's last
  [ -n "${SESSION_DRY:-}" ] && { printf '%s\0' "$name" "$secs" "$@" $'\x1e' >> "$SESSION_DRY"; return; }
  if [ -n "${DEADLINE:-}" ]; then  # DEADLINE=<epoch s>: no step runs past it (the command's limit)
    local left=$(( DEADLINE - $(date +%s) ))
    [ "$left" -lt "$secs" ] && secs=$left
    [ "$secs" -lt 20 ] && { echo "=== $name skipped: ${secs}s left before the deadline"; return; }
  fi
  echo "=== $name ($(date +%T), limit ${secs}s)"
  timeout "$secs" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  tail -n "${TAIL:-15}" "$LOGS/$name.log"; echo "=== $name rc=$rc"
  # after every step, so what finished comes back even if the session is cut short
  find outputs/reference -name run.log -delete 2>/dev/null  # logs are not data (nvmath's can be huge)
  # this session's folder only: the whole of outputs/reference grew past what comes back from $OUT
  # (session11c's first decode run came back without its rows)
  [ -d "$REF" ] && tar czf "$OUT/reference.tgz" "$REF" 2>/dev/null
  tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
}

# ncu_points PRECISION "ENTRIES": one launch of each entry under Nsight Compute (past the checked call and the
# reference), layout nt; ncu's text report is the log, with the warps' stall reasons per issued instruction.
# Entries "variant m n k scaling kernel-regex defines" (scaling "-": per-tensor / none; defines "-": the
# YAML's), ";" between entries
ncu_points() {
  local prec=$1 e; local -a entries; IFS=';' read -ra entries <<< "$2"
  for e in "${entries[@]}"; do set -- $e
    local -a D=(); local S="" F=()
    [ "${7:--}" != "-" ] && { D=("variant.$1.cuda.defines=$7"); S="_$(echo "$7" | tr -dc 'A-Za-z0-9_')"; }
    [ "${5:--}" != "-" ] && F=("measure.fp8_scaling=$5")
    step "ncu_${prec}_$1_m$2$S" 150 ncu --clock-control none -k "regex:$6" --launch-skip 3 -c 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
      --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
      python3 run.py variant=$1 precision=$prec "layouts=[nt]" "${F[@]}" sizes.square=[] \
      "sizes.shapes=[[$2,$3,$4]]" "${D[@]}" measure=quick "measure.baseline=[]" measure.guard_bytes=0 run.isolate=none $Q \
      hydra.run.dir=/tmp/ncu_${prec}_$1_$2
  done
}

# the GPU tests of issue 30's FP8 items, a stage of their own and the first step of their sweep's stage
# (stage 15's file: 56 tests since session25, ~215 s at session24's rate, 176 s for 46)
fp8_scaled_tests() { step gpu_fp8_scaled 540 python3 -m pytest -m gpu tests/test_gpu_fp8_scaling.py -q -rA -p no:cacheprovider; }
fp8_block_tests() { step gpu_hopper_fp8_block 360 python3 -m pytest -m gpu tests/test_gpu_hopper_fp8_block.py -q -rA -s -p no:cacheprovider; }

fp8_scaled_sweeps() {
           for mode in tensor rowcol block; do
             step fp8_scaled_$mode 360 python3 run.py "variant=[cublaslt,cutlass_fp8]" precision=fp8 sizes=llm \
               "sizes.model_names=[deepseek_v3]" "sizes.tokens=[64,1024,4096]" "layouts=[nt]" \
               measure=quick measure.fp8_scaling=$mode measure.input_scale=1000 "measure.baseline=[]" \
               run.fail_on_error=false $Q run.name=fp8_scaled_$mode hydra.run.dir=$REF/fp8_scaled/$mode
           done
}

# stage 14 (issue 30): every build of a define list at once (a sweep's jobs would compile them one by one),
# and a define sweep with the short samples decode points need (~0.1 ms each), into $REF/STEP:
#   decode_precompile STEP SECONDS "DEFINES ..."
#   decode_sweep STEP SECONDS PRECISIONS SHAPES BASELINES DEFINES
decode_precompile() {
  step "$1" "$2" bash -c 'for d in $0; do python3 -m gemmlab.bench.precompile variant=decode_splitk \
    "precision=[bf16,fp8]" "layouts=[nt]" measure.fp8_scaling=tensor sizes.square=[] "sizes.shapes=[[16,6144,4096]]" \
    "variant.decode_splitk.cuda.defines=$d" & done; wait' "$3"
}
# stage 12 at layout nt, BF16 and FP16 at 4096 / 6144 / 8192 with the libraries as points of their own in the same run,
# then BF16 on Llama-3 70B's prefill projections (4096 / 16384 tokens), cuBLAS interleaved: ws_nt_rows PREFIX
ws_nt_rows() { ws_nt_standalone "$1"; ws_nt_llama70b "$1"; }
ws_nt_standalone() {  # PREFIX [PRECISIONS]: "bf16,fp16" unless given
  step ${1}_standalone 150 python3 run.py "variant=[wgmma_ws,cublas,cublaslt]" "precision=[${2:-bf16,fp16}]" "layouts=[nt]" \
    "sizes.square=[4096,6144,8192]" sizes.shapes=[] measure=sustained measure.max_time_s=1.5 run.fail_on_error=false $Q \
    run.name=${1}_standalone hydra.run.dir=$REF/${1}_standalone
}
ws_nt_llama70b() {
  step ${1}_llama70b 200 python3 run.py "variant=[wgmma_ws]" precision=bf16 "layouts=[nt]" sizes=llm \
    "sizes.model_names=[llama3_70b]" "sizes.tokens=[4096,16384]" measure=sustained measure.max_time_s=1.5 \
    run.fail_on_error=false $Q run.name=${1}_llama70b hydra.run.dir=$REF/${1}_llama70b
}
fp8_tune() {  # NAME DEFINE_SETS: stage 13's define sets at 4096 and 8192, cuBLASLt FP8 interleaved
  step "$1" 300 python3 run.py -m variant=wgmma_fp8 precision=fp8 "layouts=[nt]" measure.fp8_scaling=tensor \
    "sizes.square=[4096,8192]" sizes.shapes=[] "measure.baseline=[cublaslt]" measure.max_time_s=1.5 $Q \
    "variant.wgmma_fp8.cuda.defines=$2" run.name=$1 hydra.sweep.dir=$REF/$1
}
# stage 17 in the decode experiment (every shape, the copy probe in the same run), the libraries beside it:
#   decode_wgmma_run PRECISION TOKENS DEFINES FOLDER [STEP]   (TOKENS "1,16,64"; DEFINES "-": the YAML's;
#   DECODE_WGMMA_OVERRIDES: more overrides for every run)
decode_wgmma_run() {
  local -a D=(); [ "$3" != "-" ] && D=("variant.decode_wgmma.cuda.defines=$3")
  step "${5:-decode_wgmma_picked_$1_t${2//,/_}}" 200 python3 run.py +experiment=decode \
    "variant=[decode_wgmma,cublas,cublaslt,copy_gpu]" "precision=[$1,fp32]" "sizes.tokens=[$2]" "${D[@]}" \
    run.fail_on_error=false $Q ${DECODE_WGMMA_OVERRIDES:-} hydra.run.dir=$4
}
# the decode experiment at {UNSPLIT:1,FIXED_SUM:1} (issue 30's candidate defaults), the copy probe in the same run
unsplit_experiment() {
  decode_wgmma_run "$1" 1,16,64 "{UNSPLIT:1,FIXED_SUM:1}" "$REF/decode_unsplit_experiment/$1" decode_unsplit_experiment_$1
}
# the decode experiment at the picks of a define sweep (PICKS: analysis.compare --pick ... --by precision,m's picks.tsv):
# per precision and token count (1, 16, 64) its pick, the YAML's defines where the file has none or no job measured the
# group ok (job -1; said in the log); one run a precision where its three agree, else a run a token count
decode_wgmma_at_picks() {
  local picks=$1 prec m v; local -A pick
  [ -f "$picks" ] || echo "=== decode_wgmma_at_picks: no $picks (the pick step failed?): every run at the YAML's defines"
  for prec in bf16 fp8; do
    for m in 1 16 64; do
      v=$([ -f "$picks" ] && awk -F'\t' -v p="$prec" -v m="$m" 'NR > 1 && $1 == p && $2 == m { print $3 "\t" $4; exit }' "$picks")
      [ "${v%%$'\t'*}" = "-1" ] && echo "=== decode_wgmma_at_picks: $prec at $m tokens: no define set measured every point ok"
      v=${v#*$'\t'}
      pick[$m]=${v:--}
    done
    if [ "${pick[1]}" = "${pick[16]}" ] && [ "${pick[1]}" = "${pick[64]}" ]; then
      decode_wgmma_run "$prec" 1,16,64 "${pick[1]}" "$REF/decode_wgmma_picked/$prec"
    else
      for m in 1 16 64; do decode_wgmma_run "$prec" "$m" "${pick[$m]}" "$REF/decode_wgmma_picked/$prec/t$m"; done
    fi
  done
}
stage_sweep() {  # VARIANT NAME SECONDS DEFINE_SETS SHAPES PRECISIONS: a decode stage's define sets, cuBLAS / cuBLASLt interleaved
  step "$2" "$3" python3 run.py -m variant=$1 "precision=$6" "layouts=[nt]" \
    measure.fp8_scaling=tensor sizes.square=[] "sizes.shapes=$5" "measure.baseline=[cublas,cublaslt]" \
    measure.max_noise=0.05 measure.warmup_s=0.2 measure.min_time_s=0.1 measure.max_time_s=0.5 \
    "variant.$1.cuda.defines=$4" run.fail_on_error=false $Q run.name=$2 hydra.sweep.dir=$REF/$2
}
rows_sweep() {  # NAME SECONDS DEFINE_SETS SHAPES [PRECISIONS]: stage 16's define sets
  stage_sweep decode_rows "$1" "$2" "$3" "$4" "${5:-$DECODE_ROWS_PRECISIONS}"
}
decode_sweep() {
  step "$1" "$2" python3 run.py -m variant=decode_splitk "precision=$3" "layouts=[nt]" measure.fp8_scaling=tensor \
    sizes.square=[] "sizes.shapes=$4" "measure.baseline=$5" measure.max_noise=0.05 measure.warmup_s=0.2 \
    measure.min_time_s=0.1 measure.max_time_s=0.5 "variant.decode_splitk.cuda.defines=$6" \
    run.fail_on_error=false $Q run.name=$1 hydra.sweep.dir=$REF/$1
}

# stage 16's define sweep (one define at a time from the YAML's defaults) and its shapes
# (the environment may narrow it: DECODE_ROWS_SWEEP="{XSHARE:0},{XSHARE:1}")
DECODE_ROWS_SWEEP=${DECODE_ROWS_SWEEP:-"{XSHARE:0},{XSHARE:1},{PREFETCH:0},{SWIZZLE:0},{W_HINT:0},{BLOCKS_SMALL:2,XSHARE:0}"}
DECODE_ROWS_PRECISIONS=${DECODE_ROWS_PRECISIONS:-"bf16,fp8"}
# issue 30: stage 16's activations staged in the CTA's tiles past 16 tokens (XS_WIDE), at 32 and 64 tokens
DECODE_WIDE_SHAPES="[[64,6144,4096],[64,8192,8192],[64,8192,28672],[64,57344,8192],[32,8192,8192]]"
DECODE_FRAG_SHAPES="[[1,57344,8192],[16,57344,8192],[64,57344,8192],[1,8192,28672],[16,8192,28672],[64,8192,28672],[1,6144,4096],[64,6144,4096]]"
# decode_wide_ncu's ncu_points entries (a define set's braces would end a ${VAR:-default} early: kept here)
DECODE_NCU_DEFAULT='decode_rows 64 8192 28672 - decode_rows -;decode_rows 64 8192 28672 - decode_rows {AFRAG:0,XPAD:0,CVT_H1:0,XS_WIDE:0};cublaslt 64 8192 28672 - ^(?!gemmlab).*(gemv|gemm|xmma|cutlass|nvjet) -'
# and XF16 2 (fp8): 1, 16 and 64 tokens (XS_WIDE changes nothing at 16 tokens or fewer: those builds repeat)
DECODE_XF16_SHAPES="[[1,57344,8192],[16,57344,8192],[16,8192,28672],[16,36864,7168],[64,57344,8192],[64,8192,28672]]"
# stage 13's define sweep (tests/test_hopper_kernels.py's FP8_SWEEP builds each; FP8_TUNE: other entries)
FP8_SWEEP='{EPI_BOXES:2,STAGES:4,EPI_TMA:1},{STAGES:4,EPI_TMA:0},{STAGES:3,EPI_TMA:0},{GROUP_M:16},{BN:128,STAGES:4},{UNIFORM_A:1,DESC_STEP:1},{STAGES:3,EPI_BOXES:0},{EPI_BOXES:1,STAGES:4},{CLUSTER_M:2,STAGES:3,EPI_BOXES:0},{CLUSTER_M:2,EPI_BOXES:2,STAGES:4},{MAP_PARAMS:0}'
# tune_fp8_repeat's sets: the defaults and the three candidates closest to 105, each twice (noise between points)
FP8_REPEAT='{STAGES:3,EPI_BOXES:0},{EPI_BOXES:2,STAGES:4,EPI_TMA:1},{CLUSTER_M:2,EPI_BOXES:2,STAGES:4},{UNIFORM_A:1,DESC_STEP:1},{STAGES:3,EPI_BOXES:0},{EPI_BOXES:2,STAGES:4,EPI_TMA:1},{CLUSTER_M:2,EPI_BOXES:2,STAGES:4},{UNIFORM_A:1,DESC_STEP:1}'
# stage 15's define sweep (tests/test_hopper_fp8_block.py's FP8_BLOCK_SWEEP builds each); FP8_BLOCK_TUNE: a subset
FP8_BLOCK_SWEEP='{PROMOTE_OVERLAP:0},{PROMOTE_OVERLAP:1},{STAGES:4},{STAGES:6,EPI_TMA:0},{BM:64,CONSUMER_REGS:240},{GROUP_M:16},{BN:64},{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1},{SCALE_SMEM:1,SCALE_WARPS:3,PROMOTE_OVERLAP:1},{SCALE_SMEM:3,PROMOTE_OVERLAP:1},{CLUSTER_M:2},{SPLIT_K:2},{SPLIT_K:4},{SPLIT_K:2,BN:64},{SCALE_READ:0},{BN:128},{BN:160},{SPLIT_TAIL:0},{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0},{UNIFORM_A:0,DESC_STEP:0},{SCALE_READ:1,DESC_STEP:0},{DESC_STEP:0},{DESC_STEP:1},{BN:256},{BN:256,SCALE_READ:1},{BN:256,CLUSTER_M:2}'
# stage 15 at moe_router (fp8_block_split): the defaults, then tests/test_hopper_fp8_block.py's MOE_ROUTER_CANDIDATES
FP8_BLOCK_SPLIT_DEFAULT='{PROMOTE_OVERLAP:0},{SPLIT_KEEP:0},{DESC_STEP:0},{STAGES:6,EPI_TMA:0},{EPI_BOXES:1,STAGES:6}'
# stage 15's diagnostic builds beside the real ones they strip (FP8_BLOCK_DIAG may replace the list)
FP8_BLOCK_DIAG_DEFAULT='{PROMOTE_OVERLAP:0},{DIAG:1},{SCALE_SMEM:0,STAGES:6},{SCALE_SMEM:0,STAGES:6,DIAG:1},{SCALE_SMEM:0,STAGES:6,DIAG:2}'
# stage 17's define sets (tests/test_decode_wgmma.py's SWEEP builds each without spills; the first is the YAML's
# defaults; L2_HINT -1 and STAGES 0 are the YAML's rules by matrix size, CONSUMERS 0 its rule by tokens and tiles
# (128-row tiles at every shape below, the second set 64-row tiles), the eighth set L2_HINT 0 everywhere, the
# fourth STAGES 4 everywhere) and its shapes: Llama-3 8B qkv and 70B mlp_down / mlp_gate_up at 1, 16 and 64 tokens (11 sets x 6 shapes x 2
# precisions: 132 points)
DECODE_WGMMA_SWEEP='{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:1,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:2,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:4,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:2,MAX_PARTS:8},{CONSUMERS:2,MSUB:2,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:3,MSUB:1,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:0,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:2,KSPAN:1,MAX_PARTS:8},{CONSUMERS:2,MSUB:2,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:2,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:4,MAX_PARTS:8}'
DECODE_WGMMA_SHAPES="[[1,6144,4096],[64,6144,4096],[16,8192,28672],[64,8192,28672],[1,57344,8192],[64,57344,8192]]"
DECODE_WGMMA_QUICK='{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:1,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:2,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:4,MAX_PARTS:8},{CONSUMERS:2,MSUB:2,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8},{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:2,KSPAN:1,MAX_PARTS:8}'
# the quick sweep's shapes: 70B mlp_down at 1, 16 and 64 tokens, 8B qkv at 1 and 64 (issue 30's 1.3x shapes)
DECODE_WGMMA_QUICK_SHAPES="[[1,8192,28672],[16,8192,28672],[64,8192,28672],[1,6144,4096],[64,6144,4096]]"
# the dynamic tail's sets (issue 30): the static split (the defaults), DYN 1 as session32 measured it (each consumer
# warpgroup counts its own pieces: slower everywhere), DYN_PUB 1 (the producer counts them) at the rule's tail, a
# longer tail in longer chunks, a short one in short chunks
DECODE_WGMMA_DYN='{},{DYN:1},{DYN:1,DYN_PUB:1},{DYN:1,DYN_PUB:1,DYN_PCT:20,DYN_CK:8},{DYN:1,DYN_PUB:1,DYN_PCT:5,DYN_CK:2}'
DECODE_WGMMA_DYN_SHAPES="[[1,8192,28672],[16,8192,28672],[64,8192,28672],[1,36864,7168],[64,36864,7168],[16,57344,8192],[1,6144,4096],[64,6144,4096]]"
# stage 17's rules by matrix size and tokens (issue 30): the defaults (L2_HINT 1 from 64 MiB of weights, 4 stages
# below 192 MiB and 8 from there, 64-row tiles past 16 tokens where 128-row ones would be fewer than 32), 128-row
# tiles everywhere (the defaults before the tiles' rule), 64-row tiles everywhere, 8 stages everywhere, and the
# defaults before all three rules, at small, middle and large matrices (and 32 / 48 tokens at 17 tiles: the tiles'
# rule between 16 and 64 tokens)
DECODE_WGMMA_RULES='{},{CONSUMERS:2},{CONSUMERS:1},{STAGES:8},{CONSUMERS:2,L2_HINT:0,STAGES:8}'
# (session34b ran it with MAP_PARAMS 0 the default; now by value is: the buffer is the set to compare)
DECODE_WGMMA_MAPS='{MAP_PARAMS:0},{},{MAP_PARAMS:0,WS_PREFETCH:1},{WS_PREFETCH:1},{WS_PREFETCH:1},{MAP_PARAMS:0,WS_PREFETCH:1},{},{MAP_PARAMS:0}'
DECODE_WGMMA_MAPS_SHAPES="[[1,6144,4096],[16,6144,4096],[64,6144,4096],[1,4096,4096],[16,4096,4096],[64,4096,4096],[16,7168,2048],[64,7168,2048],[64,2112,7168],[16,256,7168],[1,8192,28672],[64,57344,8192]]"
DECODE_WGMMA_RULES_SHAPES="[[1,6144,4096],[64,6144,4096],[16,4096,4096],[16,7168,2048],[64,2112,7168],[32,2112,7168],[48,2112,7168],[16,8192,8192],[1,4096,14336],[1,8192,28672],[16,8192,28672],[64,57344,8192],[16,36864,7168]]"
DECODE_WGMMA_NCU_DEFAULT='decode_wgmma 1 8192 28672 - decode_wgmma -;decode_wgmma 64 8192 28672 - decode_wgmma -;decode_wgmma 64 8192 28672 - decode_wgmma {PRODUCER_WG:1,MSUB:2};cublaslt 64 8192 28672 - ^(?!gemmlab).*(gemv|gemm|xmma|cutlass|nvjet) -'
DECODE_ROWS_SHAPES=${DECODE_ROWS_SHAPES:-"[[1,6144,4096],[16,6144,4096],[64,6144,4096],[1,8192,8192],[16,8192,8192],[1,57344,8192],[16,57344,8192]]"}

# DS3_NAME: the run's folder and log name (a second run with FP8_BLOCK_OVERRIDES beside the defaults' own)
fp8_block_tune() {  # NAME DEFINE_SETS SHAPES: stage 15's define sets, cuBLASLt's block-scaled kernel interleaved
  step "$1" 360 python3 run.py -m variant=wgmma_fp8_block precision=fp8 "layouts=[nt]" measure.fp8_scaling=block \
    "sizes.square=[]" "sizes.shapes=$3" "measure.baseline=[cublaslt]" measure.max_time_s=1.5 run.fail_on_error=false $Q \
    "variant.wgmma_fp8_block.cuda.defines=$2" run.name=$1 hydra.sweep.dir=$REF/$1
}
ds3_fp8_block() {
           local name="${DS3_NAME:-ds3_wgmma_fp8_block}"
           step $name 420 python3 run.py "variant=[wgmma_fp8_block,cublaslt]" precision=fp8 "layouts=[nt]" \
             measure.fp8_scaling=block sizes=llm "sizes.model_names=[deepseek_v3]" "sizes.tokens=[64,1024,4096]" \
             "measure.baseline=[cublaslt]" measure.max_time_s=1.5 run.fail_on_error=false $Q ${FP8_BLOCK_OVERRIDES:-} \
             run.name=$name hydra.run.dir=$REF/$name
}

for stage in "$@"; do case $stage in
  gpu_all) # every GPU test file in one pytest (serial: one GPU, one measurement), JUnit beside the log, a line a test
           # (-v: a run the step cuts short still names the tests that failed, session41);
           # 494 s for 181 tests on the H200 (session21c's JUnit); 302 tests since session40 (stage 17's decode file 124,
           # stage 15's 59) no longer fit one step: an H100 ran 241 of them in 575 s (session41). gpu_a + gpu_b, one call each
           step gpu_all 575 python3 -m pytest -m gpu tests -v -rA -p no:cacheprovider --junitxml="$LOGS/gpu_all.xml" ;;
  gpu_a)   # the GPU suite's first half by session21c's times scaled to today's counts (~320 s on an H200): the decode
           # stages, the timer and device core, energy, pinning, the negative controls
           step gpu_a 575 python3 -m pytest -m gpu tests/test_gpu_decode.py tests/test_gpu_core.py tests/test_gpu_energy.py \
             tests/test_gpu_pinning.py tests/test_gpu_negative_controls.py -v -rA -p no:cacheprovider \
             --junitxml="$LOGS/gpu_a.xml" ;;
  gpu_b)   # the second half (~430 s on an H200): every other GPU test file
           step gpu_b 575 python3 -m pytest -m gpu tests/test_gpu_hopper_fp8_block.py tests/test_gpu_cuda_kernels.py \
             tests/test_gpu_cutlass.py tests/test_gpu_probes.py tests/test_gpu_fp8_scaling.py tests/test_gpu_validity.py \
             tests/test_gpu_hopper_kernels.py tests/test_gpu_isolation.py tests/test_gpu_hopper_fp8.py -v -rA \
             -p no:cacheprovider --junitxml="$LOGS/gpu_b.xml" ;;
  core)    step gpu_core 240 python3 -m pytest -m gpu tests/test_gpu_core.py -q -p no:cacheprovider ;;
  fidelity) step fidelity 330 python3 -m gemmlab.bench.fidelity --rounds 5 --out "$REF/fidelity/fidelity.json" ;;
  fidelity_default)  # issue 31: the default preset (samples past max_samples where the median needs them)
           # against do_bench at 2048-8192, fp16 / bf16, cuBLAS: each round's "samples" says whether it went
           # on; the ratio's median must stay within 3% of 1
           # (the verdict is on the first timer, doing the GPU work do_bench does: its flush size, no discard, no
           # spin the flush covers; our own flush and the defaults' L2 discard beside it, whose calls run shorter
           # than do_bench's by the flush's write-back: README "How a point is measured")
           step fidelity_default 330 python3 -m gemmlab.bench.fidelity --rounds 3 --measure default \
             --sizes 2048 4096 8192 --precisions fp16 bf16 --variants cublas \
             --out "$REF/${FID_OUT:-fidelity_default}/fidelity.json" ;;
  # issue 32: stage 12 at layout nt (4096 / 6144 / 8192, BF16; its new tile orders and stream-K beside the
  # default, cuBLAS / cuBLASLt interleaved: pct_of_baseline), then BF16 and FP16 with the libraries also
  # standalone in the same run (the best standalone library), then Llama-3 70B's prefill projections at
  # 4096 and 16384 tokens
  ws_nt_bench) step ws_nt_square 240 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" \
             "sizes.square=[4096,6144,8192]" sizes.shapes=[] measure=sustained measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={RASTER:0},{RASTER:1},{RASTER:2},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0}' \
             run.name=ws_nt_square hydra.sweep.dir=$REF/ws_nt_square
           ws_nt_rows ws_nt ;;
  ws70b_now)  # issue 32's not-measured geomean alone (Llama-3 70B prefill, layout nt, stage 12 at today's defines), for a
           # call with ~3 min of device time left
           ws_nt_llama70b ws_now ;;
  ws_fp16_nt)  # issue 32's "FP16 stated": stage 12 FP16 at layout nt alone, on a GPU still cool from the decode runs
           # (session52's FP16 rows, timed after BF16's, all drifted or too noisy under the power cap), ~1 min
           ws_nt_standalone ws_fp16 fp16 ;;
  ws_now)  # issue 32: stage 12 at its YAML's defines as they are now (maps by value since session34c: the rows before ran
           # them in a buffer), layout nt: the libraries standalone beside it, then Llama-3 70B's prefill (session41)
           ws_nt_rows ws_now
           # and the ladder's stage 12 lines (nn, 8192, BF16 / FP16), the libraries interleaved and standalone
           step ws_now_nn 150 python3 run.py "variant=[wgmma_ws,cublas,cublaslt]" "precision=[bf16,fp16]" "layouts=[nn]" \
             "sizes.square=[8192]" sizes.shapes=[] measure.max_time_s=1.5 run.fail_on_error=false $Q \
             run.name=ws_now_nn hydra.run.dir=$REF/ws_now_nn ;;
  timer_study)  # which flush / spin policy agrees with do_bench, and which is quietest
           T="max_time_s=1.5"
           step timer_study 300 python3 -m gemmlab.bench.fidelity --rounds 3 --sizes 2048 4096 \
             --precisions fp16 bf16 --variants cublas \
             --timers "$T" "$T,spin=as_needed" "$T,spin=as_needed,flush_bytes=do_bench" "$T,cache=warm" \
             --out "$OUT/timer_study.json"
           step timer_study_lt 150 python3 -m gemmlab.bench.fidelity --rounds 3 --sizes 2048 4096 \
             --precisions fp16 --variants cublaslt \
             --timers "$T" "$T,spin=as_needed" "$T,spin=as_needed,flush_bytes=do_bench" "$T,cache=warm" \
             --out "$OUT/timer_study_lt.json" ;;
  noise_study)  # noise at N >= 2048: events vs CUPTI kernel spans, with and without the L2 discard
           step noise_study 330 python3 run.py -m "variant=[cublas,cublaslt]" "precision=[fp16,bf16,fp8]" \
             "sizes.square=[2048,4096]" sizes.shapes=[] measure=sustained measure.max_time_s=2.5 \
             measure.timer=events,cupti measure.flush_discard=false,true run.fail_on_error=false $Q \
             run.name=noise_study hydra.sweep.dir=$REF/noise_study
           step fidelity_cupti 300 python3 -m gemmlab.bench.fidelity --rounds 5 --measure default \
             --timers "" "timer=cupti" "flush_discard=true" "timer=cupti,flush_discard=true" \
             --out "$OUT/fidelity_cupti.json" ;;
  pinning) step gpu_pinning 300 python3 -m pytest tests/test_gpu_pinning.py -q -rA -x -p no:cacheprovider ;;
  multi_gpu) step multi_gpu 480 python3 -m gemmlab.bench.multi_gpu --out "$REF/${MG_OUT:-multi_gpu}" \
             -- variant=cublas precision=fp16,bf16,tf32,fp32 sizes=square measure=sustained ;;
  multi_gpu_cupti)  # the same check timed by CUPTI: kernel-only times and the kernels cuBLAS picked
           step multi_gpu_cupti 480 python3 -m gemmlab.bench.multi_gpu --out "$REF/${MG_OUT:-multi_gpu}_cupti" \
             -- variant=cublas precision=fp16,bf16,tf32,fp32 sizes=square measure=sustained measure.timer=cupti ;;
  kernels) step gpu_kernels 300 python3 -m pytest -m gpu tests/test_gpu_cuda_kernels.py -q -rA -p no:cacheprovider ;;
  hopper)  step gpu_hopper 300 python3 -m pytest -m gpu tests/test_gpu_hopper_kernels.py -q -rA -p no:cacheprovider ;;
  cutlass_bench) step cutlass_compile_bench 300 python3 -m gemmlab.bench.cutlass_compile --kernels 8 \
             --precision fp16,bf16 --size 8192 --out "$OUT/cutlass_compile_bench.json" ;;
  cutlass) step gpu_cutlass 420 python3 -m pytest -m gpu tests/test_gpu_cutlass.py -q -rA -p no:cacheprovider ;;
  cutlass_n8192) step cutlass_n8192 330 python3 run.py "variant=[cutlass_auto,cutlass_search,cutlass_tf32_tn]" \
             "precision=[tf32,fp16,bf16]" "sizes.square=[8192]" sizes.shapes=[] measure=sustained \
             measure.max_time_s=2 run.fail_on_error=false $Q run.name=cutlass_n8192 hydra.run.dir=$REF/cutlass_n8192 ;;
  cutlass_odd) step cutlass_odd 200 python3 run.py "variant=[cutlass_auto]" "precision=[fp64,fp32,tf32,fp16,bf16]" sizes=odd \
             run.fail_on_error=false $Q run.name=cutlass_odd hydra.run.dir=$REF/cutlass_odd ;;
  ladder)  step ladder_fp32 240 python3 run.py "variant=[tag_ladder]" \
             precision=fp32 "sizes.square=[4096]" sizes.shapes=[] $Q run.name=ladder_fp32 hydra.run.dir=$REF/ladder_fp32 ;;
  tc)      step ladder_tc 300 python3 run.py "variant=[tag_tensor_core]" \
             "precision=[fp16,bf16]" "sizes.square=[4096,8192]" sizes.shapes=[] measure=sustained \
             measure.max_time_s=2 $Q run.name=ladder_tc hydra.run.dir=$REF/ladder_tc ;;
  tune)    step tune_warp_tiled 240 python3 run.py -m variant=warp_tiled precision=fp32 "sizes.square=[4096]" sizes.shapes=[] \
             measure.max_time_s=1.5 $Q \
             'variant.warp_tiled.cuda.defines={STAGES:3},{STAGES:2},{STAGES:4},{BK:8,STAGES:4},{BK:32,STAGES:3},{WM:32,WN:64},{THREADS:128,WN:64,WNITER:4},{BN:256,WN:64,WNITER:4,MIN_BLOCKS:1}' \
             run.name=tune_warp_tiled hydra.sweep.dir=$REF/tune_warp_tiled ;;
  tune_mma) step tune_mma_sync 480 python3 run.py -m variant=mma_sync precision=bf16 "sizes.square=[8192]" sizes.shapes=[] \
             measure.max_time_s=1.5 $Q 'variant.mma_sync.cuda.defines={FRAG_PIPE:0},{FRAG_PIPE:1},{STAGES:3},{BM:256,BN:128},{BN:128,STAGES:3,MIN_BLOCKS:2},{BN:128,STAGES:3,MIN_BLOCKS:2,FRAG_PIPE:0},{BK:32,STAGES:6},{BN:128,BK:32,STAGES:6,MIN_BLOCKS:2},{BN:128,WN:32},{GROUP_M:16},{BK:32,STAGES:8},{BM:256,BN:128,STAGES:3}' \
             run.name=tune_mma_sync hydra.sweep.dir=$REF/tune_mma_sync ;;
  maps_top)  # issue 32: stages 12 (bf16, nt, 4096 / 6144 / 8192) and 13 (fp8, 4096 / 8192) with their tensor maps in
           # the device buffer (MAP_PARAMS 0) against by value (the defaults since session34c, which ran this stage
           # the other way round), A B B A, the library interleaved, sustained
           step maps_ws_nt 240 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" \
             "sizes.square=[4096,6144,8192]" sizes.shapes=[] measure=sustained measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={MAP_PARAMS:0},{},{},{MAP_PARAMS:0}' run.name=maps_ws_nt hydra.sweep.dir=$REF/maps_ws_nt
           fp8_tune maps_fp8 '{MAP_PARAMS:0},{},{},{MAP_PARAMS:0}' ;;
  candidates34)  # the thirty-fourth note's next candidates, A B B A, the libraries interleaved: stage 13's two-box epilogue
           # with a fourth stage on top of the maps by value (issue 32: 105.4 / 101.5 at 4096 / 8192 with the maps in the
           # buffer, session34c), and stage 17's 8 stages where its rule picks 64-row tiles (issue 30: +3.2 to +8.9
           # points at 2112 x 7168 on the H200, mixed in fp8 on the H100), the router too. Run in h200-2026-12-06/session40f;
           # stage 13's candidate is its default since (A spells out the defaults before)
           fp8_tune candidates34_fp8 '{STAGES:3,EPI_BOXES:0},{},{},{STAGES:3,EPI_BOXES:0}'
           stage_sweep decode_wgmma candidates34_decode 200 '{},{STAGES:8},{STAGES:8},{}' \
             "[[32,2112,7168],[48,2112,7168],[64,2112,7168],[32,256,7168],[64,256,7168]]" "bf16,fp8" ;;
  decode_deep)  # issue 30: stage 17 at the large matrices where fp8 sits at 86-90% of the copy probe (70B mlp_down 89.7 /
           # 89.3, session34c), the libraries interleaved, A B C C B A. Fitting t = t0 + bytes / BW to session34c's decode
           # rows: stage 17 streams faster than the libraries (fp8 1 token ~4410 against ~4080-4210 GB/s) but pays
           # ~8.3 us a launch against their ~6.5, which puts 90% of the copy probe past ~250 MB, just above mlp_down's
           # 235. B: a ring of 12 stages (never measured past 8; as many as 227 KB hold at 1 and 16 tokens): more loads in
           # flight for the slower SMs' share of the bandwidth. C: 64-row tiles, one unit a tile (MAX_PARTS 1) and a
           # ring of 16: at mlp_down 128 tiles on 132 SMs, no split tile and no sum at the end
           stage_sweep decode_wgmma decode_deep 400 \
             '{},{STAGES:12},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{STAGES:12},{}' \
             "[[1,8192,28672],[16,8192,28672],[1,36864,7168],[16,36864,7168],[1,7168,18432],[16,7168,18432],[1,57344,8192],[16,57344,8192]]" \
             "bf16,fp8" ;;
  decode_fixed)  # issue 30: stage 17's split tiles summed by their first part (FIXED_SUM 1: the other parts store and
           # count without waiting, the first adds their partials to its registers after a wait that finds them in)
           # against the last to arrive summing; FIXED_SUM 2 (the others' partials loaded 4 k-blocks before the first
           # part's end); 64-row tiles unsplit (decode_deep's C) beside them. First the GPU tests, then A B C D D C B A
           # at fp8's near misses (70B mlp_down at 1 / 16 tokens: 89.7 / 89.3% of the copy probe in session34c;
           # DeepSeek-V3 dense_gate_up at 64: 86.9) and 8B qkv, the libraries interleaved; then the decode experiment
           # in fp8 at 1 and 16 tokens with FIXED_SUM 2 (the copy probe in the same run)
           step gpu_decode_fixed 180 python3 -m pytest -m gpu tests/test_gpu_decode.py -k "stage_17 and FIXED_SUM" -q -rA \
             -p no:cacheprovider
           stage_sweep decode_wgmma decode_fixed 260 \
             '{},{FIXED_SUM:1},{FIXED_SUM:2},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{FIXED_SUM:2},{FIXED_SUM:1},{}' \
             "[[1,8192,28672],[16,8192,28672],[64,36864,7168],[1,6144,4096]]" "fp8,bf16"
           decode_wgmma_run fp8 1,16 "{FIXED_SUM:2}" "$REF/decode_fixed_experiment/fp8" decode_fixed_experiment_fp8 ;;
  decode_fixed_quick)  # decode_fixed in ~5 min (a session left with little device time): the GPU tests of FIXED_SUM 2,
           # A B C C B A (0 / 1 / 2) in fp8 at 70B mlp_down 1 / 16 tokens and DeepSeek-V3 dense_gate_up 64, then the
           # decode experiment in fp8 at 1 and 16 tokens with FIXED_SUM 2
           step gpu_decode_fixed 150 python3 -m pytest -m gpu tests/test_gpu_decode.py -k "stage_17 and FIXED_SUM:2" -q -rA \
             -p no:cacheprovider
           stage_sweep decode_wgmma decode_fixed 150 '{},{FIXED_SUM:1},{FIXED_SUM:2},{FIXED_SUM:2},{FIXED_SUM:1},{}' \
             "[[1,8192,28672],[16,8192,28672],[64,36864,7168]]" fp8
           decode_wgmma_run fp8 1,16 "{FIXED_SUM:2}" "$REF/decode_fixed_experiment/fp8" decode_fixed_experiment_fp8 ;;
  decode_unsplit)  # issue 30: the H100's winners of decode_fixed (h100-2026-12-05/session36b) on the H200: FIXED_SUM 1 (every
           # split tile summed by its first part) and UNSPLIT 1 (fp8 at 1-16 tokens: 64-row tiles, one unit a tile, where
           # they number 2/3 to all of the SMs), A B B A at the rule's matrices (8B qkv, 70B attn_o / mlp_down,
           # DeepSeek-V3 attn_o / dense_down) and the large ones, the libraries interleaved; then the fp8 decode
           # experiment with both (the copy probe in the same run): the count's candidate. Run in h200-2026-12-06/
           # session40e; both the defaults since (A spells out the defaults before)
           stage_sweep decode_wgmma decode_unsplit 240 '{UNSPLIT:0,FIXED_SUM:0},{},{},{UNSPLIT:0,FIXED_SUM:0}' \
             "[[1,6144,4096],[16,6144,4096],[1,8192,8192],[1,8192,28672],[16,8192,28672],[1,7168,16384],[1,7168,18432],[64,36864,7168]]" \
             "fp8,bf16"
           unsplit_experiment fp8 ;;
  decode_unsplit_fp8)  # issue 30: decode_unsplit's second half alone (~200 s, for a call with too little device time left
           # for the A B B A): the fp8 decode experiment at {UNSPLIT:1,FIXED_SUM:1}, the copy probe in the same run
           unsplit_experiment fp8 ;;
  decode_unsplit_bf16)  # issue 30: decode_unsplit's bf16 half: the bf16 decode experiment with FIXED_SUM 1 (UNSPLIT
           # touches fp8 only), the copy probe in the same run, so the defaults can move to both with rows at them
           unsplit_experiment bf16 ;;
  unsplit_bf16_qkv)  # issue 30: UNSPLIT's recipe in bf16 at Llama-3 8B qkv (6144 x 4096: 96 tiles of 64 rows on 132 SMs, one
           # unit a tile, a ring of 16), the bar's matrix at 1 and 16 tokens. The rule keeps it to fp8, from an H100's
           # tie in bf16 there (h100-2026-12-05/session36b: 24.02 / 24.83 us against 24.86 / 24.02 split); in fp8 the
           # H200 gained 15.7% at 1 token where the H100 gained 7% (session40e). A B B A, the libraries interleaved (~60 s)
           stage_sweep decode_wgmma unsplit_bf16_qkv 150 '{},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{CONSUMERS:1,MAX_PARTS:1,STAGES:16},{}' \
             "[[1,6144,4096],[16,6144,4096]]" bf16 ;;
  unsplit_t64)  # issue 30: the same recipe at 64 tokens, where the rule splits 128-row tiles and stage 17 sits at 85% of
           # the library at 8B qkv (bf16 and fp8, h200-2026-12-06/session40i/j; t0 10.1 us against the libraries' 6.1):
           # 64-row tiles, one unit a tile, no partials of 64 tokens to store and sum (32 KB a part); the ring as deep as
           # fits (13). 8B qkv (96 tiles) and 70B attn_o (8192 x 8192: 128 tiles), A B B A, the libraries interleaved
           stage_sweep decode_wgmma unsplit_t64 200 '{},{CONSUMERS:1,MAX_PARTS:1},{CONSUMERS:1,MAX_PARTS:1},{}' \
             "[[64,6144,4096],[64,8192,8192]]" "bf16,fp8" ;;
  unsplit_t64_ab)  # issue 30: the 64-token rule as it now stands (session52: UNSPLIT's 64-row tiles, one unit a tile)
           # against the split 128-row tiles it replaced (UNSPLIT 0 gives them at 64 tokens), A B B A, the libraries
           # interleaved: whether the rule the H200 chose holds on another card (8B qkv: 96 tiles, 70B attn_o: 128)
           stage_sweep decode_wgmma unsplit_t64_ab 200 '{},{UNSPLIT:0},{UNSPLIT:0},{}' \
             "[[64,6144,4096],[64,8192,8192]]" "bf16,fp8" ;;
  unsplit_t64_7168)  # issue 30: the 64-token rule at DeepSeek-V3's 7168-row matrices (112 tiles of 64 rows: 20 SMs
           # idle), where session54c's decode experiment (the rule) against session40e/f/i/j's (split 128-row tiles), in
           # separate runs, says: K 2048 gained (bf16 80 -> 97%, fp8 77 -> 105% of the library), K 16384 / 18432 lost
           # in bf16 (97.5 -> 95.6%, 104-105 -> 100.3%) and were mixed in fp8 (95 -> 93%, 90 -> 93%). A B B A here, the
           # libraries interleaved, before the rule is narrowed by K (~2 min)
           stage_sweep decode_wgmma unsplit_t64_7168 200 '{},{UNSPLIT:0},{UNSPLIT:0},{}' \
             "[[64,7168,2048],[64,7168,16384],[64,7168,18432]]" "bf16,fp8" ;;
  decode_default)  # issue 30: the decode experiment at the YAML's defaults (FIXED_SUM 1, UNSPLIT 1 since session40e; 8
           # stages at 64-row tiles past 16 tokens since session41), both precisions, the copy probe in the same run
           for prec in fp8 bf16; do decode_wgmma_run $prec 1,16,64 - "$REF/${DEC_OUT:-decode_default}/$prec" \
             ${DEC_OUT:-decode_default}_$prec; done ;;
  search_tests)  # the searches under a watchdog phase of their own (session35, not yet run on a GPU): cuBLASLt's FP8
           # search in a worker (its test asserts the phase in the log) and CUTLASS's kernel search
           step gpu_search 300 python3 -m pytest -m gpu tests/test_gpu_fp8_scaling.py tests/test_gpu_cutlass.py -k search \
             -q -rA -p no:cacheprovider ;;
  maps_fp8_block)  # issue 30: stage 15 with its tensor maps by value (MAP_PARAMS 1, as stages 12 / 13 / 17 take them
           # since session34c) against the buffer, first its GPU tests with it, then A B B A at the tune shapes and
           # moe_router / shared_gate_up, cuBLASLt's block-scaled kernel interleaved
           step gpu_maps_fp8_block 200 python3 -m pytest -m gpu tests/test_gpu_hopper_fp8_block.py -k MAP_PARAMS -q -rA \
             -p no:cacheprovider
           fp8_block_tune maps_fp8_block '{},{MAP_PARAMS:1},{MAP_PARAMS:1},{}' \
             '[[4096,36864,7168],[4096,7168,16384],[4096,7168,2048],[1024,2112,7168],[4096,256,7168],[1024,4096,7168]]' ;;
  # issue 20: the technique defines of stage 12 (WS_SWEEP in tests/test_hopper_kernels.py, same list)
  tune_ws) step tune_wgmma_ws 420 python3 run.py -m variant=wgmma_ws precision=bf16 "sizes.square=[4096,8192]" sizes.shapes=[] \
             measure.max_time_s=1.5 $Q 'variant.wgmma_ws.cuda.defines={CLUSTER_M:2,GRID_CTAS:128,STAGES:4,EPI_BOXES:2},{CLUSTER_M:1,GRID_CTAS:0,STAGES:4,EPI_BOXES:2},{CLUSTER_M:1,GRID_CTAS:0,STAGES:3,EPI_BOXES:0},{CLUSTER_M:1,GRID_CTAS:0,EPI_TMA:0,STAGES:4},{GRID_CTAS:0},{MBAR_CLUSTER_SCOPE:1},{STAGES:3,EPI_BOXES:0},{EPI_BOXES:1},{GROUP_M:16},{GROUP_M:4},{EPI_TMA:0},{MAP_PARAMS:0}' \
             run.name=tune_wgmma_ws hydra.sweep.dir=$REF/tune_wgmma_ws ;;
  tune_ws_fp16) step tune_wgmma_ws_fp16 240 python3 run.py -m variant=wgmma_ws precision=fp16 "sizes.square=[4096,8192]" sizes.shapes=[] \
             measure.max_time_s=1.5 $Q 'variant.wgmma_ws.cuda.defines={CLUSTER_M:2,GRID_CTAS:128,STAGES:4,EPI_BOXES:2},{CLUSTER_M:1,GRID_CTAS:0,STAGES:3,EPI_BOXES:0}' \
             run.name=tune_wgmma_ws_fp16 hydra.sweep.dir=$REF/tune_wgmma_ws_fp16 ;;
  ws_repeat)  # issue 20: stage 12 as the YAML has it, cuBLAS/cuBLASLt interleaved, three input seeds
           step ws_repeat 300 python3 run.py -m variant=wgmma_ws precision=bf16,fp16 "sizes.square=[4096,8192]" sizes.shapes=[] \
             measure=sustained measure.max_time_s=2 measure.seed=1,2,3 $Q run.name=ws_repeat hydra.sweep.dir=$REF/ws_repeat ;;
  ws_seeds)  # issue 20: stage 12 BF16 at 8192 (the 1.00x bar) over five more input seeds, interleaved
           step ws_seeds 300 python3 run.py -m variant=wgmma_ws precision=bf16 "sizes.square=[8192]" sizes.shapes=[] \
             measure=sustained measure.max_time_s=2 measure.seed=4,5,6,7,8 $Q run.name=ws_seeds hydra.sweep.dir=$REF/ws_seeds ;;
  fp8_top)  # issue 32: stage 13 at its defaults (EPI_BOXES 2, STAGES 4 since session40f) at 4096 / 8192, cuBLASLt FP8
           # interleaved and as a point of its own in the same run: both of the issue's ratios (~2 min)
           step fp8_top 240 python3 run.py "variant=[cublaslt,wgmma_fp8]" precision=fp8 "layouts=[nt]" \
             measure.fp8_scaling=tensor "sizes.square=[4096,8192]" sizes.shapes=[] "measure.baseline=[cublaslt]" \
             measure.max_time_s=1.5 $Q run.name=fp8_top hydra.run.dir=$REF/fp8_top ;;
  ws_standalone)  # issue 20: the best standalone cuBLAS beside stage 12, no baselines
           step ws_standalone 150 python3 run.py "variant=[cublas,cublaslt,wgmma_ws]" "precision=[bf16,fp16]" \
             "sizes.square=[4096,8192]" sizes.shapes=[] measure=sustained measure.max_time_s=2 "measure.baseline=[]" $Q \
             run.name=ws_standalone hydra.run.dir=$REF/ws_standalone ;;
  ws_llama)  # issue 20: stage 12 on Llama-3 70B's shapes, cuBLAS interleaved
           step llama70b_wgmma_ws 200 python3 run.py "variant=[wgmma_ws]" "precision=[bf16,fp16]" sizes=llm \
             "sizes.model_names=[llama3_70b]" "layouts=[nn]" "measure.baseline=[cublas]" measure.max_noise=0.05 \
             run.fail_on_error=false $Q run.name=llama70b_wgmma_ws hydra.run.dir=$REF/llama70b_wgmma_ws ;;
  # issue 32: stage 12 at layout nt and its new defines (PRODUCER_SCHEDULES, tile order RASTER, STREAM_K),
  # unvalidated until this passes: the GPU test (nn and nt, each define, the edges and cut tiles), then the sweep
  ws_nt_tests) step gpu_wgmma_ws_nt 360 python3 -m pytest -m gpu tests/test_gpu_hopper_kernels.py -k layout_nt \
             -q -rA -p no:cacheprovider ;;
  # issue 32: stage 12's producer-only schedule, tile orders and stream-K at layout nt (WS_NT_SWEEP in
  # tests/test_wgmma_ws_nt.py, same list; the first entry is the measured default's code),
  # cuBLAS and cuBLASLt interleaved (pct_of_cublas): 4096 / 6144 / 8192, then Llama-3 70B's prefill
  # projections at 4096 and 16384 tokens
  tune_ws_nt) step tune_ws_nt 360 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" "sizes.square=[4096,6144,8192]" \
             sizes.shapes=[] measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={RASTER:0,STREAM_K:0,PRODUCER_SCHEDULES:0},{PRODUCER_SCHEDULES:1},{RASTER:1},{RASTER:2},{GRID_CTAS:0},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0,RASTER:2},{UNIFORM_A:1,DESC_STEP:1}' \
             run.name=tune_ws_nt hydra.sweep.dir=$REF/tune_ws_nt
           step llama70b_ws_nt 480 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" sizes=llm \
             "sizes.model_names=[llama3_70b]" "sizes.tokens=[4096,16384]" measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={RASTER:0,STREAM_K:0,PRODUCER_SCHEDULES:0},{PRODUCER_SCHEDULES:1},{RASTER:1},{RASTER:2},{GRID_CTAS:0},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0,RASTER:2},{UNIFORM_A:1,DESC_STEP:1}' \
             run.name=llama70b_ws_nt hydra.sweep.dir=$REF/llama70b_ws_nt ;;
  # issue 32: stages 12 and 13's issue-path defines (UNIFORM_A 1 with DESC_STEP 1: A's descriptors in uniform
  # registers, each k-step's the first's advanced) beside their defaults, the library interleaved, at layout nt:
  # stage 12 BF16 at 4096 / 6144 / 8192 and Llama-3 70B's prefill projections, stage 13 FP8 at 4096 / 8192
  ws_streamk_diag)  # issue 32: where stream-K's 93.1% at 4096 went (session9c: with the producer-only schedule and 66
           # clusters, neither measured alone at nt): each piece alone, nt BF16 at 4096 and 6144, the libraries interleaved;
           # then ncu of the defaults and stream-K at 4096 (DRAM bytes, L2 hit rate: stream-K's units work on the last
           # two waves' tiles at scattered k, a working set the L2 may not hold where the data-parallel waves share it)
           step ws_streamk_diag 300 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" "sizes.square=[4096,6144]" \
             sizes.shapes=[] measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={RASTER:0,STREAM_K:0,PRODUCER_SCHEDULES:0},{PRODUCER_SCHEDULES:1},{GRID_CTAS:0},{PRODUCER_SCHEDULES:1,GRID_CTAS:0},{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0}' \
             run.name=ws_streamk_diag hydra.sweep.dir=$REF/ws_streamk_diag
           ncu_points bf16 "wgmma_ws 4096 4096 4096 - wgmma_ws -;wgmma_ws 4096 4096 4096 - wgmma_ws {PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0}" ;;
  issue_path) step ws_issue_path 240 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" \
             "sizes.square=[4096,6144,8192]" sizes.shapes=[] measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={},{UNIFORM_A:1,DESC_STEP:1}' run.name=ws_issue_path hydra.sweep.dir=$REF/ws_issue_path
           step fp8_issue_path 200 python3 run.py -m variant=wgmma_fp8 precision=fp8 "layouts=[nt]" measure.fp8_scaling=tensor \
             "sizes.square=[4096,8192]" sizes.shapes=[] "measure.baseline=[cublaslt]" measure.max_time_s=1.5 $Q \
             'variant.wgmma_fp8.cuda.defines={},{UNIFORM_A:1,DESC_STEP:1}' run.name=fp8_issue_path hydra.sweep.dir=$REF/fp8_issue_path
           step llama70b_issue_path 300 python3 run.py -m variant=wgmma_ws precision=bf16 "layouts=[nt]" sizes=llm \
             "sizes.model_names=[llama3_70b]" "sizes.tokens=[4096,16384]" measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_ws.cuda.defines={},{UNIFORM_A:1,DESC_STEP:1}' run.name=llama70b_issue_path \
             hydra.sweep.dir=$REF/llama70b_issue_path ;;
  # issue 20: stage 13 (FP8, unvalidated until this passes): correctness at every size, layouts, baseline
  hopper_fp8) step gpu_hopper_fp8 300 python3 -m pytest -m gpu tests/test_gpu_hopper_fp8.py -q -rA -s -p no:cacheprovider ;;
  tune_fp8) fp8_tune tune_wgmma_fp8 "${FP8_TUNE:-$FP8_SWEEP}" ;;
  tune_fp8_repeat)  # issue 32: the twenty-seventh note's FP8 candidates again, each twice in the run (session27b had
           # them within a point or two of the defaults, 104.2 / 99.1% of cuBLASLt at 4096 / 8192, none at 105 at 8192)
           fp8_tune tune_wgmma_fp8_repeat "$FP8_REPEAT" ;;
  fp8_scaled)  # issue 30: cuBLASLt's Hopper FP8 scale modes (rowcol = OUTER_VEC_32F, block = DeepSeek-V3's
           # VEC128_32F x BLK128x128_32F through nvmath's raw bindings) beside per-tensor: the GPU tests
           # (right scales pass, misplaced ones fail), then DeepSeek-V3's projections at 64 / 1024 / 4096
           # tokens, one run per mode (the MoE experts are batched: skipped), with CUTLASS's FP8 kernel
           # (variant cutlass_fp8: tensor only; rowcol and block skipped saying what cutlass_cppgen lacks)
           fp8_scaled_tests; fp8_scaled_sweeps ;;
  # issue 30: stage 15 (FP8 with DeepSeek-V3's block scales, unvalidated until this passes; CI runs its CPU
  # tests): its GPU tests, then every DeepSeek-V3 projection at 64 / 1024 / 4096 tokens with cuBLASLt's
  # block-scaled kernel interleaved (pct_of_baseline; the bar: >= 100 at m >= 1024) and standalone
  fp8_block) fp8_block_tests; ds3_fp8_block ;;
  ds3_fp8_block) ds3_fp8_block ;;
  ds3_maps)  # issue 30: stage 15 with its tensor maps by value (MAP_PARAMS 1; session40h: -8.8 to +1.2% time at its tune
           # shapes) at every DeepSeek-V3 projection, cuBLASLt block-scaled interleaved: block_vs_cublaslt at it before it
           # becomes the default
           DS3_NAME=ds3_maps FP8_BLOCK_OVERRIDES='variant.wgmma_fp8_block.cuda.defines={MAP_PARAMS:1}' ds3_fp8_block ;;
  copy_sizes)  # issue 30: what moving a decode GEMM's bytes costs at all. The copy probe (cudaMemcpyAsync) and the
           # hand-written vector add from 8 MB to 1 GiB, with the bytes of Llama-3 8B's attn_qkv weights (fp8 25.2 MB:
           # 3 x 2^20 floats copied; bf16 50.3 MB: 3 x 2^21) among them: a fixed cost per launch that the 1.3x bar leaves
           # no room for shows here, with no GEMM in it (~30 s)
           step copy_sizes 90 python3 run.py "variant=[copy_gpu,vecadd_gpu]" precision=fp32 sizes.square=[] \
             "sizes.shapes=[[1048576,1,1],[2097152,1,1],[3145728,1,1],[4194304,1,1],[6291456,1,1],[8388608,1,1],[16777216,1,1],[67108864,1,1],[268435456,1,1]]" \
             sizes.max_dim=268435456 measure.max_time_s=0.5 $Q run.name=copy_sizes hydra.run.dir=$REF/copy_sizes ;;
  lt_fp8_any_m)  # issue 30: cuBLASLt FP8 at M = 1, 33, 1001 (M is no leading dimension; required % 8 until session42)
           step lt_fp8_any_m 90 python3 -m pytest -m gpu tests/test_gpu_fp8_scaling.py -k any_m -v -rA -p no:cacheprovider ;;
  h200_short)  # h200_next's most telling parts for a call of ~6 min, in the order of what they decide: the decode
           # experiment at 64 tokens in both precisions (the unsplit rule h200-2026-12-07/session52b made the default
           # there), stage 12 FP16 at nt (issue 32's "FP16 stated", on a cool GPU), stage 12 at Llama-3 70B's prefill
           # (issue 32's geomean), stage 12 nt standalone. (Until session52:
           # the copy probe's sizes and fp8 at 1 token first, which h200-2026-12-07/session52 measured)
           for prec in fp8 bf16; do decode_wgmma_run $prec 64 - "$REF/decode_default_t64/$prec" decode_default_${prec}_t64; done
           ws_nt_standalone ws_fp16 fp16
           ws_nt_llama70b ws_now
           ws_nt_standalone ws_now ;;
  h100_next)  # what an H100 (what the device tool hands out for an H200 call, sessions 47 and 49) can say of issue 32
           # at today's defines, ~6-7 min: stage 12 nt at 4096 / 6144 / 8192 beside the libraries interleaved and
           # standalone, Llama-3 70B's prefill and the nn ladder line (ws_now), stage 13 FP8 at 4096 / 8192 (fp8_top);
           # judged by python -m analysis.targets DIR --device H100 (the bars stay the H200's)
           for s in ws_now fp8_top; do bash "$0" $s; done ;;
  h200_next)  # what session41 could not run (no H200 came): issues 32 and 30 at today's defaults, ~7 min on an H200
           # (the any-M cuBLASLt test passed on an H100 in session43; decode_default runs that path at 1 token)
           # (session52 ran copy_sizes, unsplit_bf16_qkv and unsplit_t64 on an H200: h200-2026-12-07; since then the
           # decode experiment first, at the 64-token unsplit rule those made the default)
           for s in decode_default ws_fp16_nt ws_now fp8_top ds3_maps; do bash "$0" $s; done ;;
  h200_after54)  # what h200_next leaves after session54c (which ran h200_short: the decode experiment at 64 tokens,
           # stage 12 FP16 and BF16 nt, 70B prefill), ~7 min on an H200: the 64-token rule at the 7168-row matrices,
           # stage 13 FP8 at 4096 / 8192 (issue 32's 8192 row has drifted in every run so far), stage 15's maps by value
           for s in unsplit_t64_7168 fp8_top ds3_maps; do bash "$0" $s; done ;;
  # issue 30: stage 15's technique defines (FP8_BLOCK_SWEEP in tests/test_hopper_fp8_block.py, same list) on
  # DeepSeek-V3 projections: dense_gate_up, attn_o, shared_down at 4096 tokens and attn_qkv_a at 1024 (136
  # tiles of 128 x 128 on 132 SMs: the wave-quantisation case, where an entry without BN takes 64 by waves
  # as the defaults do; at the other three 192 since session21 where the build has it, else 128), cuBLASLt
  # interleaved (FP8_BLOCK_TUNE: other entries; FP8_BLOCK_SHAPES: other shapes, "[[m,n,k],...]")
  tune_fp8_block) fp8_block_tune tune_wgmma_fp8_block "${FP8_BLOCK_TUNE:-$FP8_BLOCK_SWEEP}" \
             "${FP8_BLOCK_SHAPES:-[[4096,36864,7168],[4096,7168,16384],[4096,7168,2048],[1024,2112,7168]]}" ;;
  fp8_block_split)  # issue 30: moe_router at 4096 tokens, the DeepSeek-V3 point furthest under cuBLASLt (99.3-99.7%
           # with the partial kept, session27; 64 tiles of 128 x 128 split in 2): FP8_BLOCK_SPLIT_DEFAULT (the defaults,
           # the previous default without keeping, the k-loop before DESC_STEP 2, 6 stages without staging tiles or with
           # one box staged a round; tests' MOE_ROUTER_CANDIDATES) at 4096 and 1024 tokens, cuBLASLt interleaved (the DeepSeek-V3
           # projections: fp8_block_ds3_candidates; each job against the first: python -m analysis.compare --normalized SWEEP)
           step fp8_block_split 240 python3 run.py -m variant=wgmma_fp8_block precision=fp8 "layouts=[nt]" \
             measure.fp8_scaling=block "sizes.square=[]" "sizes.shapes=[[4096,256,7168],[1024,256,7168]]" \
             "measure.baseline=[cublaslt]" measure.max_time_s=1.5 run.fail_on_error=false $Q \
             "variant.wgmma_fp8_block.cuda.defines=${FP8_BLOCK_SPLIT:-$FP8_BLOCK_SPLIT_DEFAULT}" \
             run.name=fp8_block_split hydra.sweep.dir=$REF/fp8_block_split
           # shared_gate_up at 1024 tokens (99.6-100.2% with a fourth stage, session27): the defaults (128 x 256, 4 stages,
           # one box of C a round) and the previous default (3 stages; tests' SHARED_GATE_UP_CANDIDATES)
           step fp8_block_wide 120 python3 run.py -m variant=wgmma_fp8_block precision=fp8 "layouts=[nt]" \
             measure.fp8_scaling=block "sizes.square=[]" "sizes.shapes=[[1024,4096,7168]]" \
             "measure.baseline=[cublaslt]" measure.max_time_s=1.5 run.fail_on_error=false $Q \
             'variant.wgmma_fp8_block.cuda.defines={PROMOTE_OVERLAP:0},{EPI_BOXES:0}' \
             run.name=fp8_block_wide hydra.sweep.dir=$REF/fp8_block_wide ;;
  fp8_block_ds3_candidates)  # issue 30: every DeepSeek-V3 projection with the defaults (session27's rules: the partial
           # kept where a tile is split in 2, one box of C a round and a fourth stage at 128 x 256), then with the previous
           # defaults (both rules off: moe_router at 4096 tokens and the 256-wide points change, the rest is the same SASS),
           # then the defaults again, one run after the other (python -m analysis.compare --normalized A B on each pair)
           DS3_NAME=ds3_default FP8_BLOCK_OVERRIDES= ds3_fp8_block
           DS3_NAME=ds3_previous FP8_BLOCK_OVERRIDES="variant.wgmma_fp8_block.cuda.defines.SPLIT_KEEP=0 variant.wgmma_fp8_block.cuda.defines.EPI_BOXES=0" ds3_fp8_block
           DS3_NAME=ds3_default_again FP8_BLOCK_OVERRIDES= ds3_fp8_block ;;
  fp8_block_diag)  # issue 30: what stage 15's promotion costs: its DIAG builds (1: no scale loads, 2: no promotion),
           # wrong by design, so timed with the check off (measure.check=false), cuBLASLt block-scaled interleaved
           step fp8_block_diag 240 python3 run.py -m variant=wgmma_fp8_block precision=fp8 "layouts=[nt]" \
             measure.fp8_scaling=block "sizes.square=[]" "sizes.shapes=[[4096,7168,16384],[4096,36864,7168]]" \
             "measure.baseline=[cublaslt]" measure.max_time_s=1.5 measure.check=false run.fail_on_error=false $Q \
             "variant.wgmma_fp8_block.cuda.defines=${FP8_BLOCK_DIAG:-$FP8_BLOCK_DIAG_DEFAULT}" \
             run.name=fp8_block_diag hydra.sweep.dir=$REF/fp8_block_diag ;;
  # issue 30: the FP8 wgmma rate by N (is m64n160k32 as slow as m64n192k32?): its GPU test, then every N
  wgmma_peak) step gpu_wgmma_peak 120 python3 -m pytest -m gpu tests/test_gpu_probes.py -q -rA -s -p no:cacheprovider -k wgmma_peak
           step wgmma_peak 120 python3 run.py -m variant=wgmma_peak precision=fp8 sizes=probe \
             'variant.wgmma_peak.probe.params.n=64,128,160,192,256' $Q run.name=wgmma_peak hydra.sweep.dir=$REF/wgmma_peak ;;
  # issue 20: the mma.sync rate alone (stage 10's ceiling) at three occupancies
  mma_peak) step mma_sync_peak 120 python3 run.py -m variant=mma_sync_peak precision=bf16,fp16 sizes=probe \
             'variant.mma_sync_peak.probe.params.warps=4,8,16' $Q run.name=mma_sync_peak hydra.sweep.dir=$REF/mma_sync_peak ;;
  mma_quick)  # issue 20: stage 10 (and 12) beside cuBLAS / cuBLASLt at 8192 before the power limit
           # (measure=quick: a few samples, the SM clock still at its maximum), three input seeds
           step mma_quick 200 python3 run.py -m "variant=[mma_sync,wgmma_ws]" "precision=[bf16,fp16]" "sizes.square=[8192]" \
             sizes.shapes=[] measure=quick measure.seed=1,2,3 $Q run.name=mma_quick hydra.sweep.dir=$REF/mma_quick ;;
  ncu_mma)  # issue 20: where stage 10's cycles go (stall reasons, pipe and shared-memory use), beside the
           # probe that issues mma.sync alone; one launch each, ncu's text report is the log
           for k in mma_sync_gemm mma_sync_peak; do
             [ $k = mma_sync_gemm ] && V="variant=mma_sync sizes.square=[8192] sizes.shapes=[]" || V="variant=mma_sync_peak sizes=probe"
             step ncu_$k 200 ncu --clock-control base -k regex:"^$k\$" --launch-skip 2 -c 1 --section SpeedOfLight \
               --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
               --section SchedulerStats --section InstructionStats --section Occupancy \
               python3 run.py $V precision=bf16 measure=quick "measure.baseline=[]" $Q hydra.run.dir=/tmp/ncu_$k
           done ;;
  pitfalls) step pitfalls 180 python3 run.py "variant=[smem_tiled,tag_pitfall]" \
             precision=fp32 "sizes.square=[4096]" sizes.shapes=[] measure.check_repeats=5 run.fail_on_error=false $Q \
             run.name=pitfalls hydra.run.dir=$REF/pitfalls ;;
  cublas)  rm -rf "$REF/cublas_square"  # a fresh sweep, not a resume of the committed rows
           step cublas_square 360 python3 run.py +experiment=cublas_square $Q hydra.run.dir=$REF/cublas_square ;;
  counters) step counters_fp32 300 python3 run.py "variant=[tag_ladder,cutlass_auto,cublas]" \
             precision=fp32 "sizes.square=[4096]" sizes.shapes=[] measure.counters=ncu measure.baseline=[] $Q \
             run.name=counters_fp32 hydra.run.dir=$REF/counters_fp32
           step counters_fp16 300 python3 run.py "variant=[tag_tensor_core,cutlass_auto,cublas]" \
             precision=fp16 "sizes.square=[4096]" sizes.shapes=[] measure=sustained measure.counters=ncu measure.baseline=[] $Q \
             run.name=counters_fp16 hydra.run.dir=$REF/counters_fp16 ;;
  claims_fix) step claims_cpu_gpu 200 python3 -X faulthandler run.py +experiment=claims_cpu_gpu $Q hydra.run.dir=$REF/claims_cpu_gpu
           step claims_memory_roof 150 python3 -X faulthandler run.py +experiment=claims_memory_roof \
             "variant=[copy_gpu,vecadd_gpu,gemv_gpu]" $Q hydra.run.dir=$REF/claims_memory_roof
           step claims_memory_roof_cpu 150 python3 -X faulthandler run.py +experiment=claims_memory_roof \
             "variant=[copy_cpu,vecadd_cpu,gemv_cpu]" $Q hydra.run.dir=$REF/claims_memory_roof_cpu ;;
  claims)  # CLAIMS="claims_tf32 ..." runs only those
           for e in ${CLAIMS:-$(ls experiments/claims_*.yaml | xargs -n1 basename | sed 's/.yaml$//')}; do
             step "$e" 300 python3 run.py +experiment=$e $Q hydra.run.dir=$REF/$e
           done ;;  # the report is built from the rows afterwards: python -m analysis.claims
  validity) step gpu_validity 420 python3 -m pytest -m gpu tests/test_gpu_validity.py tests/test_gpu_negative_controls.py \
             tests/test_gpu_core.py -q -rA -p no:cacheprovider ;;
  negative_controls)  # every wrong_* variant must fail at every size in each precision it supports
           step negative_controls 300 python3 run.py "variant=tag_negative_control" \
             "precision=[fp64,fp32,fp16,bf16]" "sizes.square=[1024,4096,8192,16384]" sizes.shapes=[] \
             measure=quick measure.baseline=[] run.fail_on_error=false $Q hydra.run.dir=$REF/negative_controls ;;
  precompile_default)  # the default run's kernels into the cache first (CUTLASS's take a minute or two), as a
           # user's second run finds them: the default_run stage then times the run, not the compiles
           step precompile_default 240 env CUDA_VISIBLE_DEVICES= python3 -m gemmlab.bench.precompile --jobs 8 ;;
  precompile)  # in the background, no CUDA context: the correctness sweep's kernels into the cache
           (CUDA_VISIBLE_DEVICES= nohup python3 -m gemmlab.bench.precompile --jobs 8 "${CORRECTNESS[@]}" \
              > "$LOGS/precompile.log" 2>&1 &) ;;
  correctness)  # no correct kernel may fail anywhere
           step correctness 570 python3 run.py "${CORRECTNESS[@]}" \
             measure=quick measure.baseline=[] run.fail_on_error=false $Q hydra.run.dir=$REF/correctness ;;
  exact)   # fp64 cuBLAS against the host BLAS at 4096; exact inputs: library points must match exactly
           step independent_fp64 200 python3 run.py variant=cublas precision=fp64 "sizes.square=[4096]" sizes.shapes=[] \
             measure=quick $Q hydra.run.dir=$REF/independent_fp64
           step exact 200 python3 run.py "variant=[cublas,cublaslt]" "precision=[fp64,fp32,tf32,fp16,bf16,fp8]" \
             "sizes.square=[1024,4096]" sizes.shapes=[] measure=quick measure.distribution=exact \
             run.fail_on_error=false $Q hydra.run.dir=$REF/exact ;;
  concurrent)  # one GPU, one measurement: alone, then two runs started together (the second waits)
           C="variant=cublas precision=fp16 sizes.square=[8192] sizes.shapes=[] measure=sustained $Q"
           step concurrent_solo 120 python3 run.py $C hydra.run.dir=$REF/concurrent/solo
           (timeout 200 python3 run.py $C hydra.run.dir=$REF/concurrent/first > "$LOGS/concurrent_first.log" 2>&1 &)
           for _ in $(seq 300); do [ -f $REF/concurrent/first/results.csv ] && break; sleep 0.2; done  # it holds the GPU
           step concurrent_second 240 python3 run.py $C hydra.run.dir=$REF/concurrent/second
           wait; sleep 1; tail -n 5 "$LOGS/concurrent_first.log" ;;
  contended)  # a foreign process on the GPU (a torch matmul loop): rows must say contended=true
           python3 -c "import torch,time
a=torch.randn(4096,4096,device='cuda')
t=time.time()
while time.time()-t<45: a@a" &
           FOREIGN=$!; sleep 3
           step contended 120 python3 run.py variant=cublas "precision=[fp16,fp32]" "sizes.square=[4096]" sizes.shapes=[] \
             measure=quick $Q hydra.run.dir=$REF/contended
           kill $FOREIGN; wait ;;
  energy_tests)  # issue 21 on the GPU: the energy counter vs power x time, the L2/L1 probes
           step gpu_energy 240 python3 -m pytest -m gpu tests/test_gpu_energy.py tests/test_gpu_probes.py \
             -q -rA -p no:cacheprovider ;;
  energy)  # GFLOP/J of cuBLAS/cuBLASLt at every precision and square size, and of the ladder at 4096
           step energy_square 540 python3 run.py +experiment=cublas_square measure.energy=true $Q \
             run.name=energy_square hydra.run.dir=$REF/energy_square
           step energy_ladder 300 python3 run.py "variant=[tag_ladder,cublas]" "precision=[fp32,fp16,bf16]" \
             "sizes.square=[4096]" sizes.shapes=[] measure=sustained measure.energy=true $Q \
             run.name=energy_ladder hydra.run.dir=$REF/energy_ladder ;;
  cache_roofs) step cache_roofs 120 python3 run.py +experiment=cache_roofs $Q hydra.run.dir=$REF/cache_roofs ;;
  inputs_power) step inputs_power 420 python3 run.py -m +experiment=inputs_power $Q hydra.sweep.dir=$REF/inputs_power ;;
  workloads)  # issue 18: every layout at 4096, batched attention-like shapes, the LLM shape sets
           step layouts 300 python3 run.py "variant=[cublas,cublaslt,cutlass_auto]" "precision=[bf16,fp16,tf32,fp32]" \
             "sizes.square=[4096]" sizes.shapes=[] "layouts=[nn,nt,tn,tt]" measure.baseline=[] run.fail_on_error=false $Q \
             run.name=layouts hydra.run.dir=$REF/layouts
           step batched 240 python3 run.py "variant=[cublas,cublaslt,cutlass_auto]" "precision=[bf16,fp16]" \
             "sizes.square=[]" "sizes.shapes=[[2048,2048,128],[2048,128,2048],[4096,4096,128]]" "batch=[8,32,64]" \
             measure.baseline=[] run.fail_on_error=false $Q run.name=batched hydra.run.dir=$REF/batched
           step llm_shapes 570 python3 run.py +experiment=llm_shapes run.fail_on_error=false $Q hydra.run.dir=$REF/llm_shapes ;;
  tuning_regret) step tuning_regret 570 python3 run.py +experiment=tuning_regret run.fail_on_error=false $Q \
             hydra.run.dir=$REF/tuning_regret ;;
  compare)  # issue 19: cublas_square five times (compared pairwise), and a slower warp_tiled against the default
           for i in 1 2 3 4 5; do
             step cublas_square_rep$i 100 python3 run.py +experiment=cublas_square "precision=[fp32,bf16]" \
               "sizes.square=[1024,4096,8192]" measure.max_time_s=1.5 \
               $Q run.name=cublas_square_rep$i hydra.run.dir=$REF/compare/cublas_square_rep$i
           done
           step warp_tiled_default 90 python3 run.py variant=warp_tiled precision=fp32 "sizes.square=[2048,4096]" \
             sizes.shapes=[] measure.baseline=[] $Q hydra.run.dir=$REF/compare/warp_tiled
           step warp_tiled_bk8 90 python3 run.py variant=warp_tiled precision=fp32 "sizes.square=[2048,4096]" \
             sizes.shapes=[] measure.baseline=[] variant.warp_tiled.cuda.defines.BK=8 $Q \
             hydra.run.dir=$REF/compare/warp_tiled_bk8 ;;
  compare_paired)  # issue 19: the same two controls (6% and 1% slower) paired with the default in one
           # run, and the 1% one in a run of its own, for the two-run mode at the same points
           step compare_paired 150 python3 run.py "variant=[warp_tiled_bk8,warp_tiled_s4]" measure.baseline=[warp_tiled] \
             precision=fp32 "sizes.square=[2048,4096]" sizes.shapes=[] $Q hydra.run.dir=$REF/compare/paired
           step warp_tiled_s4 90 python3 run.py variant=warp_tiled_s4 precision=fp32 "sizes.square=[2048,4096]" \
             sizes.shapes=[] measure.baseline=[] $Q hydra.run.dir=$REF/compare/warp_tiled_s4 ;;
  # issue 29: a kernel that faults, hangs or scribbles stays inside its own point
  iso_smoke)  # a few seconds: the worker runs on this host, a fault stays in its point (stop here if not)
           step iso_smoke 150 python3 run.py "variant=[wrong_fault,smem_tiled]" precision=fp32 "sizes.square=[1024,4096]" \
             sizes.shapes=[] measure=quick measure.baseline=[] run.fail_on_error=false $Q hydra.run.dir=/tmp/iso_smoke ;;
  isolation)  # a faulting control first, wmma_tiled and cuBLAS after it: one run, one sweep, two clean runs
           step isolation 420 python3 -m gemmlab.bench.isolation --out $REF/isolation -- $Q ;;
  second_job)  # the isolation check's open question (README, h100-2026-12-06/session38c): cuBLAS at 2048 ran 1.5-4%
           # slower as a sweep's second job (after wmma_tiled's) than alone, after wmma_tiled in one run, or as a sweep's
           # only job. Again, twice each, then the same second job with the points in the runner's process
           # (run.isolate=none: is it the shared worker?) and with each job a process of its own (hydra/launcher=per_gpu:
           # on one GPU the jobs run one after another, each with a fresh worker: is it what the first job's run leaves
           # in the process, e.g. its measurer, freed only by the cyclic GC?), then the sweep under ncu, one row per
           # launch (--csv): the last cuBLAS launches are the second job's, so its kernel is named (any GPU; ~5 min).
           # Since session39 the sweeps run at the default run.fresh_worker=true (a worker per job): the regression
           # check of that fix (session39i); second_job_first / _fresh / _cause keep the shared worker
           SJ=("precision=[fp16,bf16]" "sizes.square=[2048]" "sizes.shapes=[]" $Q)
           for k in 1 2; do
             step second_job_plain_$k 60 python3 run.py variant=cublas "${SJ[@]}" hydra.run.dir=$REF/second_job/plain$k
             step second_job_only_$k 60 python3 run.py -m variant=cublas "${SJ[@]}" hydra.sweep.dir=$REF/second_job/only$k
             step second_job_second_$k 90 python3 run.py -m variant=wmma_tiled,cublas "${SJ[@]}" \
               hydra.sweep.dir=$REF/second_job/second$k
           done
           step second_job_no_worker 90 python3 run.py -m variant=wmma_tiled,cublas "${SJ[@]}" run.isolate=none \
             hydra.sweep.dir=$REF/second_job/second_no_worker
           step second_job_per_gpu 120 python3 run.py -m hydra/launcher=per_gpu variant=wmma_tiled,cublas "${SJ[@]}" \
             hydra.sweep.dir=$REF/second_job/second_per_gpu
           step second_job_ncu 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
             -k 'regex:nvjet|sm90_|xmma|cutlass' python3 run.py -m variant=wmma_tiled,cublas precision=fp16 \
             "sizes.square=[2048]" "sizes.shapes=[]" measure=quick $Q hydra.sweep.dir=/tmp/second_job_ncu ;;
  second_job_first)  # which first job slows cuBLAS's second (session39: neither the finished run's executor nor a second
           # cuBLAS handle; a process per job is in line). FP16 at 2048, twice each: cuBLAS after cuBLAS; after
           # wmma_tiled with no cuBLAS baseline in its job (is it cuBLAS's use in the first job?); after wmma_tiled as
           # second_job runs it; and the plain run of the two variants without the baseline; the sweeps in the worker
           # the jobs share (run.fresh_worker=false, as session39f ran them before it was the default) (any GPU; ~2 min)
           SF=("precision=[fp16]" "sizes.square=[2048]" "sizes.shapes=[]" run.fresh_worker=false $Q)
           for k in 1 2; do
             step second_job_first_cc_$k 60 python3 run.py -m variant=cublas,cublas "${SF[@]}" \
               hydra.sweep.dir=$REF/second_job_first/cublas_cublas$k
             step second_job_first_wn_$k 60 python3 run.py -m variant=wmma_tiled,cublas measure.baseline=[] "${SF[@]}" \
               hydra.sweep.dir=$REF/second_job_first/wmma_nobase_cublas$k
             step second_job_first_wb_$k 60 python3 run.py -m variant=wmma_tiled,cublas "${SF[@]}" \
               hydra.sweep.dir=$REF/second_job_first/wmma_cublas$k
             step second_job_first_plain_$k 60 python3 run.py "variant=[wmma_tiled,cublas]" measure.baseline=[] \
               "${SF[@]}" hydra.run.dir=$REF/second_job_first/plain_nobase$k
           done ;;
  second_job_fresh)  # does run.fresh_worker (each run a worker of its own) put cuBLAS's second job back in line? FP16 /
           # BF16 at 2048, twice: the plain run, the sweep wmma_tiled,cublas as second_job runs it (the shared worker),
           # the same with run.fresh_worker=true (any GPU; ~2 min)
           SJ=("precision=[fp16,bf16]" "sizes.square=[2048]" "sizes.shapes=[]" $Q)
           for k in 1 2; do
             step second_job_fresh_plain_$k 60 python3 run.py variant=cublas "${SJ[@]}" \
               hydra.run.dir=$REF/second_job_fresh/plain$k
             step second_job_fresh_shared_$k 90 python3 run.py -m variant=wmma_tiled,cublas run.fresh_worker=false \
               "${SJ[@]}" hydra.sweep.dir=$REF/second_job_fresh/shared$k
             step second_job_fresh_fresh_$k 90 python3 run.py -m variant=wmma_tiled,cublas run.fresh_worker=true \
               "${SJ[@]}" hydra.sweep.dir=$REF/second_job_fresh/fresh$k
           done ;;
  second_job_cause)  # what a wmma_tiled run leaves in a shared worker that slows the next run's cuBLAS (session39f):
           # the same with another hand-written kernel first (wmma, mma_sync: is it any module of the cuda backend?)
           # and a CUTLASS kernel first (another backend's module), in the worker the jobs share
           # (run.fresh_worker=false), FP16 at 2048, twice each, beside the plain run (any GPU; ~3 min)
           SC=("precision=[fp16]" "sizes.square=[2048]" "sizes.shapes=[]" run.fresh_worker=false $Q)
           for k in 1 2; do
             step second_job_cause_plain_$k 60 python3 run.py variant=cublas "${SC[@]}" \
               hydra.run.dir=$REF/second_job_cause/plain$k
             for first in wmma mma_sync cutlass_auto; do
               step second_job_cause_${first}_$k 90 python3 run.py -m variant=$first,cublas "${SC[@]}" \
                 hydra.sweep.dir=$REF/second_job_cause/${first}_cublas$k
             done
           done ;;
  conduct)  # the conduct controls where they misbehave and where they do not, a correct kernel after them
           step conduct 300 python3 run.py "variant=[wrong_oob_row,wrong_writes_b,wrong_hang,wrong_fault,smem_tiled]" \
             "precision=[fp32,bf16]" "sizes.square=[1000,1024,2048,4096]" sizes.shapes=[] measure=quick \
             measure.baseline=[] run.fail_on_error=false $Q hydra.run.dir=$REF/conduct ;;
  sanitize) step sanitize 300 python3 run.py "variant=[wrong_oob_row,wrong_writes_b,smem_tiled]" precision=fp32 \
             "sizes.square=[1000]" sizes.shapes=[] measure=quick measure.baseline=[] measure.sanitize=memcheck \
             run.fail_on_error=false $Q hydra.run.dir=$REF/sanitize ;;
  default_run)  # `python run.py` as a user runs it first, timed (the wall time is the log's last line); guards on
           step default_run 400 bash -c 'T0=$(date +%s%N); python3 run.py "$@"; rc=$?
             echo "default_run wall $(( ($(date +%s%N) - T0) / 1000000 )) ms"; exit $rc' _ $Q hydra.run.dir=$REF/default_run ;;
  default_run_noguard)  # the same with guard zones off: what they cost
           step default_run_noguard 400 bash -c 'T0=$(date +%s%N); python3 run.py "$@"; rc=$?
             echo "default_run_noguard wall $(( ($(date +%s%N) - T0) / 1000000 )) ms"; exit $rc' _ \
             measure.guard_bytes=0 $Q hydra.run.dir=$REF/default_run_noguard ;;
  decode)  # issue 30: stage 14 (decode_splitk) on the Llama-3 8B / 70B and DeepSeek-V3 decode shapes (1, 16,
           # 64 tokens, layout nt) beside cuBLAS / cuBLASLt (also interleaved: pct_of_baseline) and the copy
           # probe, one run per precision, each with its own copy row (experiments/decode.yaml)
           step decode_bf16 570 python3 run.py +experiment=decode "precision=[bf16,fp32]" run.fail_on_error=false $Q \
             hydra.run.dir=$REF/decode/bf16
           step decode_fp8 420 python3 run.py +experiment=decode "precision=[fp8,fp32]" run.fail_on_error=false $Q \
             hydra.run.dir=$REF/decode/fp8 ;;
  decode_cupti)  # issue 30's 1.3x at Llama-3 8B: the decode run at its four projections timed by CUPTI's kernel
           # records (no event start-up; needs cupti_python-13.0.1, nvidia_cuda_cupti-13.0.85 and pyelftools wheels in
           # .whl: bash .ci/cupti-wheels.sh .whl; the host's cuda-bindings serves them), then by events right after, and the
           # CUPTI timer's own GPU tests first
           step gpu_cupti 180 python3 -m pytest -m gpu tests/test_gpu_core.py -k cupti -q -rA -p no:cacheprovider
           step decode_cupti_bf16 240 python3 run.py +experiment=decode "precision=[bf16,fp32]" \
             "sizes.model_names=[llama3_8b]" measure.timer=cupti run.fail_on_error=false $Q \
             hydra.run.dir=$REF/decode_cupti/bf16_cupti
           step decode_events_bf16 240 python3 run.py +experiment=decode "precision=[bf16,fp32]" \
             "sizes.model_names=[llama3_8b]" run.fail_on_error=false $Q hydra.run.dir=$REF/decode_cupti/bf16_events ;;
  decode_ablation)  # issue 30: stage 14's defines one at a time (DECODE_SWEEP in tests/test_decode_emulation.py,
           # the YAML's header), no baselines, at Llama-3 8B qkv and 70B mlp_down for 1 / 16 / 64 tokens;
           # the 18 builds compiled first, all at once (the sweep's jobs would compile them one by one)
           DECODE_DEFINES="{SPLIT_K:1} {X_SMEM:0} {SPLIT_K:0} {W_DEPTH:2,W_DEPTH_SMALL:4} {W_HINT:0} {MT:1,W_DEPTH:8} {M1_SIMT:1} {X_BLOCKS:1} {FP8_F16_MMA:0,W_DEPTH:3}"
           decode_precompile decode_precompile 240 "$DECODE_DEFINES"
           decode_sweep decode_ablation 570 bf16,fp8 \
             "[[1,6144,4096],[16,6144,4096],[64,6144,4096],[1,8192,28672],[16,8192,28672],[64,8192,28672]]" "[]" \
             '{SPLIT_K:1},{X_SMEM:0},{SPLIT_K:0},{W_DEPTH:2,W_DEPTH_SMALL:4},{W_HINT:0},{MT:1,W_DEPTH:8},{M1_SIMT:1},{X_BLOCKS:1},{FP8_F16_MMA:0,W_DEPTH:3}' ;;
  fp8_scaled_tests) fp8_scaled_tests ;;
  fp8_scaled_sweeps) fp8_scaled_sweeps ;;
  fp8_block_tests) fp8_block_tests ;;
  decode_ncu)  # issue 30: where stage 14's time goes (DRAM throughput, stalls) beside cuBLAS's decode kernel,
           # Llama-3 70B attn_o (8192 x 8192) at 1 and 64 tokens; one launch each, ncu's text report is the log
           # (the 4th launch of a kernel whose name matches: past the checked call and the FP64 reference; not
           # gemmlab's own L2 flush kernels, which session9b's filter caught instead of cuBLAS's)
           for mk in "decode_splitk 1 decode_splitk" "decode_splitk 64 decode_splitk" "cublas 1 ^(?!gemmlab).*(gemv|gemm|xmma|cutlass)" \
                     "cublas 64 ^(?!gemmlab).*(gemv|gemm|xmma|cutlass)"; do set -- $mk
             step ncu_$1_t$2 120 ncu --clock-control none -k "regex:$3" --launch-skip 3 -c 1 \
               --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
               --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
               python3 run.py variant=$1 precision=bf16 "layouts=[nt]" sizes.square=[] "sizes.shapes=[[$2,8192,8192]]" \
               measure=quick "measure.baseline=[]" measure.guard_bytes=0 run.isolate=none $Q hydra.run.dir=/tmp/ncu_$1_$2
           done ;;
  decode_v2)  # issue 30: stage 14's TMA weight ring (W_PIPE 1, for M <= 16; W_PIPE_MAX_M 64: at every M) against
           # the register ring (W_PIPE 0) at Llama-3 8B qkv and 70B attn_o / mlp_gate_up, 1 / 16 / 64 tokens, the
           # libraries timed interleaved (pct_of_baseline: the faster of cuBLAS / cuBLASLt in bf16, cuBLASLt in
           # fp8); the GPU tests first (they include W_PIPE 1); then ncu on W_PIPE 1 at (1, 8192, 8192)
           step gpu_decode_v2 300 python3 -m pytest -m gpu tests/test_gpu_decode.py -q -rA -s -p no:cacheprovider
           decode_precompile decode_v2_precompile 150 "{W_PIPE:1} {W_PIPE:0} {W_PIPE:1,W_PIPE_MAX_M:64}"
           decode_sweep decode_v2 200 bf16,fp8 \
             "[[1,6144,4096],[16,6144,4096],[64,6144,4096],[1,8192,8192],[64,8192,8192],[1,57344,8192],[16,57344,8192],[64,57344,8192]]" \
             "[cublas,cublaslt]" '{W_PIPE:1},{W_PIPE:0},{W_PIPE:1,W_PIPE_MAX_M:64}'
           step ncu_decode_v2_t1 120 ncu --clock-control none -k "regex:decode_splitk" --launch-skip 3 -c 1 \
             --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
             --section Occupancy --section LaunchStats \
             python3 run.py variant=decode_splitk precision=bf16 "layouts=[nt]" sizes.square=[] "sizes.shapes=[[1,8192,8192]]" \
             'variant.decode_splitk.cuda.defines={W_PIPE:1}' measure=quick "measure.baseline=[]" measure.guard_bytes=0 \
             run.isolate=none $Q hydra.run.dir=/tmp/ncu_decode_v2_1 ;;
  decode_v3)  # issue 30: stage 14's TMA ring (W_PIPE 1) read in longer row pieces (MT 1: 16 rows a warp; more
           # 64-byte chunks a stage; 4 warps with 1.5 KB a row): session9c found DRAM at 55% with 320-byte pieces
           # of 32 rows a warp, the ring's depth no help; bf16 at 1 and 16 tokens, the faster library interleaved
           decode_sweep decode_v3 150 bf16 "[[1,6144,4096],[16,6144,4096],[1,8192,8192],[1,57344,8192],[16,57344,8192]]" \
             "[cublas,cublaslt]" '{W_PIPE:1},{W_PIPE:1,MT:1,WP_CHUNKS_SMALL:12},{W_PIPE:1,MT:1,WP_CHUNKS_SMALL:8,WP_STAGES_SMALL:3},{W_PIPE:1,MT:1,WARPS:4,WP_CHUNKS_SMALL:24},{W_PIPE:1,MT:1,WARPS:4,WP_CHUNKS_SMALL:12,WP_STAGES_SMALL:4}' ;;
  decode_wgmma_tests)  # issue 30: stage 17 (decode_wgmma) on the GPU: correctness at every M, tails, the define sets;
           # then compute-sanitizer's memcheck on a few points (with and without clusters; rows into $REF)
           step gpu_decode_wgmma 300 python3 -m pytest -m gpu tests/test_gpu_decode.py -k stage_17 -q -rA -p no:cacheprovider
           step sanitize_decode_wgmma 200 python3 run.py -m variant=decode_wgmma "precision=bf16,fp8" "layouts=[nt]" \
             measure.fp8_scaling=tensor sizes.square=[] "sizes.shapes=[[5,1000,1000],[64,136,1024],[16,6144,4096]]" \
             measure=quick "measure.baseline=[]" measure.sanitize=memcheck 'variant.decode_wgmma.cuda.defines={CLUSTER:1},{CLUSTER:2}' \
             run.fail_on_error=false $Q run.name=sanitize_decode_wgmma hydra.sweep.dir=$REF/sanitize_decode_wgmma ;;
  decode_wgmma)  # issue 30: stage 17's define sets (DECODE_WGMMA_SETS: others) at 1, 16 and 64 tokens, bf16 and fp8, the
           # libraries interleaved
           stage_sweep decode_wgmma decode_wgmma 540 "${DECODE_WGMMA_SETS:-$DECODE_WGMMA_SWEEP}" "$DECODE_WGMMA_SHAPES" "bf16,fp8" ;;
  decode_wgmma_quick)  # issue 30: stage 17's most telling define sets (the defaults, 64-row tiles, 2 and 4 boxes along K,
           # 256-row tiles by the producer warpgroup, clusters) at 70B mlp_down (1, 16, 64 tokens) and 8B qkv (64 tokens),
           # bf16 and fp8, the libraries interleaved: 60 points
           stage_sweep decode_wgmma decode_wgmma_quick 240 "$DECODE_WGMMA_QUICK" "$DECODE_WGMMA_QUICK_SHAPES" "bf16,fp8" ;;
  decode_wgmma_auto)  # issue 30 in one GPU call: the define sweep above (DECODE_WGMMA_SETS: others; ~5-7 s a job
           # of 6 points as session28b's stage-16 sweep ran: 22 jobs in ~150 s), each (precision, token count)'s pick
           # (the fastest define set against the defaults, over the libraries interleaved, among those with every point
           # ok; the defaults unless faster by more than 1%), then the decode experiment at the picks (~70 s a run)
           # (its own folder: rows append, and stage decode_wgmma's sweep in the same session would mix into it)
           stage_sweep decode_wgmma decode_wgmma_auto 300 "${DECODE_WGMMA_SETS:-$DECODE_WGMMA_SWEEP}" "$DECODE_WGMMA_SHAPES" \
             "bf16,fp8"
           rm -rf "$LOGS/decode_wgmma_pick"  # a warm machine's earlier picks are not this sweep's
           step decode_wgmma_pick 90 python3 -m analysis.compare --normalized "$REF/decode_wgmma_auto" \
             --out "$LOGS/decode_wgmma_pick" --pick variant.decode_wgmma.cuda.defines --by precision,m --no-figures
           decode_wgmma_at_picks "${DECODE_WGMMA_PICKS:-$LOGS/decode_wgmma_pick/picks.tsv}" ;;
  decode_wgmma_experiment)  # issue 30: the decode experiment (every shape, copy probe in the same run) with stage 17
           # and the libraries only (stages 14 and 16 have theirs: session28b), one run per precision
           for prec in bf16 fp8; do
             decode_wgmma_run "$prec" 1,16,64 - "$REF/decode_wgmma_experiment/$prec" "decode_wgmma_experiment_$prec"
           done ;;
  decode_wgmma_ncu)  # issue 30: stage 17 at 1 and 64 tokens beside cuBLASLt at 64, Llama-3 70B mlp_down (8192 x 28672),
           # bf16: DRAM and L2 throughput, the tokens' L2 traffic, stalls; DECODE_WGMMA_NCU: other ncu_points entries
           ncu_points bf16 "${DECODE_WGMMA_NCU:-$DECODE_WGMMA_NCU_DEFAULT}" ;;
  decode_rows_tests)  # issue 30: stage 16 (decode_rows) on the GPU: correctness at every M, tails, defines
           step gpu_decode_rows 240 python3 -m pytest -m gpu tests/test_gpu_decode.py -k stage_16 -q -rA -p no:cacheprovider ;;
  decode_rows)  # issue 30: the decode experiment (stages 14 and 16 beside cuBLAS / cuBLASLt, also interleaved, and
           # the copy probe; one run per precision)
           # (DECODE_ROWS_OVERRIDES: more overrides, e.g. stage 16's defines)
           # (DECODE_ROWS_RUNS: which of the two runs, "bf16 fp8" by default)
           for prec in ${DECODE_ROWS_RUNS:-bf16 fp8}; do
             step decode_rows_$prec 300 python3 run.py +experiment=decode "precision=[$prec,fp32]" run.fail_on_error=false $Q \
               ${DECODE_ROWS_OVERRIDES:-} hydra.run.dir=$REF/decode_rows/$prec
           done ;;
  decode_rows_sweep)  # issue 30: stage 16's defines one at a time at Llama-3 8B qkv, 70B attn_o and mlp_gate_up
           rows_sweep decode_rows_sweep 200 "$DECODE_ROWS_SWEEP" "$DECODE_ROWS_SHAPES" ;;
  decode_rows_wide)  # issue 30: XS_WIDE (stage 16's activation tiles at 32-64 tokens) against the path before it
           rows_sweep decode_rows_wide 240 "{XS_WIDE:0},{XS_WIDE:1}" "$DECODE_WIDE_SHAPES" ;;
  decode_rows_frag)  # issue 30: stage 16's weight tile in the A operand's order (AFRAG), unconditional activation
           # reads (XPAD), fp8's high halves converted without a shift (CVT_H1; a repeat in bf16), XS_WIDE: 1, 16 and
           # 64 tokens. session28b ran it when all four were off by default; since they are the defaults, the sets
           # are the defaults before session28b, the defaults, and each of the four taken away from them
           rows_sweep decode_rows_frag 300 "{AFRAG:0,XPAD:0,CVT_H1:0,XS_WIDE:0},{XS_WIDE:-1},{AFRAG:0},{XPAD:0},{CVT_H1:0},{XS_WIDE:0}" "$DECODE_FRAG_SHAPES" ;;
  decode_rows_xf16)  # issue 30: fp8 activations converted once a step ahead (XF16 2) against every warp converting
           rows_sweep decode_rows_xf16 300 "{XF16:0},{XF16:2},{XS_WIDE:1,XF16:0},{XS_WIDE:1,XF16:2}" "$DECODE_XF16_SHAPES" fp8 ;;
  decode_rows_ncu)  # issue 30: why stage 16 streams slower at 16 tokens than at 1 (X's L1 hits, L2 traffic, stalls),
           # at Llama-3 70B mlp_down (8192 x 28672), beside cuBLAS at 16 tokens; one launch each (past the checked call)
           for mk in "decode_rows 1 decode_rows" "decode_rows 16 decode_rows" "cublas 16 ^(?!gemmlab).*(gemv|gemm|xmma|cutlass)"; do set -- $mk
             step ncu_rows_$1_t$2 120 ncu --clock-control none -k "regex:$3" --launch-skip 3 -c 1 \
               --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
               --section WarpStateStats --section SchedulerStats --section LaunchStats \
               python3 run.py variant=$1 precision=bf16 "layouts=[nt]" sizes.square=[] "sizes.shapes=[[$2,8192,28672]]" \
               measure=quick "measure.baseline=[]" measure.guard_bytes=0 run.isolate=none $Q hydra.run.dir=/tmp/ncu_rows_$1_$2
           done ;;
  decode_wide_ncu)  # issue 30: what holds stage 16 at 64 tokens to ~70% of the library (session28b's defaults)
           # beside the defaults before them and cuBLASLt, Llama-3 70B mlp_down (8192 x 28672), bf16; DECODE_NCU: other
           # ncu_points entries
           ncu_points bf16 "${DECODE_NCU:-$DECODE_NCU_DEFAULT}" ;;
  fp8_ncu)  # issue 30: what limits FP8: stage 16 at 1 and 16 tokens (Llama-3 70B mlp_gate_up; the e4m3 -> f16
           # conversions, issue slots?) and stage 15 beside cuBLASLt's block-scaled kernel (DeepSeek-V3 4096 x 7168 x
           # 16384: pipes, stalls). FP8_NCU: entries "variant m n k scaling kernel-regex defines" (ncu_points)
           ncu_points fp8 "${FP8_NCU:-decode_rows 1 57344 8192 tensor decode_rows -;decode_rows 16 57344 8192 tensor decode_rows -;wgmma_fp8_block 4096 7168 16384 block wgmma_fp8_block -;cublaslt 4096 7168 16384 block ^(?!gemmlab).*(gemm|xmma|cutlass|nvjet) -}" ;;
  fp8_block_gaps)  # issue 30: the two DeepSeek-V3 points stage 15 is still under cuBLASLt at (session24b): moe_router at
           # 4096 tokens (neither L2- nor HBM-bound by arithmetic) and shared_gate_up at 1024 (L2 at 81% of the probe),
           # each beside cuBLASLt's block-scaled kernel: where a unit's cycles go
           ncu_points fp8 "wgmma_fp8_block 4096 256 7168 block wgmma_fp8_block -;cublaslt 4096 256 7168 block ^(?!gemmlab).*(gemm|xmma|cutlass|nvjet) -;wgmma_fp8_block 1024 4096 7168 block wgmma_fp8_block -;cublaslt 1024 4096 7168 block ^(?!gemmlab).*(gemm|xmma|cutlass|nvjet) -" ;;
  ws_ncu)  # issue 32: what holds stage 12 at parity: it and cuBLASLt at layout nt, BF16, 4096 and 6144 (tensor pipe,
           # DRAM and L2 bytes, stalls, the clock ncu saw). WS_NCU: entries as FP8_NCU's (scaling "-")
           ncu_points bf16 "${WS_NCU:-wgmma_ws 4096 4096 4096 - wgmma_ws -;cublaslt 4096 4096 4096 - ^(?!gemmlab).*(gemm|xmma|cutlass|nvjet) -;wgmma_ws 6144 6144 6144 - wgmma_ws -;cublaslt 6144 6144 6144 - ^(?!gemmlab).*(gemm|xmma|cutlass|nvjet) -}" ;;
  decode_wgmma_maps)  # issue 30: stage 17's tensor maps as by-value parameters (MAP_PARAMS 1) against the device buffer,
           # and the split tiles' counters prefetched into the L2 (WS_PREFETCH 1), after their GPU tests: each set twice,
           # in the order A B C D D C B A, at the small matrices where stage 17 trails the
           # libraries (8B qkv and attn_o, 7168 x 2048, 2112 x 7168, the router) and two large ones, the libraries
           # interleaved; then the stamps (does the first data come sooner?)
           step gpu_decode_wgmma_maps 150 python3 -m pytest -m gpu tests/test_gpu_decode.py -k "stage_17 and (MAP_PARAMS or WS_PREFETCH)" \
             -q -rA -p no:cacheprovider
           stage_sweep decode_wgmma decode_wgmma_maps 240 "${DECODE_WGMMA_MAPS_SETS:-$DECODE_WGMMA_MAPS}" \
             "$DECODE_WGMMA_MAPS_SHAPES" "bf16,fp8"
           for prec in bf16 fp8; do
             step decode_wgmma_maps_trace_$prec 100 python3 -m gemmlab.bench.decode_trace --variant decode_wgmma \
               --precision $prec --shapes 1x6144x4096 16x4096x4096 64x6144x4096 --defines "{MAP_PARAMS:0}" "{}" "{WS_PREFETCH:1}" \
               --out "$LOGS/decode_wgmma_maps_trace_$prec.jsonl"
           done ;;
  decode_wgmma_dyn)  # issue 30: stage 17's dynamic tail (DYN 1: each tile's last ~DYN_PCT% of k-blocks handed out by
           # ticket as the SMs come free) against the static split, after its GPU tests: the large matrices where fp8
           # misses 90% of the copy probe and 8B qkv, 1 / 16 / 64 tokens, bf16 and fp8, the libraries interleaved; then
           # the stamps (do the SMs' stream ends bunch together, and does the median stay where the static split has
           # it with DYN_PUB 1?)
           step gpu_decode_wgmma_dyn 150 python3 -m pytest -m gpu tests/test_gpu_decode.py -k "stage_17 and DYN" -q -rA \
             -p no:cacheprovider
           stage_sweep decode_wgmma decode_wgmma_dyn 270 "${DECODE_WGMMA_DYN_SETS:-$DECODE_WGMMA_DYN}" \
             "$DECODE_WGMMA_DYN_SHAPES" "bf16,fp8"
           step decode_wgmma_dyn_trace 120 python3 -m gemmlab.bench.decode_trace --variant decode_wgmma --precision fp8 \
             --shapes 1x8192x28672 16x36864x7168 64x8192x28672 \
             --defines "{}" "{DYN:1}" "{DYN:1,DYN_PUB:1}" "{DYN:1,DYN_PUB:1,DYN_PCT:20,DYN_CK:8}" \
             --out "$LOGS/decode_wgmma_dyn_trace.jsonl" ;;
  decode_wgmma_rules)  # issue 30: stage 17's rules (L2_HINT, STAGES by matrix size, CONSUMERS by tokens) against the
           # defaults before them, bf16 and fp8, the libraries interleaved (130 points: ~70 s on an H100)
           stage_sweep decode_wgmma decode_wgmma_rules 240 "${DECODE_WGMMA_RULES_SETS:-$DECODE_WGMMA_RULES}" \
             "$DECODE_WGMMA_RULES_SHAPES" "bf16,fp8" ;;
  decode_wgmma_trace)  # issue 30: stage 17's consumer warpgroups stamped (TRACE 1): start, first data, last MMA, end,
           # against the event time, single / after a memset / back to back, the library beside it (cuBLAS in bf16,
           # cuBLASLt in fp8): where its ~10 us over the copy rate at every size (the H100's decode experiment) goes
           for prec in bf16 fp8; do
             step decode_wgmma_trace_$prec 150 python3 -m gemmlab.bench.decode_trace --variant decode_wgmma \
               --precision $prec --shapes ${DECODE_WGMMA_TRACE_SHAPES:-1x6144x4096 1x8192x28672 64x8192x28672 1x57344x8192 16x36864x7168} \
               --dump --out "$LOGS/decode_wgmma_trace_$prec.jsonl"
           done ;;
  decode_trace)  # issue 30: stage 16's warps stamped (TRACE 1): start, first weights, last MMA, end, against the
           # event time, single / after a memset / back to back, cuBLAS beside it (gemmlab/bench/decode_trace.py)
           step decode_trace 300 python3 -m gemmlab.bench.decode_trace ${DECODE_TRACE_ARGS:-} --out "$LOGS/decode_trace.jsonl" ;;
  read_patterns)  # issue 30: HBM read bandwidth of the decode access patterns alone (no math): the copy-like
           # read, a warp per row, stage 14's m16-fragment tiles in both work orders (gemmlab/bench/read_patterns.py)
           step read_patterns 240 python3 -m gemmlab.bench.read_patterns --out "$LOGS/read_patterns.jsonl" ;;
  decode_tests)  # issue 30: stage 14 on the GPU (correctness with and without the split, the workspace reused)
           step gpu_decode 300 python3 -m pytest -m gpu tests/test_gpu_decode.py -q -rA -s -p no:cacheprovider ;;
  *) echo "unknown stage $stage" ;;
esac; done
