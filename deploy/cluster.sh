#!/usr/bin/env bash
# kvright's local control plane: real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# kwok-managed fake GPU nodes, all on 127.0.0.1, no container engine needed.
#
#   deploy/cluster.sh build    build the pinned binaries into $KVRIGHT_TOOLS_DIR (skips what is built)
#   deploy/cluster.sh up       start everything, wait until nodes are Ready, print the KUBECONFIG line
#                              (with the LeaderWorkerSet controller and its CRD; KVRIGHT_LWS=0: without;
#                              and the Gateway API Inference Extension's InferencePool CRD;
#                              KVRIGHT_INFERENCE_POOL=0: without, on a running cluster too)
#   deploy/cluster.sh down     stop what `up` started, by PID (idempotent)
#   deploy/cluster.sh env      print `export KUBECONFIG=...`
#   deploy/cluster.sh status   say what runs, what died, and the memory it uses (exit 1 unless all up)
#   deploy/cluster.sh restart etcd|apiserver [--kill]
#                              stop one server of the running cluster (--kill: SIGKILL, a crash) and start
#                              it again (same ports and data), then wait for the apiserver's /readyz;
#                              stop-server and start-server do the two halves (an outage in between)
#
# With Docker and kind on PATH and KVRIGHT_CLUSTER=kind, up/down/env use kind and deploy/kind.yaml instead.
# Documentation: docs/local-control-plane.md.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLCHAIN="$REPO_ROOT/deploy/toolchain"
TOOLS_DIR="${KVRIGHT_TOOLS_DIR:-$HOME/.cache/kvright/tools}"
CLUSTER_DIR="${KVRIGHT_CLUSTER_DIR:-$HOME/.cache/kvright/cluster}"
PY="${KVRIGHT_PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
START_TIMEOUT="${KVRIGHT_CLUSTER_START_TIMEOUT:-120}"   # seconds, per readiness wait
SERVICE_CIDR="10.96.0.0/16"
SERVICE_FIRST_IP="10.96.0.1"
POD_CIDR="10.244.0.0/16"
NODE_LABEL_SELECTOR="type=kwok"
GPU_TAINT_KEY="nvidia.com/gpu"
GPU_TAINT_VALUE="present"
# start order; `down` goes in reverse (and always tries every one, whatever KVRIGHT_LWS says)
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok lws-controller-manager)
LWS_COMPONENT=lws-controller-manager
LWS_CRD=leaderworkersets.leaderworkerset.x-k8s.io
INFERENCE_POOL_CRD=inferencepools.inference.networking.k8s.io

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

# KVRIGHT_LWS=0 starts the cluster without the LeaderWorkerSet controller and without its CRD.
lws_requested() { # -> 0 when `up` should start LWS
  case "${KVRIGHT_LWS:-1}" in
    1 | true | yes | on) return 0 ;;
    0 | false | no | off) return 1 ;;
    *) die "KVRIGHT_LWS=$KVRIGHT_LWS: want 1 (start the LeaderWorkerSet controller, the default) or 0 (without it)" ;;
  esac
}

# KVRIGHT_INFERENCE_POOL=0: no InferencePool CRD (inference.networking.k8s.io/v1); no controller goes with it.
inference_pool_requested() { # -> 0 when the InferencePool CRD should be installed
  case "${KVRIGHT_INFERENCE_POOL:-1}" in
    1 | true | yes | on) return 0 ;;
    0 | false | no | off) return 1 ;;
    *) die "KVRIGHT_INFERENCE_POOL=$KVRIGHT_INFERENCE_POOL: want 1 (install the InferencePool CRD, the default) or 0 (without it)" ;;
  esac
}

K8S_VERSION="$(cat "$TOOLCHAIN/kubernetes/VERSION")"
# The pinned version of a module, read from the wrapper module's go.mod (one source of truth).
mod_version() { # moddir module
  local v
  v="$(awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
    "$TOOLCHAIN/$1/go.mod")"
  [[ -n "$v" ]] || die "$2 is not required in deploy/toolchain/$1/go.mod"
  printf '%s' "$v"
}

# ---------------------------------------------------------------------------------------------- build

stamp_of() { # version moddir ldflags -> what a binary's stamp must say to be reused
  local sum
  sum="$(cat "$TOOLCHAIN/$2/go.mod" "$TOOLCHAIN/$2/go.sum" <(printf '%s' "$3") | sha256sum | cut -c1-16)"
  printf '%s module=%s' "$1" "$sum"
}

