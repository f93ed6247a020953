#!/bin/sh
# Builds fenec's static binaries into deploy/bin/ and the FROM-scratch
# images of deploy/compose.yaml from them.
set -eu
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o deploy/bin/ ./cmd/fenec-node ./cmd/fenec-shard ./cmd/fenec
if command -v docker-compose >/dev/null; then
  docker-compose -f deploy/compose.yaml --env-file deploy/.env.example build
else
  docker compose -f deploy/compose.yaml --env-file deploy/.env.example build
fi
