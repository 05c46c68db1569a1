#!/usr/bin/env bash
# Local servers for the remote-read tests: moto's S3 server and nginx, each on a free
# 127.0.0.1 port, with their state in DIR.
#   eval "$(bash scripts/remote-servers.sh start DIR)"   # prints the exports
#   bash scripts/remote-servers.sh stop DIR
# Exports: TESSERA_TEST_S3_ENDPOINT, TESSERA_TEST_S3_BUCKET (created empty),
# TESSERA_TEST_HTTP_URL (serves TESSERA_TEST_HTTP_ROOT), TESSERA_TEST_HTTP_LOG (nginx's
# access log: "METHOD URI RANGE STATUS BODY_BYTES" per request), and dummy AWS
# credentials (moto accepts any); for the push tests TESSERA_TEST_DAV_URL (nginx's /dav/,
# taking PUTs), TESSERA_TEST_OCI_URL, TESSERA_TEST_OCI_DIR, TESSERA_TEST_OCI_AUTH_URL
# (docker-registry, see the block at the end). Needs TESSERA_VENV's moto_server, nginx,
# docker-registry, htpasswd and git-lfs (installed with apt-get when missing and running
# as root).
set -euo pipefail
cmd="${1:?start|stop}"
dir="${2:?state directory}"
VENV="${TESSERA_VENV:-.venv}"

free_port() {
  "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # port, name
  for _ in $(seq 1 100); do
    if "$VENV/bin/python" -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),0.2)' "$1" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "remote-servers: $2 did not start on port $1" >&2
  return 1
}

stop() {
  for f in "$dir/moto.pid" "$dir/nginx.master" "$dir/registry.pid" "$dir/registry-auth.pid"; do
    if [ -f "$f" ]; then
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    fi
  done
  for f in "$dir/s3s.pid" "$dir/s3s-nginx.master"; do
    if [ -f "$f" ]; then
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    fi
  done
}

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac

mkdir -p "$dir/www" "$dir/tmp" "$dir/dav"
chmod 755 "$dir" "$dir/www" "$dir/dav"
if [ ! -x "$VENV/bin/moto_server" ]; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'moto[server]==5.1.18' >&2
fi
NGINX="$(command -v nginx || true)"
[ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
if [ -z "$NGINX" ] && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -qq nginx-light || (apt-get update -qq && apt-get install -y -qq nginx-light)) >&2
  NGINX=/usr/sbin/nginx
fi

s3_port="$(free_port)"
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$dir/moto.log" 2>&1 &
echo $! >"$dir/moto.pid"
wait_port "$s3_port" moto
# Bucket creation (object_store reads and writes objects, it does not make buckets).
"$VENV/bin/python" - "$s3_port" <<'PY' >&2
import sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/tessera-test", method="PUT")
urllib.request.urlopen(req, timeout=10).read()
PY
echo "export TESSERA_TEST_S3_ENDPOINT=http://127.0.0.1:$s3_port"
echo "export TESSERA_TEST_S3_BUCKET=tessera-test"
echo "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1"

if [ -n "$NGINX" ]; then
  http_port="$(free_port)"
  user_line=""
  [ "$(id -u)" = 0 ] && user_line="user root root;"
  cat >"$dir/nginx.conf" <<CONF
$user_line
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log;
events { worker_connections 64; }
http {
  log_format bytes '\$request_method \$uri \$http_range \$status \$body_bytes_sent';
  access_log $dir/access.log bytes;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  types { application/octet-stream bin; }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$http_port;
    root $dir/www;
    etag on;
    # The push tests' HTTP PUT target (WebDAV-style): $dir/dav/.
    location /dav/ {
      root $dir;
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
      client_max_body_size 0;
    }
  }
}
CONF
  "$NGINX" -p "$dir" -c "$dir/nginx.conf" >"$dir/nginx.out" 2>&1 &
  echo $! >"$dir/nginx.master"
  wait_port "$http_port" nginx
  echo "export TESSERA_TEST_HTTP_URL=http://127.0.0.1:$http_port"
  echo "export TESSERA_TEST_HTTP_ROOT=$dir/www"
  echo "export TESSERA_TEST_HTTP_LOG=$dir/access.log"
  echo "export TESSERA_TEST_DAV_URL=http://127.0.0.1:$http_port/dav/"
else
  echo "remote-servers: no nginx; the HTTP tests will not run" >&2
fi

# The push tests' servers (crates/tessera/tests/all/push.rs): Debian's docker-registry
# (distribution 2.8) as the OCI registry, twice — without auth (TESSERA_TEST_OCI_URL,
# TESSERA_TEST_OCI_DIR its storage) and with htpasswd auth (TESSERA_TEST_OCI_AUTH_URL,
# user tessera / password tessera-test); nginx's /dav/ above takes HTTP PUTs
# (TESSERA_TEST_DAV_URL). git and git-lfs are programs, no server (the tests make bare
# repositories). Installed with apt-get when missing and running as root.
if [ "$(id -u)" = 0 ]; then
  need=""
  command -v git-lfs >/dev/null || need="$need git-lfs"
  command -v docker-registry >/dev/null || need="$need docker-registry"
  command -v htpasswd >/dev/null || need="$need apache2-utils"
  if [ -n "$need" ]; then
    # shellcheck disable=SC2086
    (apt-get install -y -qq $need || (apt-get update -qq && apt-get install -y -qq $need)) >&2
  fi
