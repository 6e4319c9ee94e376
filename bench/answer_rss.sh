#!/usr/bin/env bash
# (i) Peak memory of one large answer (bench/answer_rss.py): /v2 patterns as
# binary tensors against /v1 patterns as JSON numbers and base64, each on a
# fresh server.
#
#   bench/answer_rss.sh [--server PATH] [--runs 5] [--n 8000] [--v1-n 3900] [--only TEXT]
#   (run from anywhere)
set -euo pipefail
exec python3 "$(cd "$(dirname "$0")" && pwd)/answer_rss.py" "$@"