# Build the binaries of one wrapper module unless every one is present with a matching stamp.
# A binary without its stamp (an interrupted build) is rebuilt.
build_group() { # moddir version ldflags bin=pkg...
  local moddir="$1" version="$2" ldflags="$3"; shift 3
  local want missing=() pair bin pkg
  want="$(stamp_of "$version" "$moddir" "$ldflags")"
  for pair in "$@"; do
    bin="${pair%%=*}"
    if [[ -x "$TOOLS_DIR/$bin" && -f "$TOOLS_DIR/$bin.stamp" && "$(cat "$TOOLS_DIR/$bin.stamp")" == "$want" ]]; then
      continue
    fi
    [[ -e "$TOOLS_DIR/$bin" && ! -f "$TOOLS_DIR/$bin.stamp" ]] && log "$bin: binary without stamp (interrupted build?), rebuilding"
    missing+=("$pair")
  done
  if ((${#missing[@]} == 0)); then
    log "$moddir $version: cached in $TOOLS_DIR"
    return 0
  fi
  command -v go >/dev/null || die "go is not on PATH; Go >= 1.26 is needed to build the control plane (https://go.dev/dl)"
  local tmp blog started pid elapsed next=30 pkgs=()
  tmp="$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")"
  blog="$TOOLS_DIR/build-$moddir.log"
  for pair in "${missing[@]}"; do pkgs+=("${pair#*=}"); done
  log "building $moddir $version: ${missing[*]%%=*} (log: $blog)"
  started=$SECONDS
  # -v prints each package as it is compiled: the heartbeat below counts them so a long build shows progress.
  # One package: -o names the file. Several: -o dir/ names each after its package's last path element.
  local out="$tmp/"
  ((${#missing[@]} == 1)) && out="$tmp/${missing[0]%%=*}"
  (cd "$TOOLCHAIN/$moddir" && CGO_ENABLED=0 exec go build -v -p "${KVRIGHT_BUILD_JOBS:-2}" -trimpath \
    -ldflags "$ldflags" -o "$out" "${pkgs[@]}") >"$blog" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    elapsed=$((SECONDS - started))
    if ((elapsed >= next)); then
      log "  ... still building $moddir: $(grep -cv '^go: ' "$blog" || true) packages compiled, ${elapsed}s"
      next=$((next + 30))
    fi
    sleep 1
  done
  if ! wait "$pid"; then
    tail -n 30 "$blog" >&2
    rm -rf "$tmp"
    die "building $moddir $version failed; full log: $blog"
  fi
  for pair in "${missing[@]}"; do
    bin="${pair%%=*}"; pkg="${pair#*=}"
    if ((${#missing[@]} == 1)); then mv -f "$tmp/$bin" "$TOOLS_DIR/$bin"; else mv -f "$tmp/${pkg##*/}" "$TOOLS_DIR/$bin"; fi
    printf '%s' "$want" >"$TOOLS_DIR/$bin.stamp"
  done
  rm -rf "$tmp"
  printf '%s %s %s %ss\n' "$(date -u +%FT%TZ)" "$moddir" "$version" "$((SECONDS - started))" >>"$TOOLS_DIR/build-times.log"
  log "built $moddir $version in $((SECONDS - started))s"
}

k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}" f="-s -w" p
  minor="${minor%%.*}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  printf '%s' "$f"
}

# kwok v0.8.0 has no built-in stages; assemble its --config from the files named in deploy/kwok/stages.list,
# read from the pinned kwok module in the Go module cache.
build_kwok_stages() {
  local version="$1" dir out="$TOOLS_DIR/kwok-stages.yaml" f
  local want
  want="kwok $version $(sha256sum "$REPO_ROOT/deploy/kwok/stages.list" | cut -c1-16)"
  [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$want" ]] && return 0
  dir="$(cd "$TOOLCHAIN/kwok" && go mod download -json "sigs.k8s.io/kwok@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir" ]] || die "sigs.k8s.io/kwok@$version is not in the Go module cache (go mod download failed?)"
  local files
  mapfile -t files < <(grep -v '^[[:space:]]*\(#\|$\)' "$REPO_ROOT/deploy/kwok/stages.list")
  for f in "${files[@]}"; do
    [[ -f "$dir/$f" ]] || die "kwok $version has no $f (deploy/kwok/stages.list is out of date)"
  done
  {
    printf '# Generated by deploy/cluster.sh build from sigs.k8s.io/kwok@%s (see deploy/kwok/stages.list).\n' "$version"
    for f in "${files[@]}"; do printf -- '---\n'; cat "$dir/$f"; done
  } >"$out.tmp"
  mv -f "$out.tmp" "$out"
  printf '%s' "$want" >"$out.stamp"
}

# Debian's prometheus package, with its service kept from starting (policy-rc.d) and checked afterwards.
ensure_prometheus() {
  if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    log "prometheus: $(prometheus --version 2>&1 | head -n1)"
    return 0
  fi
  local cmd="apt-get update && apt-get install -y --no-install-recommends prometheus"
  if [[ "$(id -u)" != 0 ]]; then
    die "prometheus/promtool are missing and this is not root; run: sudo sh -c '$cmd'"
  fi
  command -v apt-get >/dev/null || die "prometheus/promtool are missing and there is no apt-get; install Prometheus >= 2.40 so that prometheus and promtool are on PATH"
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
  fi
  log "installing Debian's prometheus package (service start suppressed)"
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends prometheus >&2 || rc=$?
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || die "apt-get install prometheus failed (exit $rc)"
  # If the package started its service anyway, stop it: nothing of ours may listen beyond loopback.
  if command -v service >/dev/null && service prometheus status >/dev/null 2>&1; then
    log "the prometheus package started its service; stopping it"
    service prometheus stop >&2 || true
  fi
  command -v promtool >/dev/null || die "apt installed prometheus but promtool is not on PATH"
}

# The LeaderWorkerSet CRD(s), copied from the pinned lws module's config/crd/bases in the Go module cache
# into $TOOLS_DIR/lws-crds.yaml (one multi-document file), with a stamp like the binaries.
build_lws_crds() {
  local version="$1" dir out="$TOOLS_DIR/lws-crds.yaml" f want files
  want="lws $version"
  [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$want" ]] && return 0
  dir="$(cd "$TOOLCHAIN/lws" && go mod download -json "sigs.k8s.io/lws@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/config/crd/bases" ]] || die "sigs.k8s.io/lws@$version has no config/crd/bases in the Go module cache (go mod download failed?)"
  mapfile -t files < <(find "$dir/config/crd/bases" -maxdepth 1 -name '*.yaml' | sort)
  ((${#files[@]} > 0)) || die "sigs.k8s.io/lws@$version: no CRD yaml in config/crd/bases"
  {
    printf '# Generated by deploy/cluster.sh build from sigs.k8s.io/lws@%s config/crd/bases.\n' "$version"
    for f in "${files[@]}"; do printf -- '---\n'; cat "$f"; done
  } >"$out.tmp"
  mv -f "$out.tmp" "$out"
  printf '%s' "$want" >"$out.stamp"
}

# The InferencePool CRD as the Gateway API Inference Extension publishes it (config/crd/bases in the pinned
# module, hash-checked against deploy/toolchain/inference-pool/go.sum) into $TOOLS_DIR/inference-pool-crds.yaml.
# Only inference.networking.k8s.io's InferencePool: not the x-k8s.io InferencePoolImport (multi-cluster).
build_inference_pool_crds() {
  local version="$1" dir out="$TOOLS_DIR/inference-pool-crds.yaml" want
  local crd="config/crd/bases/inference.networking.k8s.io_inferencepools.yaml"
  want="gateway-api-inference-extension $version"
  [[ -f "$out" && -f "$out.stamp" && "$(cat "$out.stamp")" == "$want" ]] && return 0
  command -v go >/dev/null || die "go is not on PATH; it downloads the InferencePool CRD's module (https://go.dev/dl)"
  dir="$(cd "$TOOLCHAIN/inference-pool" && go mod download -json "sigs.k8s.io/gateway-api-inference-extension@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$dir/$crd" ]] || die "sigs.k8s.io/gateway-api-inference-extension@$version has no $crd in the Go module cache (go mod download failed?)"
  {
    printf '# Generated by deploy/cluster.sh build from sigs.k8s.io/gateway-api-inference-extension@%s %s.\n' "$version" "$crd"
    printf -- '---\n'; cat "$dir/$crd"
  } >"$out.tmp"
  mv -f "$out.tmp" "$out"
  printf '%s' "$want" >"$out.stamp"
  log "InferencePool CRD of gateway-api-inference-extension $version in $out"
}

BUILD_GROUPS="etcd kwok helm kubernetes lws inference-pool prometheus"

# build [group...]: all of $BUILD_GROUPS, or only the named ones.
cmd_build() {
  mkdir -p "$TOOLS_DIR"
  local groups=" ${*:-$BUILD_GROUPS} " g
  for g in $groups; do
    [[ " $BUILD_GROUPS " == *" $g "* ]] || die "unknown build group '$g': want one of $BUILD_GROUPS"
  done
  local etcd_v kwok_v helm_v helm_minor lws_v pool_v
  etcd_v="$(mod_version etcd go.etcd.io/etcd/server/v3)"
  kwok_v="$(mod_version kwok sigs.k8s.io/kwok)"
  lws_v="$(mod_version lws sigs.k8s.io/lws)"
  pool_v="$(mod_version inference-pool sigs.k8s.io/gateway-api-inference-extension)"
  helm_v="$(mod_version helm helm.sh/helm/v3)"
  helm_minor="${K8S_VERSION#v1.}"; helm_minor="${helm_minor%%.*}"
  [[ "$groups" == *" etcd "* ]] && build_group etcd "$etcd_v" "-s -w" etcd=go.etcd.io/etcd/server/v3
  if [[ "$groups" == *" kwok "* ]]; then
    build_group kwok "$kwok_v" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_v#v}" kwok=sigs.k8s.io/kwok/cmd/kwok
    build_kwok_stages "$kwok_v"
  fi
  [[ "$groups" == *" helm "* ]] && build_group helm "$helm_v" "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_v \
-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_minor \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_minor" \
    helm=helm.sh/helm/v3/cmd/helm
  [[ "$groups" == *" kubernetes "* ]] && build_group kubernetes "$K8S_VERSION" "$(k8s_ldflags)" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
    kubectl=k8s.io/kubernetes/cmd/kubectl
  if [[ "$groups" == *" lws "* ]]; then
    build_group lws "$lws_v" "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$lws_v" lws-controller-manager=sigs.k8s.io/lws/cmd
    build_lws_crds "$lws_v"
  fi
  [[ "$groups" == *" inference-pool "* ]] && build_inference_pool_crds "$pool_v"
  [[ "$groups" == *" prometheus "* ]] && ensure_prometheus
  log "tools ready in $TOOLS_DIR: kubernetes $K8S_VERSION, etcd $etcd_v, kwok $kwok_v, helm $helm_v, lws $lws_v, InferencePool CRD $pool_v"
}

# ---------------------------------------------------------------------------------------------- runtime

PKI="$CLUSTER_DIR/pki"
RUN="$CLUSTER_DIR/run"
LOGS="$CLUSTER_DIR/logs"
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig"

pidfile() { printf '%s/%s.pid' "$RUN" "$1"; }

# A PID is ours when it is alive and its command line is our binary with our cluster directory in it;
# a recycled PID (some other process now) is never signalled.
is_ours() { # pid component
  local cmdline
  [[ -r "/proc/$1/cmdline" ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == "$TOOLS_DIR/$2 "* && "$cmdline" == *"$CLUSTER_DIR"* ]]
}

# Echo the component's state: running <pid> | dead <pid> | foreign <pid> | absent
component_state() {
  local f pid
  f="$(pidfile "$1")"
  [[ -f "$f" ]] || { echo absent; return; }
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || { echo "dead garbage"; return; }
  if is_ours "$pid" "$1"; then echo "running $pid"
  elif [[ -d "/proc/$pid" ]] && ! awk '{exit ($3 == "Z") ? 0 : 1}' "/proc/$pid/stat" 2>/dev/null; then echo "foreign $pid"
  else echo "dead $pid"; fi
}

stop_component() { # name [KILL: no SIGTERM first, as if it crashed]
  local name="$1" signal="${2:-TERM}" state pid f
  f="$(pidfile "$name")"
  read -r state pid <<<"$(component_state "$name")"
  case "$state" in
    absent) return 0 ;;
    dead) log "$name: stale pid file (pid $pid is not running; it died or was killed: see $LOGS/$name.log)" ;;
    foreign) log "$name: stale pid file (pid $pid is now another process: $(tr '\0' ' ' </proc/"$pid"/cmdline | cut -c1-80)); not touching it" ;;
    running)
      kill "-$signal" "$pid" 2>/dev/null || true
      local i
      for ((i = 0; i < 150; i++)); do is_ours "$pid" "$name" || break; sleep 0.1; done
      if is_ours "$pid" "$name"; then
        log "$name (pid $pid) ignored SIGTERM for 15s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do is_ours "$pid" "$name" || break; sleep 0.1; done
      fi
      log "stopped $name (pid $pid)"
      ;;
  esac
  rm -f "$f"
}

cmd_down() {
  [[ -d "$CLUSTER_DIR" ]] || { log "nothing to stop ($CLUSTER_DIR does not exist)"; return 0; }
  mkdir -p "$RUN"
  local i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop_component "${COMPONENTS[$i]}"; done
  # etcd data and ports are per run; certificates and the last logs stay for the next `up` and for reading.
  rm -rf "$CLUSTER_DIR/etcd-data" "$RUN" "$CLUSTER_DIR/ports.env"
  log "down ($CLUSTER_DIR)"
}

# The port checks and picks are kvright_dev/ports.py's (stdlib only, run with the system Python); its
# docstring says why ports come from below the kernel's ephemeral range.
PORTS_PY="$REPO_ROOT/kvright_dev/ports.py"
port_in_use() { "$PY" "$PORTS_PY" in-use "$1"; } # port: 0 when a socket holds it
# 0 when no socket listens on the port, so a server may bind it again (SO_REUSEADDR, as Go binds: the
# closed connections of a server just stopped, in TIME_WAIT, do not count).
port_bindable() { "$PY" "$PORTS_PY" bindable "$1"; } # port
free_ports() { "$PY" "$PORTS_PY" free "$@"; } # n [taken port...] -> n distinct free ports, one per line

ensure_pki() {
  mkdir -p "$PKI"
  # Reuse certificates while they are valid for another day; otherwise make a new set.
  if [[ -f "$PKI/ca.crt" && -f "$PKI/apiserver.crt" && -f "$PKI/admin.crt" && -f "$PKI/sa.key" && -f "$PKI/sa.pub" ]] &&
    openssl x509 -checkend 86400 -noout -in "$PKI/apiserver.crt" >/dev/null 2>&1 &&
    openssl x509 -checkend 86400 -noout -in "$PKI/admin.crt" >/dev/null 2>&1; then
    return 0
  fi
  log "generating certificates in $PKI"
  local d="$PKI" ec=(-algorithm EC -pkeyopt ec_paramgen_curve:P-256)
  (
    umask 077
    openssl genpkey "${ec[@]}" -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -subj "/CN=kvright-local-ca" -days 365 -out "$d/ca.crt" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    sign() { # name subject extensions
      openssl genpkey "${ec[@]}" -out "$d/$1.key" 2>/dev/null
      openssl req -new -key "$d/$1.key" -subj "$2" -out "$d/$1.csr" 2>/dev/null
      printf '%s\n' "$3" >"$d/$1.ext"
      openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 365 \
        -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
      rm -f "$d/$1.csr" "$d/$1.ext"
    }
    sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_FIRST_IP"
    sign admin "/O=system:masters/CN=kvright-admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    # service-account token signing keys (RS256, what every client expects)
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/sa.key" 2>/dev/null
    openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  ) || die "openssl failed to generate certificates in $PKI"
}

# The LWS webhook server's certificate (tls.crt/tls.key, the names controller-runtime reads from its certDir),
# signed by the cluster CA for 127.0.0.1: the apiserver calls the webhooks at https://127.0.0.1:<port>/<path>
# and verifies them with the CA bundle in the webhook configurations. Reused while valid for another day
# and signed by the current CA.
LWS_CERT_DIR="$PKI/lws-webhook"
ensure_lws_cert() {
  local d="$LWS_CERT_DIR"
  if [[ -f "$d/tls.crt" && -f "$d/tls.key" ]] && openssl x509 -checkend 86400 -noout -in "$d/tls.crt" >/dev/null 2>&1 &&
    openssl verify -CAfile "$PKI/ca.crt" "$d/tls.crt" >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$d"
  (
    umask 077
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/tls.key" 2>/dev/null
    openssl req -new -key "$d/tls.key" -subj "/CN=lws-webhook" -out "$d/tls.csr" 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$d/tls.ext"
    openssl x509 -req -in "$d/tls.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 365 \
      -extfile "$d/tls.ext" -out "$d/tls.crt" 2>/dev/null
    rm -f "$d/tls.csr" "$d/tls.ext"
  ) || die "openssl failed to make the LWS webhook certificate in $d"
}

write_kubeconfig() { # port
  local b64="base64 -w0"
  umask 077
  cat >"$KUBECONFIG_PATH.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kvright-local
  cluster:
    server: https://127.0.0.1:$1
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: kvright-admin
  user:
    client-certificate-data: $($b64 <"$PKI/admin.crt")
    client-key-data: $($b64 <"$PKI/admin.key")
contexts:
- name: kvright-local
  context:
    cluster: kvright-local
    user: kvright-admin
current-context: kvright-local
EOF
  mv -f "$KUBECONFIG_PATH.tmp" "$KUBECONFIG_PATH"
}

# The API server's audit log: every request a ServiceAccount makes, at Metadata level (user, verb, resource,
# namespace, response code and the authorizer's decision; no bodies), one JSON line each, so tests can prove
# what the operator's ServiceAccount did and that nothing was refused (tests/integration/test_rbac_audit.py).
# Only ServiceAccounts: the control plane's own components and the admin client (system:masters) are not
# logged, which keeps the cost to a few lines per operator request. RequestReceived is omitted (the same
# request again); ResponseStarted stays, as a watch's ResponseComplete comes only when it ends. Rotated at
# $AUDIT_LOG_MAX_MB MB with one backup (audit-<time>.log beside it).
AUDIT_LOG="$CLUSTER_DIR/audit/audit.log"
AUDIT_LOG_MAX_MB=64
write_audit_policy() { # -> the policy file's path
  mkdir -p "$CLUSTER_DIR/audit"
  cat >"$CLUSTER_DIR/audit/policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
EOF
  printf '%s' "$CLUSTER_DIR/audit/policy.yaml"
}

start_component() { # name args...
  local name="$1"; shift
  printf '\n==== %s started %s\n' "$name" "$(date -u +%FT%TZ)" >>"$LOGS/$name.log"
  # setsid: its own session, so a terminal's or a test runner's signals to our group do not reach it.
  # 9>&-: the long-running process must not inherit (and hold) the up/down lock.
  setsid "$TOOLS_DIR/$name" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  local pid=$! i
  echo "$pid" >"$(pidfile "$name")"
  # Until the child has exec'd the component, its /proc cmdline is still this shell's, which check_alive
  # would read as "exited during startup". On a busy machine that takes a while (a fresh-clone CI's run
  # beside the real-engine conformance suite failed `up` this way, the component's log still empty):
  # wait for the exec, or for the process to end, at most 10 s.
  for ((i = 0; i < 200; i++)); do
    is_ours "$pid" "$name" && break
    [[ -d "/proc/$pid" ]] || break
    awk '{exit ($3 == "Z") ? 0 : 1}' "/proc/$pid/stat" 2>/dev/null && break  # ended, not yet reaped
    sleep 0.05
  done
}

# Fail with the component's log tail if it died while we wait for something.
check_alive() { # name...
  local n state pid
  for n in "$@"; do
    read -r state pid <<<"$(component_state "$n")"
    if [[ "$state" != running ]]; then
      log "$n exited during startup; last lines of $LOGS/$n.log:"
      tail -n 20 "$LOGS/$n.log" >&2
      return 1
    fi
  done
}

api() { # method path [curl args...]: talk to the apiserver as admin
  local m="$1" p="$2"; shift 2
  curl -sS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    -X "$m" "https://127.0.0.1:$APISERVER_PORT$p" "$@"
}

# Poll until `$@` succeeds; between polls make sure the listed components still run.
wait_until() { # what timeout "components" cmd...
  local what="$1" timeout="$2" comps="$3"; shift 3
  local deadline=$((SECONDS + timeout))
  # shellcheck disable=SC2086
  until "$@" >/dev/null 2>&1; do
    check_alive $comps || return 1
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.25
  done
}

etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_ready() { [[ "$(api GET /readyz)" == ok ]]; }
default_namespace() { api GET /api/v1/namespaces/default -f -o /dev/null; }
default_service_account() { api GET /api/v1/namespaces/default/serviceaccounts/default -f -o /dev/null; }
kubectl_admin() { "$TOOLS_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=30s "$@"; }
crd_established() { # name
  api GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" -f |
    "$PY" -c 'import json, sys
c = json.load(sys.stdin).get("status", {}).get("conditions", [])
sys.exit(0 if any(x["type"] == "Established" and x["status"] == "True" for x in c) else 1)'
}
lws_crd_established() { crd_established "$LWS_CRD"; }

# The InferencePool CRD as KVRIGHT_INFERENCE_POOL asks: applied and Established, or deleted (with every
# InferencePool). Run by every `up`, also on a cluster that is already up, so switching needs no restart.
sync_inference_pool_crd() {
  if inference_pool_requested; then
    crd_established "$INFERENCE_POOL_CRD" >/dev/null 2>&1 && return 0
    kubectl_admin apply --server-side --field-manager=kvright-cluster -f "$TOOLS_DIR/inference-pool-crds.yaml" \
      >"$LOGS/inference-pool-crds.log" 2>&1 ||
      { cat "$LOGS/inference-pool-crds.log" >&2; die "installing the InferencePool CRD ($TOOLS_DIR/inference-pool-crds.yaml) failed"; }
    wait_until "the InferencePool CRD to be Established" "$START_TIMEOUT" "etcd kube-apiserver" crd_established "$INFERENCE_POOL_CRD"
  elif api GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$INFERENCE_POOL_CRD" -f -o /dev/null 2>/dev/null; then
    kubectl_admin delete customresourcedefinition "$INFERENCE_POOL_CRD" --wait=true >/dev/null ||
      die "deleting the InferencePool CRD (KVRIGHT_INFERENCE_POOL=0) failed"
  fi
}
lws_healthy() { [[ "$(curl -sf --max-time 2 "http://127.0.0.1:$LWS_HEALTH_PORT/readyz")" == ok ]]; }
# Serving TLS with our certificate and the pod webhook registered (an unregistered path answers 404): send it
# the AdmissionReview the apiserver would for a pod without LWS labels, which it must allow unchanged.
lws_webhook_serving() {
  curl -sf --max-time 2 --cacert "$PKI/ca.crt" -H 'Content-Type: application/json' \
    "https://127.0.0.1:$LWS_WEBHOOK_PORT/mutate--v1-pod" --data-binary '{"apiVersion": "admission.k8s.io/v1",
 "kind": "AdmissionReview", "request": {"uid": "kvright-probe", "operation": "CREATE", "namespace": "default",
 "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
 "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kvright-probe", "namespace": "default"}}}}' |
    grep -q '"allowed":true'
}

# The LWS manager's own configuration (config.lws.x-k8s.io/v1alpha1, read by its --config): everything on
# 127.0.0.1, no leader election (one replica), and internal cert management off, since ensure_lws_cert
# provides the serving certificate and lws_register_webhooks the CA bundle.
write_lws_config() {
  cat >"$CLUSTER_DIR/lws-config.yaml" <<EOF
apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $LWS_WEBHOOK_PORT
  certDir: $LWS_CERT_DIR
metrics:
  bindAddress: 127.0.0.1:$LWS_METRICS_PORT
health:
  healthProbeBindAddress: 127.0.0.1:$LWS_HEALTH_PORT
EOF
}

# The webhook configurations of LWS v0.8.0 (its config/webhook/manifests.yaml with the pod objectSelector
# patches and the lws- name prefix of its kustomization), with url clientConfigs on loopback instead of a
# Service. The pod webhooks only see pods labelled leaderworkerset.sigs.k8s.io/name, so other pods never
# depend on the LWS manager being up.
lws_register_webhooks() {
  local ca url="https://127.0.0.1:$LWS_WEBHOOK_PORT"
  ca="$(base64 -w0 <"$PKI/ca.crt")"
  # One webhook entry: name, path, API group, resource, operations; the pod webhooks see only the pods
  # LWS labelled.
  entry() {
    local selector=""
    [[ "$4" == pods ]] && selector="
  objectSelector:
    matchExpressions:
    - {key: leaderworkerset.sigs.k8s.io/name, operator: Exists}"
    printf -- '- name: %s\n  admissionReviewVersions: [v1]\n  clientConfig: {url: "%s/%s", caBundle: "%s"}\n' \
      "$1" "$url" "$2" "$ca"
    printf '  failurePolicy: Fail\n  sideEffects: None%s\n  rules:\n  - apiGroups: ["%s"]\n' "$selector" "$3"
    printf '    apiVersions: [v1]\n    operations: [%s]\n    resources: [%s]\n' "$5" "$4"
  }
  kubectl_admin apply --server-side --force-conflicts --field-manager=kvright-cluster -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: lws-mutating-webhook-configuration}
webhooks:
$(entry mleaderworkerset.kb.io mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset leaderworkerset.x-k8s.io leaderworkersets "CREATE, UPDATE")
$(entry mpod.kb.io mutate--v1-pod "" pods CREATE)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: lws-validating-webhook-configuration}
webhooks:
$(entry vleaderworkerset.kb.io validate-leaderworkerset-x-k8s-io-v1-leaderworkerset leaderworkerset.x-k8s.io leaderworkersets "CREATE, UPDATE")
$(entry vpod.kb.io validate--v1-pod "" pods "CREATE, UPDATE")
EOF
}

# All kwok nodes Ready and free of the not-ready/unreachable taints (KCM's node lifecycle controller
# removes those, and the scheduler will not place pods before it has).
nodes_ready() {
  api GET "/api/v1/nodes?labelSelector=$NODE_LABEL_SELECTOR" -f | "$PY" -c '
import json, sys
want = int(sys.argv[1])
nodes = json.load(sys.stdin)["items"]
ok = [n for n in nodes
      if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
      and not any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints", []))]
sys.exit(0 if len(nodes) == want and len(ok) == want else 1)' "$1"
}

# Rows of the node table: prefix count product gpus gpu_mem_mib [cpu memory pods]
node_rows() {
  if [[ -n "${KVRIGHT_GPU_NODES:-}" ]]; then
    printf '%s\n' "$KVRIGHT_GPU_NODES" | tr ';' '\n'
  else
    local f="${KVRIGHT_GPU_NODES_FILE:-$REPO_ROOT/deploy/kwok/gpu-nodes.conf}"
    [[ -f "$f" ]] || die "KVRIGHT_GPU_NODES_FILE=$f does not exist"
    cat "$f"
  fi | sed 's/#.*//' | awk 'NF'
}

node_json() { # name product gpus gpu_mem_mib cpu memory pods
  local name="$1" product="$2" gpus="$3" mem="$4" cpu="$5" memory="$6" pods="$7" labels taints res
  labels="\"type\": \"kwok\", \"kubernetes.io/hostname\": \"$name\", \"kubernetes.io/os\": \"linux\", \"kubernetes.io/arch\": \"amd64\", \"kubernetes.io/role\": \"agent\""
  res="\"cpu\": \"$cpu\", \"memory\": \"$memory\", \"pods\": \"$pods\""
  taints=""
  if ((gpus > 0)); then
    labels+=", \"nvidia.com/gpu.present\": \"true\", \"nvidia.com/gpu.product\": \"$product\", \"nvidia.com/gpu.count\": \"$gpus\", \"nvidia.com/gpu.memory\": \"$mem\""
    res+=", \"nvidia.com/gpu\": \"$gpus\""
    taints="{\"key\": \"$GPU_TAINT_KEY\", \"value\": \"$GPU_TAINT_VALUE\", \"effect\": \"NoSchedule\"}"
  fi
  cat <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$name", "labels": {$labels},
              "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
 "spec": {"taints": [$taints]},
 "status": {"capacity": {$res}, "allocatable": {$res}}}
EOF
}

# Check every row before anything starts: one line naming the bad row and the accepted form.
validate_nodes() {
  local prefix count product gpus mem rest n=0
  if [[ -z "${KVRIGHT_GPU_NODES:-}" && -n "${KVRIGHT_GPU_NODES_FILE:-}" && ! -f "$KVRIGHT_GPU_NODES_FILE" ]]; then
    die "KVRIGHT_GPU_NODES_FILE=$KVRIGHT_GPU_NODES_FILE does not exist; want a file of rows like deploy/kwok/gpu-nodes.conf"
  fi
  while read -r prefix count product gpus mem rest; do
    [[ "$count" =~ ^[0-9]+$ && "$gpus" =~ ^[0-9]+$ && "${mem:-}" =~ ^[0-9]+$ && "$prefix" =~ ^[a-z0-9-]+$ ]] ||
      die "bad GPU node row '$prefix $count $product $gpus ${mem:-}': want 'prefix count gpu-product gpus/node gpu-memory-MiB [cpu memory pods]', e.g. 'h100 2 NVIDIA-H100-80GB-HBM3 8 81559'"
    n=$((n + count))
  done < <(node_rows)
  ((n > 0)) || die "no nodes configured (KVRIGHT_GPU_NODES / KVRIGHT_GPU_NODES_FILE is empty or all counts are 0)"
}

create_nodes() { # -> echoes the number of nodes
  local prefix count product gpus mem cpu memory pods i n=0 out
  while read -r prefix count product gpus mem cpu memory pods; do
    for ((i = 0; i < count; i++)); do
      out="$(node_json "kwok-$prefix-$i" "$product" "$gpus" "$mem" "${cpu:-192}" "${memory:-2000Gi}" "${pods:-110}" |
        api POST /api/v1/nodes -H 'Content-Type: application/json' --data-binary @- -w '%{http_code}' -o "$LOGS/node-create.json")"
      [[ "$out" == 201 || "$out" == 409 ]] || die "creating node kwok-$prefix-$i failed (HTTP $out): $(cat "$LOGS/node-create.json")"
      n=$((n + 1))
    done
  done < <(node_rows)
  echo "$n"
}

memory_report() {
  local n state pid rss total=0 parts=()
  for n in "${COMPONENTS[@]}"; do
    read -r state pid <<<"$(component_state "$n")"
    [[ "$state" == running ]] || continue
    rss="$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$pid/status" 2>/dev/null || echo 0)"
    total=$((total + rss)); parts+=("$n ${rss}MiB")
  done
  local joined
  joined="$(printf '%s, ' "${parts[@]}")"
  printf 'memory (RSS): %s MiB total (%s)' "$total" "${joined%, }"
}

check_runtime_tools() {
  local b bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
  lws_requested && bins+=(kubectl "$LWS_COMPONENT")
  for b in "${bins[@]}"; do
    [[ -x "$TOOLS_DIR/$b" && -f "$TOOLS_DIR/$b.stamp" ]] || die "$TOOLS_DIR/$b is not built; run: make tools (or bash deploy/cluster.sh build)"
  done
  [[ -f "$TOOLS_DIR/kwok-stages.yaml" ]] || die "$TOOLS_DIR/kwok-stages.yaml is missing; run: make tools"
  if inference_pool_requested; then
    [[ -x "$TOOLS_DIR/kubectl" ]] || die "$TOOLS_DIR/kubectl is not built; run: make tools"
    [[ -f "$TOOLS_DIR/inference-pool-crds.yaml" ]] || die "$TOOLS_DIR/inference-pool-crds.yaml is missing; run: make tools (or bash deploy/cluster.sh build inference-pool)"
  fi
  if lws_requested; then
    [[ -f "$TOOLS_DIR/lws-crds.yaml" ]] || die "$TOOLS_DIR/lws-crds.yaml is missing; run: make tools (or bash deploy/cluster.sh build lws)"
  fi
  [[ -n "$PY" ]] || die "python3 is needed (JSON parsing and port checks); set KVRIGHT_PYTHON"
  command -v curl >/dev/null || die "curl is needed"
  command -v openssl >/dev/null || die "openssl is needed"
}

# Whether the running cluster was started with LWS: LWS=1|0 in ports.env (absent: started before LWS was
# part of it, so without). Without a running cluster: what KVRIGHT_LWS asks for.
lws_recorded() {
  if [[ -f "$CLUSTER_DIR/ports.env" ]]; then
    grep -qx 'LWS=1' "$CLUSTER_DIR/ports.env"
  else
    lws_requested
  fi
}

# 0 when a previous `up` is fully running and ready; otherwise say what is wrong and return 1.
existing_healthy() {
  local n state pid bad=0 any=0 had_lws=0 want_lws=0
  lws_recorded && had_lws=1
  lws_requested && want_lws=1
  for n in "${COMPONENTS[@]}"; do
    read -r state pid <<<"$(component_state "$n")"
    case "$state" in
      running) any=1 ;;
      absent) [[ "$n" == "$LWS_COMPONENT" ]] && ((had_lws == 0)) && continue; bad=1 ;;
      dead) any=1; bad=1; log "$n (pid $pid) is not running: it died or was killed (log: $LOGS/$n.log)" ;;
      foreign) any=1; bad=1; log "$n: stale pid file, pid $pid is now another process" ;;
    esac
  done
  ((any)) || return 1
  if ((bad == 0)) && [[ -f "$CLUSTER_DIR/ports.env" ]]; then
    # shellcheck disable=SC1091
    source "$CLUSTER_DIR/ports.env"
    if ((had_lws != want_lws)); then
      log "the cluster in $CLUSTER_DIR runs $( ((had_lws)) && echo with || echo without) the LeaderWorkerSet controller but KVRIGHT_LWS=${KVRIGHT_LWS:-1} asks otherwise; restarting it"
      return 1
    fi
    apiserver_ready && return 0
    log "all processes run but the apiserver on port $APISERVER_PORT is not ready"
  fi
  log "the previous cluster in $CLUSTER_DIR is broken; stopping what is left and starting fresh"
  return 1
}