fi
if command -v docker-registry >/dev/null && command -v htpasswd >/dev/null; then
  start_registry() { # name, port, extra config
    mkdir -p "$dir/$1"
    cat >"$dir/$1.yml" <<YML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/$1
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$2
$3
YML
    docker-registry serve "$dir/$1.yml" >"$dir/$1.log" 2>&1 &
    echo $! >"$dir/$1.pid"
    wait_port "$2" "$1"
  }
  oci_port="$(free_port)"
  start_registry registry "$oci_port" ""
  htpasswd -Bbn tessera tessera-test >"$dir/htpasswd" 2>/dev/null
  oci_auth_port="$(free_port)"
  start_registry registry-auth "$oci_auth_port" "auth:
  htpasswd:
    realm: tessera-test
    path: $dir/htpasswd"
  echo "export TESSERA_TEST_OCI_URL=oci://127.0.0.1:$oci_port"
  echo "export TESSERA_TEST_OCI_DIR=$dir/registry"
  echo "export TESSERA_TEST_OCI_AUTH_URL=oci://127.0.0.1:$oci_auth_port"
else
  echo "remote-servers: no docker-registry; the OCI push tests will not run" >&2
fi

# Opt-in, TESSERA_S3S=1: s3s-fs, an S3 server over a directory ($dir/s3s, a bucket per
# folder), from crates.io, installed on first use into ${CARGO_TARGET_DIR:-target}/s3s-fs
# (0.14.1: the last that builds with rustc 1.95; minutes to compile on 2 cores, so the
# tests keep moto and the benchmark uses this). Unlike moto it reads only the requested
# range of a ranged GET and keeps an uploaded object's ETag (objects must be PUT
# through S3, not copied into the folder: for a file put there by hand it hashes the
# whole file on every request). It sits behind an nginx reverse proxy that logs the bytes
# it sends, as the other nginx does. Exports TESSERA_TEST_S3S_ENDPOINT (the proxy),
# TESSERA_TEST_S3S_DIRECT (s3s-fs itself), TESSERA_TEST_S3S_BUCKET (created empty) and
# TESSERA_TEST_S3S_LOG; credentials are the dummy ones above.
if [ "${TESSERA_S3S:-0}" = 1 ]; then
  s3s_root="${CARGO_TARGET_DIR:-$PWD/target}/s3s-fs"
  if [ ! -x "$s3s_root/bin/s3s-fs" ]; then
    echo "remote-servers: building s3s-fs 0.14.1 into $s3s_root (once; minutes)" >&2
    cargo install --quiet --locked s3s-fs@0.14.1 --features binary --root "$s3s_root" \
      --target-dir "$s3s_root/build" >&2
  fi
  mkdir -p "$dir/s3s/tessera-bench"
  s3s_port="$(free_port)"
  RUST_LOG=warn "$s3s_root/bin/s3s-fs" --host 127.0.0.1 --port "$s3s_port" \
    --access-key testing --secret-key testing "$dir/s3s" >"$dir/s3s.log" 2>&1 &
  echo $! >"$dir/s3s.pid"
  wait_port "$s3s_port" s3s-fs
  if [ -n "$NGINX" ]; then
    proxy_port="$(free_port)"
    mkdir -p "$dir/s3s-nginx"
    cat >"$dir/s3s-nginx/nginx.conf" <<CONF
$user_line
worker_processes 1;
daemon off;
pid $dir/s3s-nginx/nginx.pid;
error_log $dir/s3s-nginx/error.log;
events { worker_connections 4096; }
http {
  log_format bytes '\$request_method \$uri \$http_range \$status \$body_bytes_sent';
  access_log $dir/s3s-access.log bytes;
  client_body_temp_path $dir/tmp/s3s-body;
  proxy_temp_path $dir/tmp/s3s-proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  server {
    listen 127.0.0.1:$proxy_port;
    client_max_body_size 0;
    location / {
      proxy_pass http://127.0.0.1:$s3s_port;
      proxy_http_version 1.1;
      proxy_set_header Host \$http_host;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
CONF
    "$NGINX" -p "$dir/s3s-nginx" -c "$dir/s3s-nginx/nginx.conf" >"$dir/s3s-nginx.out" 2>&1 &
    echo $! >"$dir/s3s-nginx.master"
    wait_port "$proxy_port" "nginx (s3s-fs proxy)"
    echo "export TESSERA_TEST_S3S_ENDPOINT=http://127.0.0.1:$proxy_port"
    echo "export TESSERA_TEST_S3S_LOG=$dir/s3s-access.log"
  else
    echo "export TESSERA_TEST_S3S_ENDPOINT=http://127.0.0.1:$s3s_port"
  fi
  echo "export TESSERA_TEST_S3S_DIRECT=http://127.0.0.1:$s3s_port"
  echo "export TESSERA_TEST_S3S_BUCKET=tessera-bench"
fi
