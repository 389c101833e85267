#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: Debian's `postgresql` (installed when
# missing), data directory under a temp folder, listening on 127.0.0.1 only, run as the `postgres`
# user (initdb refuses root), stopped and deleted when the command ends, however it ends.
# The command sees QJSN_POSTGRES_URL. Usage: bash scripts/with-postgres.sh <command> [args...]
set -euo pipefail

if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null; then
  echo "with-postgres: installing postgresql"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi
bin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -1)")

# As root, the cluster runs as `postgres`; as anyone else, as that user.
as_db_user=()
if [[ $(id -u) -eq 0 ]]; then as_db_user=(runuser -u postgres --); fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qjsn-pg.XXXXXX")
chmod 755 "$tmp"
if [[ $(id -u) -eq 0 ]]; then chown postgres: "$tmp"; fi
data="$tmp/data"
# A free port: let the kernel pick one, so parallel runs and a system cluster do not collide.
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')

stop() {
  "${as_db_user[@]}" "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap stop EXIT

"${as_db_user[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >"$tmp/initdb.log" 2>&1 \
  || { cat "$tmp/initdb.log"; exit 1; }
"${as_db_user[@]}" "$bin/pg_ctl" -D "$data" -l "$tmp/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -k $tmp -c fsync=off" start >/dev/null \
  || { cat "$tmp/server.log"; exit 1; }
echo "with-postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $data)"

export QJSN_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
"$@"
