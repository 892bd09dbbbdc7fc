# tests/setup/lib.sh — shared pieces of the setup tests: a hub-layout tree of
# the k3-tiny fixture, a real nginx serving it on a loopback port, helpers.
# Sourced by e2e.sh, faults.sh and kill9.sh; needs bash, coreutils, nginx.
# Under pipefail, never end a pipe in `grep -q` or `head`: the writer gets
# SIGPIPE and the pipe fails at random. Grep files or here-strings instead.
set -euo pipefail

SLUICE=${SLUICE:?}
SRC=${SRC:?}
MODEL="$SRC/tests/fixtures/k3-tiny/model"
REPO=sluice-test/k3-tiny
COMMIT=0123456789abcdef0123456789abcdef01234567
TOKEN=sluice-test-token
# Short prompts: the first tokens of the fixture's "short" case.
TOKENS=448,259,309,412,370,399,335,283,72,307

T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-setup-test.XXXXXX")
PIDS=()
MOUNTS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

die() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

[ -d "$MODEL" ] || die "fixture model missing: $MODEL"
command -v nginx >/dev/null || die "nginx not found (scripts/install-deps.sh installs nginx-light)"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
# git's blob id: sha1 of "blob <size>\0" + content.
blob_id() { { printf 'blob %d\0' "$(stat -c %s "$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1; }

# make_hub ROOT: the hub layout of the fixture under ROOT. Files are served
# from ROOT/cdn/<repo>/resolve/<rev>/ (nginx redirects /<repo>/resolve/ there,
# as the hub redirects to its CDN); the commit directory is a link to main.
# The API answer lives at a static path: nginx ignores the query string when
# it maps a URI to a file, so ?blobs=true needs no trick.
make_hub() {
  local root=$1
  local files=$root/cdn/$REPO/resolve/main
  mkdir -p "$files" "$root/api/models/$REPO/revision"
  cp "$MODEL"/* "$files/"
  ln -s main "$root/cdn/$REPO/resolve/$COMMIT"
  local json='{"id":"'$REPO'","sha":"'$COMMIT'","siblings":[' sep=''
  for f in "$files"/*; do
    local name size
    name=$(basename "$f")
    size=$(stat -c %s "$f")
    case $name in
      *.safetensors|*.model)
        json+=$sep'{"rfilename":"'$name'","size":'$size',"blobId":"'$(printf '%s' "$name" | sha1sum | cut -c1-40)'","lfs":{"sha256":"'$(sha256_of "$f")'","size":'$size',"pointerSize":134}}' ;;
      *)
        json+=$sep'{"rfilename":"'$name'","size":'$size',"blobId":"'$(blob_id "$f")'"}' ;;
    esac
    sep=,
  done
  json+=']}'
  printf '%s' "$json" > "$root/api/models/$REPO/revision/main"
  ln -s main "$root/api/models/$REPO/revision/$COMMIT"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_nginx ROOT: nginx on a free loopback port (NGINX_PORT), started as the
# current user (master_process off: no worker user switch, which matters as
# root). Access log: $T/nginx/access.log, one line per request with the range
# asked for, the body bytes sent and the keep-alive connection's request count.
start_nginx() {
  local root=$1 dir=$T/nginx
  mkdir -p "$dir/tmp"
  for attempt in 1 2 3 4 5 6 7 8; do
    NGINX_PORT=$((20000 + RANDOM % 20000))
    cat > "$dir/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
  log_format hub '\$request_method "\$request_uri" \$status \$body_bytes_sent "\$http_range" conn=\$connection req=\$connection_requests auth="\$http_authorization"';
  access_log $dir/access.log hub;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  absolute_redirect off;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $root;
    location /api/ {
      default_type application/json;
      if (\$http_authorization != "Bearer $TOKEN") { return 401; }
    }
    location ~ ^/[^/]+/[^/]+/resolve/ { return 302 /cdn\$request_uri; }
    location /cdn/ { }
  }
}
CONF
    nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" &
    local pid=$!
    for i in $(seq 50); do
      if port_open "$NGINX_PORT"; then PIDS+=("$pid"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cat "$dir/error.log" >&2 || true
  die "nginx did not start"
}

# start_proxy NAME RULE...: the fault proxy in front of nginx; sets PROXY_PORT, PROXY_PID; logs to $T/NAME.log.
start_proxy() {
  local name=$1
  shift
  local args=()
  for r in "$@"; do args+=(--rule "$r"); done
  rm -f "$T/$name.port"
  "$PROXY" --upstream "$NGINX_PORT" --port-file "$T/$name.port" --log "$T/$name.log" "${args[@]}" &
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  for i in $(seq 50); do [ -s "$T/$name.port" ] && break; sleep 0.1; done
  [ -s "$T/$name.port" ] || die "fault proxy did not start"
  PROXY_PORT=$(cat "$T/$name.port")
}
stop_proxy() { kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; }

# serve_fixture: the fixture's hub layout served by nginx; sets HUB and LOG
# (its access log), for log_mark (a line count now) and log_since MARK.
serve_fixture() {
  make_hub "$T/hub"
  start_nginx "$T/hub"
  HUB=http://127.0.0.1:$NGINX_PORT
  LOG=$T/nginx/access.log
}
log_mark() { wc -l < "$LOG"; }
log_since() { tail -n +$(($1 + 1)) "$LOG"; }

# Runs a command that must fail; its stderr goes to $T/err.
must_fail() {
  if "$@" 2> "$T/err"; then cat "$T/err" >&2; die "expected to fail: $*"; fi
  cat "$T/err"
}

# Each non-hidden file in DIR matches the fixture byte for byte.
same_as_fixture() {
  local dir=$1
  for f in "$MODEL"/*; do cmp -s "$f" "$dir/$(basename "$f")" || die "$dir/$(basename "$f") differs from the fixture"; done
}

export HF_TOKEN=$TOKEN
