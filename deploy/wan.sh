#!/bin/sh
# Puts a wide-area delay between the regions of a compose project that is
# up (deploy/compose.yaml): DELAY each way (default 25ms: a 50 ms round
# trip) between containers of different regions — g1 counts as eu's, g2 as
# us's, g3 as ap's —, none within a region. Run as root on the Docker host
# (it enters each container's network namespace with nsenter):
#
#   deploy/wan.sh PROJECT [DELAY]      e.g. deploy/wan.sh deploy 25ms
#
# With tc's netem in the kernel, a prio qdisc with a netem band and u32
# filters for the other regions' addresses on each container's eth0; they
# stay until the containers are removed or restarted, and this returns.
# Without netem, iptables redirects each container's new connections to the
# other regions to a delaying proxy in its namespace
# (deploy/bin/fenec-drill-wanproxy, made by deploy/build.sh), and this stays
# until interrupted, then takes the redirects and proxies off. Either way it
# prints what a health check from us1 takes of eu1 against of us2.
# It is the drill's own code (bench/drill/wan.go): `-wan-mode netem` or
# `proxy` in WAN_FLAGS forces one.
set -eu
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: deploy/wan.sh PROJECT [DELAY]   (PROJECT: the compose project's name, as docker-compose -p takes it)" >&2
  exit 2
fi
exec go run ./bench/drill -project "$1" -wan "${2:-25ms}" -wan-hold ${WAN_FLAGS:-}