# etcd and kube-apiserver are started by `up` and again by `restart`, on the ports in ports.env, with
# the same data directory: a restarted etcd keeps every object, a restarted apiserver its port.
start_etcd() {
  start_component etcd --name=kvright --data-dir="$CLUSTER_DIR/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="kvright=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --auto-compaction-retention=1 --quota-backend-bytes=2147483648 --log-level=warn
}

start_apiserver() {
  start_component kube-apiserver --etcd-servers="http://127.0.0.1:$ETCD_PORT" --etcd-prefix=/registry \
    --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" --advertise-address=127.0.0.1 \
    --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --endpoint-reconciler-type=none --allow-privileged=true \
    --profiling=false \
    --audit-policy-file="$(write_audit_policy)" --audit-log-path="$AUDIT_LOG" --audit-log-format=json \
    --audit-log-maxsize="$AUDIT_LOG_MAX_MB" --audit-log-maxbackup=1
}

cmd_up() {
  local with_lws=0
  lws_requested && with_lws=1
  check_runtime_tools
  validate_nodes
  mkdir -p "$CLUSTER_DIR" "$LOGS"
  if existing_healthy; then
    sync_inference_pool_crd
    log "already up: https://127.0.0.1:$APISERVER_PORT ($(memory_report))"
    echo "export KUBECONFIG=$KUBECONFIG_PATH"
    return 0
  fi
  cmd_down >/dev/null 2>&1 || true
  mkdir -p "$RUN" "$LOGS"
  local t0=$SECONDS
  ensure_pki
  ((with_lws)) && ensure_lws_cert

  if [[ -n "${KVRIGHT_APISERVER_PORT:-}" ]]; then
    # shellcheck disable=SC2015  # die is the else branch of both tests
    [[ "$KVRIGHT_APISERVER_PORT" =~ ^[0-9]+$ ]] && ((KVRIGHT_APISERVER_PORT > 0 && KVRIGHT_APISERVER_PORT < 65536)) ||
      die "KVRIGHT_APISERVER_PORT=$KVRIGHT_APISERVER_PORT is not a port; want 1-65535, or unset for a free one"
    port_in_use "$KVRIGHT_APISERVER_PORT" &&
      die "KVRIGHT_APISERVER_PORT=$KVRIGHT_APISERVER_PORT is already in use on 127.0.0.1 (see: ss -ltnp 'sport = :$KVRIGHT_APISERVER_PORT'); pick another or unset it for a free one"
    APISERVER_PORT="$KVRIGHT_APISERVER_PORT"
  else
    APISERVER_PORT="$(free_ports 1)"
  fi
  local ports
  mapfile -t ports < <(free_ports 5 "$APISERVER_PORT")
  ETCD_PORT="${ports[0]}" ETCD_PEER_PORT="${ports[1]}"
  LWS_WEBHOOK_PORT="" LWS_METRICS_PORT="" LWS_HEALTH_PORT=""
  if ((with_lws)); then
    LWS_WEBHOOK_PORT="${ports[2]}" LWS_METRICS_PORT="${ports[3]}" LWS_HEALTH_PORT="${ports[4]}"
  fi
  printf 'APISERVER_PORT=%s\nETCD_PORT=%s\nETCD_PEER_PORT=%s\nLWS=%s\nLWS_WEBHOOK_PORT=%s\nLWS_METRICS_PORT=%s\nLWS_HEALTH_PORT=%s\n' \
    "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$with_lws" "$LWS_WEBHOOK_PORT" "$LWS_METRICS_PORT" "$LWS_HEALTH_PORT" \
    >"$CLUSTER_DIR/ports.env"

  # Any failure from here on (set -e, die, a timed-out wait) stops what was started.
  UP_DONE=0
  trap 'if ((UP_DONE == 0)); then log "startup failed; stopping what was started (logs stay in $LOGS)"; cmd_down >/dev/null 2>&1 || true; fi' EXIT

  start_etcd
  wait_until "etcd health on 127.0.0.1:$ETCD_PORT" "$START_TIMEOUT" etcd etcd_healthy

  start_apiserver
  wait_until "kube-apiserver /readyz on 127.0.0.1:$APISERVER_PORT" "$START_TIMEOUT" "etcd kube-apiserver" apiserver_ready
  write_kubeconfig "$APISERVER_PORT"
  wait_until "the default namespace" "$START_TIMEOUT" "etcd kube-apiserver" default_namespace
  if ((with_lws)); then
    # The CRD goes in before the LWS manager starts (its informers need the kind); server-side apply, as the
    # CRD (1.3 MB) is too large for client-side apply's last-applied annotation.
    kubectl_admin apply --server-side --field-manager=kvright-cluster -f "$TOOLS_DIR/lws-crds.yaml" >"$LOGS/lws-crds.log" 2>&1 ||
      { cat "$LOGS/lws-crds.log" >&2; die "installing the LeaderWorkerSet CRD ($TOOLS_DIR/lws-crds.yaml) failed"; }
  fi
  sync_inference_pool_crd

  start_component kube-controller-manager --kubeconfig="$KUBECONFIG_PATH" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --node-monitor-period=5s --node-monitor-grace-period=40s --kube-api-qps=100 --kube-api-burst=200
  start_component kube-scheduler --kubeconfig="$KUBECONFIG_PATH" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --kube-api-qps=100 --kube-api-burst=200
  start_component kwok --kubeconfig="$KUBECONFIG_PATH" --config="$TOOLS_DIR/kwok-stages.yaml" \
    --manage-nodes-with-label-selector="$NODE_LABEL_SELECTOR" --cidr="$POD_CIDR" --node-ip=127.0.0.1 \
    --node-lease-duration-seconds=40

  local nodes all="etcd kube-apiserver kube-controller-manager kube-scheduler kwok"
  nodes="$(create_nodes)"
  if ((with_lws)); then
    wait_until "the LeaderWorkerSet CRD to be Established" "$START_TIMEOUT" "$all" lws_crd_established
    write_lws_config
    start_component "$LWS_COMPONENT" --kubeconfig="$KUBECONFIG_PATH" --config="$CLUSTER_DIR/lws-config.yaml" \
      --kube-api-qps=100 --kube-api-burst=200
    all+=" $LWS_COMPONENT"
  fi
  wait_until "$nodes kwok nodes Ready and untainted by the node lifecycle controller" "$START_TIMEOUT" "$all" nodes_ready "$nodes"
  wait_until "the default ServiceAccount (controller-manager's service-account controller)" "$START_TIMEOUT" "$all" default_service_account
  if ((with_lws)); then
    wait_until "the LWS manager's /readyz on 127.0.0.1:$LWS_HEALTH_PORT" "$START_TIMEOUT" "$all" lws_healthy
    wait_until "the LWS webhook server on https://127.0.0.1:$LWS_WEBHOOK_PORT" "$START_TIMEOUT" "$all" lws_webhook_serving
    lws_register_webhooks || die "registering the LWS webhook configurations failed"
  fi
  # shellcheck disable=SC2034  # read by the EXIT trap
  UP_DONE=1
  local lws_note="no LeaderWorkerSet controller (KVRIGHT_LWS=0)"
  ((with_lws)) && lws_note="LeaderWorkerSet controller with webhooks on https://127.0.0.1:$LWS_WEBHOOK_PORT"
  if inference_pool_requested; then lws_note+=", the InferencePool CRD"; else lws_note+=", no InferencePool CRD (KVRIGHT_INFERENCE_POOL=0)"; fi
  log "up in $((SECONDS - t0))s: https://127.0.0.1:$APISERVER_PORT, $nodes nodes, $lws_note; $(memory_report)"
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
}

