#!/bin/sh
# The compose deployment's certificates and secrets, in deploy/certs/
# ($FENEC_CERTS), made with fenec certs ($FENEC, default deploy/bin/fenec):
#
#   deploy/certs.sh            make what is missing: the deployment's CA, a
#                              certificate per service (and the operator's and
#                              Prometheus's client certificates), the
#                              directory's own CA and each router's
#                              certificate of it (its etcd member's ports and
#                              its etcd clients), the routers' directory key
#                              and password; kept after
#   deploy/certs.sh NAME...    issue NAME's certificates again (a router's of
#                              both CAs): a rotation; then
#                              docker-compose kill -s HUP NAME, or wait a few
#                              seconds (the files are watched)
#
# Either way the directory is its owner's alone, and every file a service
# mounts as a secret is made readable by the containers' user (uid 65534:
# a bind-mounted secret keeps its host mode and owner); the CAs' keys stay
# the owner's alone.
set -eu
cd "$(dirname "$0")/.."
fenec=${FENEC:-deploy/bin/fenec}
certs=${FENEC_CERTS:-deploy/certs}
routers="g1 g2 g3 eu1 eu2 eu3 us1 us2 us3 ap1 ap2 ap3"
others="n1 n2 n3 n4 n5 n6 n7 operator prometheus"

mkdir -p "$certs"
chmod 700 "$certs"
if [ $# -eq 0 ]; then
  if [ ! -s "$certs/ca.pem" ]; then
    "$fenec" certs --out "$certs" $routers $others
  fi
  if [ ! -s "$certs/etcd-ca.pem" ]; then
    "$fenec" certs --out "$certs" --etcd $routers
  fi
  # A directory made before a service was added (region ap's routers and
  # nodes): the missing ones issued under the same CAs.
  missing="" missingEtcd=""
  for name in $routers $others; do
    [ -s "$certs/$name.pem" ] || missing="$missing $name"
  done
  for name in $routers; do
    [ -s "$certs/$name-etcd.pem" ] || missingEtcd="$missingEtcd $name"
  done
  if [ -n "$missing" ]; then
    "$fenec" certs --out "$certs" $missing
  fi
  if [ -n "$missingEtcd" ]; then
    "$fenec" certs --out "$certs" --etcd $missingEtcd
  fi
else
  "$fenec" certs --out "$certs" "$@"
  etcd=""
  for name in "$@"; do
    case " $routers " in *" $name "*) etcd="$etcd $name" ;; esac
  done
  if [ -n "$etcd" ]; then
    "$fenec" certs --out "$certs" --etcd $etcd
  fi
fi
chmod 644 "$certs"/*.pem "$certs/directory.key" "$certs/directory.password"
chmod 600 "$certs/ca-key.pem" "$certs/etcd-ca-key.pem"
