#!/usr/bin/env bash
# After the push, on a schedule (cron, a Kubernetes CronJob, CI): check the logged traffic and,
# when it moved (`monitor` exit 4), retrain on the newest span of the data, warm-started from
# the production model; the gate decides whether the new model ships (docs/continuous-training.md).
#
#   examples/retrain_when_moved.sh RUN_DIR REQUEST_LOGS 'DATA/span-{SPAN}/*.csv' LABEL [run flags]
#
# Exit codes: 0 nothing moved, or the retrained model was promoted; 3 it was retrained and the
# gate rejected it (production stays); 2 bad input (no new requests, no such run); 1 a failure.
set -u
if [ $# -lt 4 ]; then
    echo "usage: $0 RUN_DIR REQUEST_LOGS DATA_PATTERN LABEL [run flags...]" >&2
    exit 2
fi
run_dir=$1 requests=$2 data=$3 label=$4
shift 4
amp=${AMP_PIPELINE:-amp-pipeline}  # e.g. "python -m amp_pipeline"

$amp monitor --run "$run_dir" --requests "$requests" --output "$run_dir/monitor"
code=$?
case $code in
    0) echo "retrain: the traffic is as the model was trained on; nothing to do"; exit 0 ;;
    4) echo "retrain: the traffic moved; training on the newest span of $data" ;;
    *) echo "retrain: monitor stopped (exit $code); nothing retrained" >&2; exit "$code" ;;
esac
# The newest span by default; --warm-start auto starts both twins from production on spans.
exec $amp run --data "$data" --label "$label" --output "$run_dir" "$@"