# One server of the running cluster, etcd or kube-apiserver, stopped and started again with the same flags,
# ports and data, for tests of clients across a restart or an outage (tests/integration/test_operator_faults.py);
# the other components reconnect by themselves.
server_name() { # etcd|kube-apiserver|apiserver -> the component's name
  case "${1:-}" in
    etcd) echo etcd ;;
    kube-apiserver | apiserver) echo kube-apiserver ;;
    *) die "want etcd or kube-apiserver (apiserver), not '${1:-}'" ;;
  esac
}

load_ports() {
  [[ -f "$CLUSTER_DIR/ports.env" ]] || die "no cluster is up in $CLUSTER_DIR (run: deploy/cluster.sh up)"
  # shellcheck disable=SC1091
  source "$CLUSTER_DIR/ports.env"
}

# stop-server etcd|apiserver [--kill]: SIGTERM (SIGKILL after 15 s), or with --kill SIGKILL at once (a crash);
# returns once its ports can be bound again.
cmd_stop_server() {
  local name signal=TERM state pid
  name="$(server_name "${1:-}")"
  case "${2:-}" in
    "") ;;
    --kill) signal=KILL ;;
    *) die "stop-server $name: unknown option '$2' (want --kill or nothing)" ;;
  esac
  load_ports
  read -r state pid <<<"$(component_state "$name")"
  [[ "$state" == running ]] || die "stop-server $name: it is not running ($state${pid:+ $pid}); \`up\` restarts a broken cluster"
  stop_component "$name" "$signal"
  # A killed process stops looking like ours (its command line empties) before the kernel has closed its
  # sockets: wait until its ports can be bound, or the next one fails with "address already in use".
  local port ports="$APISERVER_PORT"
  [[ "$name" == etcd ]] && ports="$ETCD_PORT $ETCD_PEER_PORT"
  for port in $ports; do
    wait_until "127.0.0.1:$port to be free after $name stopped" "$START_TIMEOUT" "" port_bindable "$port"
  done
}

