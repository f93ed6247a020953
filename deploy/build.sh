#!/bin/sh
# Builds what deploy/compose.yaml runs, offline: fenec's static binaries
# (and the drill's resolver and wide-area proxy) into deploy/bin/, the tokens into
# deploy/tokens/ and the certificates and the directory's secrets into
# deploy/certs/ (deploy/certs.sh; once: kept across builds), Debian's
# Prometheus with the C library it links into deploy/bin/prometheus/ (when
# the prometheus package is installed), then the FROM-scratch images.
set -eu
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o deploy/bin/ ./cmd/fenec-node ./cmd/fenec-shard ./cmd/fenec
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o deploy/bin/fenec-drill-resolver ./bench/drill/resolver
# The drill's wide-area link where the kernel has no netem: run on the
# host, in a container's network namespace (bench/drill/wan.go, deploy/wan.sh).
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o deploy/bin/fenec-drill-wanproxy ./bench/drill/wanproxy

# One random token per file, readable by the containers' user (uid 65534)
# through the secret's bind mount, and by nobody else on the host: the
# directory is the owner's alone.
mkdir -p deploy/tokens
chmod 700 deploy/tokens
for t in router admin http replication; do
  if [ ! -s "deploy/tokens/$t" ]; then
    od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "deploy/tokens/$t"
    echo >> "deploy/tokens/$t"
  fi
  chmod 644 "deploy/tokens/$t"
done

# The deployment's CA, one certificate per service (named after it, and
# loopback for its health check), the operator's and Prometheus's client
# certificates, the directory's own CA and the routers' certificates of
# it, the routers' directory key and password (deploy/certs.sh; once: kept
# across builds, and `deploy/certs.sh NAME` rotates). Like the tokens: the
# directory is the owner's alone, the files readable by the containers'
# user through their secret mounts.
deploy/certs.sh

compose() {
  if command -v docker-compose >/dev/null; then docker-compose "$@"; else docker compose "$@"; fi
}

services=""
if [ -x /usr/bin/prometheus ]; then
  rm -rf deploy/bin/prometheus
  mkdir -p deploy/bin/prometheus/usr/bin
  cp /usr/bin/prometheus deploy/bin/prometheus/usr/bin/
  # The dynamic loader and every library ldd names, at the same paths.
  for lib in $(ldd /usr/bin/prometheus | grep -o '/[^ ]*'); do
    mkdir -p "deploy/bin/prometheus$(dirname "$lib")"
    cp -L "$lib" "deploy/bin/prometheus$lib"
  done
  compose -f deploy/compose.yaml --profile prometheus build
else
  echo "build.sh: no /usr/bin/prometheus (apt-get install prometheus): the prometheus image is not built" >&2
  compose -f deploy/compose.yaml build
fi
