#!/usr/bin/env bash
# Runs every bench once at its smallest, two at a time, each bench's
# table and log in a temporary directory (kept, and named, when one
# fails). The figures mean nothing at these sizes: this checks only that
# each bench starts what it starts, measures, stops it, and writes its
# table.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
dir=$(mktemp -d /tmp/fenec-bench-smoke.XXXXXX)

# lane runs its benches one after another: name, then the command, which
# writes its table to $dir/name.txt.
lane() {
  while [ $# -gt 0 ]; do
    local name=$1 cmd=$2
    shift 2
    local start=$SECONDS
    if ! bash -c "$cmd" >"$dir/$name.log" 2>&1; then
      echo "bench-smoke: $name failed (its log: $dir/$name.log):" >&2
      tail -n 20 "$dir/$name.log" >&2
      return 1
    fi
    if [ ! -s "$dir/$name.txt" ]; then
      echo "bench-smoke: $name wrote no table" >&2
      return 1
    fi
    echo "bench-smoke: $name ran in $((SECONDS - start)) s"
  done
}

lane \
  shard "$GO run ./bench/shard -only deployed,move -tls=false -rounds 1 -dur 1s -move-docs 2000 -out $dir/shard.txt -profile-out $dir/shard-profile.txt -move-profile-out '' -move-faults-out $dir/shard-move-faults.txt" \
  search "$GO run ./bench/search -n 2000 -q 50 -docs 2000 -vocab 2000 -out $dir/search.txt" \
  node "$GO run ./bench/node -d 300ms -rounds 1 -docs 1000 -o $dir/node.txt" \
  lease "$GO run ./bench/lease -leases 1 -runs 1 -tenants 2 -out $dir/lease.txt" \
  geo "$GO run ./bench/geo -small -out $dir/geo.txt" \
  mapping "$GO build -o $dir/mapping ./bench/mapping && $dir/mapping -before $dir/mapping -after $dir/mapping -n 2000 -dim 16 -rounds 1 -out $dir/mapping.txt" &
a=$!
lane \
  engine "cd bench/sqlite && $GO run . -n 2000 -singles 200 -reads 200 >$dir/engine.txt" \
  quota "$GO run ./bench/quota -n 500 -rounds 1 -puts 2000 -out $dir/quota.txt" \
  neighbour "$GO run ./bench/neighbour -rows 2000 -in-values 20000 -heavy 1 -d 1s -after 200ms -out $dir/neighbour.txt" \
  repl "$GO run ./bench/repl -warmup 20 -n 100 -lag 50 -tenants 2,20 -out $dir/repl.txt" \
  region "$GO run ./bench/region -runs 1 -tenants 2 -reads 100 -out $dir/region.txt" \
  directory "$GO run ./bench/directory -tenants 2000 -changes 20 -seq 50 -link-changes 10 -routed-rounds 1 -out $dir/directory.txt" &
b=$!
failed=0
wait $a || failed=1
wait $b || failed=1
if [ $failed = 1 ]; then
  echo "bench-smoke: failed; tables and logs kept in $dir" >&2
  exit 1
fi
rm -rf "$dir"
echo "bench-smoke: every bench ran"