# start-server etcd|apiserver: start a server that stop-server stopped, then wait until etcd is healthy and the
# apiserver's /readyz says ok (after etcd too: the apiserver reconnects).
cmd_start_server() {
  local name state pid
  name="$(server_name "${1:-}")"
  load_ports
  read -r state pid <<<"$(component_state "$name")"
  [[ "$state" == running ]] && die "start-server $name: it is already running (pid $pid)"
  "start_${name#kube-}"
  wait_until "etcd health on 127.0.0.1:$ETCD_PORT" "$START_TIMEOUT" etcd etcd_healthy
  wait_until "kube-apiserver /readyz on 127.0.0.1:$APISERVER_PORT" "$START_TIMEOUT" "etcd kube-apiserver" apiserver_ready
}

# restart etcd|apiserver [--kill]: stop-server, then start-server.
cmd_restart() {
  local t0=$SECONDS name
  name="$(server_name "${1:-}")"
  cmd_stop_server "$@"
  cmd_start_server "$name"
  log "restarted $name in $((SECONDS - t0))s (pid $(cat "$(pidfile "$name")"))"
}

cmd_status() {
  local n state pid rc=0 with_lws=0
  lws_recorded && with_lws=1
  for n in "${COMPONENTS[@]}"; do
    read -r state pid <<<"$(component_state "$n")"
    if [[ "$n" == "$LWS_COMPONENT" && "$state" == absent ]] && ((with_lws == 0)); then
      printf '%-24s disabled (KVRIGHT_LWS=0)\n' "$n"
      continue
    fi
    case "$state" in
      running) printf '%-24s running (pid %s)\n' "$n" "$pid" ;;
      absent) printf '%-24s not started\n' "$n"; rc=1 ;;
      dead) printf '%-24s DEAD (pid %s is gone; log: %s)\n' "$n" "$pid" "$LOGS/$n.log"; rc=1 ;;
      foreign) printf '%-24s stale pid file (pid %s is another process)\n' "$n" "$pid"; rc=1 ;;
    esac
  done
  if [[ -f "$CLUSTER_DIR/ports.env" ]]; then
    # shellcheck disable=SC1091
    source "$CLUSTER_DIR/ports.env"
    if apiserver_ready; then printf 'apiserver                https://127.0.0.1:%s ready\n' "$APISERVER_PORT"
    else printf 'apiserver                https://127.0.0.1:%s NOT ready\n' "$APISERVER_PORT"; rc=1; fi
    if ((with_lws)); then
      if lws_healthy && lws_webhook_serving; then
        printf 'lws webhooks             https://127.0.0.1:%s ready (health 127.0.0.1:%s, metrics 127.0.0.1:%s)\n' \
          "$LWS_WEBHOOK_PORT" "$LWS_HEALTH_PORT" "$LWS_METRICS_PORT"
      else printf 'lws webhooks             https://127.0.0.1:%s NOT ready\n' "$LWS_WEBHOOK_PORT"; rc=1; fi
    fi
  fi
  memory_report; echo
  echo "kubeconfig: $KUBECONFIG_PATH"
  return "$rc"
}

