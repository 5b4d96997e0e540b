# Sourced by the prepared GPU scripts (gpu_check.sh, gpu_protocol.sh, gpu_protocol_short.sh) after they set $OUT: creates it,
# sets the offline environment, empties $OUT/status.txt and defines `step`.
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
: > "$OUT/status.txt"
step() {  # step NAME COMMAND...: run, log to $OUT/NAME.log, record the exit status
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? wall_s=$((SECONDS - start))" | tee -a "$OUT/status.txt"
}