cmd_env() { echo "export KUBECONFIG=$KUBECONFIG_PATH"; }

# ---------------------------------------------------------------------------------------------- kind

use_kind() { [[ "${KVRIGHT_CLUSTER:-}" == kind ]]; }
KIND_NAME="${KVRIGHT_KIND_NAME:-kvright}"
kind_up() {
  # shellcheck disable=SC2015
  command -v kind >/dev/null && command -v docker >/dev/null || die "KVRIGHT_CLUSTER=kind needs kind and docker on PATH"
  mkdir -p "$CLUSTER_DIR"
  kind get clusters 2>/dev/null | grep -qx "$KIND_NAME" ||
    kind create cluster --name "$KIND_NAME" --config "$REPO_ROOT/deploy/kind.yaml" --kubeconfig "$KUBECONFIG_PATH" --wait 120s
  kind get kubeconfig --name "$KIND_NAME" >"$KUBECONFIG_PATH"
  # kind's nodes are real kubelets without GPUs: advertise nvidia.com/gpu through the status subresource
  # (the GFD labels come from deploy/kind.yaml). No device plugin runs, so pods only schedule, never use GPUs.
  local node
  for node in $(KUBECONFIG="$KUBECONFIG_PATH" kubectl get nodes -l nvidia.com/gpu.present=true -o name); do
    KUBECONFIG="$KUBECONFIG_PATH" kubectl patch "$node" --subresource=status --type=merge \
      -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}' >/dev/null
  done
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
}
kind_down() { command -v kind >/dev/null || { log "kind not on PATH; nothing to stop"; return 0; }; kind delete cluster --name "$KIND_NAME"; }

# ---------------------------------------------------------------------------------------------- main

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

main() {
  local cmd="${1:-}"
  case "$cmd" in
    build) shift; cmd_build "$@" ;;
    restart | stop-server | start-server)
      use_kind && die "$cmd works on cluster.sh's own control plane, not KVRIGHT_CLUSTER=kind"
      mkdir -p "$CLUSTER_DIR"
      exec 9>"$CLUSTER_DIR/.lock"
      flock -w 300 9 || die "another cluster.sh command holds $CLUSTER_DIR/.lock"
      shift; "cmd_${cmd//-/_}" "$@"
      ;;
    up | down | status | env)
      if use_kind; then
        case "$cmd" in up) kind_up ;; down) kind_down ;; env) cmd_env ;; status) kubectl --kubeconfig "$KUBECONFIG_PATH" get nodes ;; esac
        return
      fi
      mkdir -p "$CLUSTER_DIR"
      if [[ "$cmd" == up || "$cmd" == down ]]; then
        # one up/down/restart/stop-server/start-server at a time per cluster directory
        exec 9>"$CLUSTER_DIR/.lock"
        flock -w 300 9 || die "another cluster.sh up/down holds $CLUSTER_DIR/.lock"
      fi
      "cmd_$cmd"
      ;;
    -h | --help | help) usage ;;
    *) usage >&2; die "unknown subcommand '${cmd}': want build, up, down, restart, stop-server, start-server, env or status" ;;
  esac
}

main "$@"
