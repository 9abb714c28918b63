#!/bin/sh
# Installs the kubelet binary, its systemd unit and kubeadm-style drop-in,
# and the sample configuration. Safe to run again: files are replaced in
# place, an existing configuration is kept unless --force-config is given.
# Honours DESTDIR (staged installs, packaging). Starts nothing unless asked.
set -eu

usage() {
	cat <<'USAGE'
Usage: deploy/install-kubelet.sh [options]

  --binary PATH        kubelet binary to install
                       (default: target/release/kubelet, else target/debug/kubelet)
  --prefix DIR         install the binary under DIR/bin (default: /usr)
  --unit-dir DIR       systemd unit directory (default: /etc/systemd/system)
  --config-dir DIR     where kubelet-conf.yml goes (default: /etc/kubernetes)
  --force-config       replace an existing kubelet-conf.yml
  --use-sample-config  make the unit read kubelet-conf.yml (sets
                       KUBELET_CONFIG_ARGS in /etc/default/kubelet if that
                       file does not exist yet) instead of kubeadm's
                       /var/lib/kubelet/config.yaml
  --enable             systemctl enable kubelet (no DESTDIR only)
  --start              systemctl restart kubelet (no DESTDIR only)
  -h, --help           this text

Environment: DESTDIR prefixes every installed path.
USAGE
}

here=$(cd "$(dirname "$0")/.." && pwd)
binary=""
prefix=/usr
unit_dir=/etc/systemd/system
config_dir=/etc/kubernetes
force_config=0
use_sample=0
enable=0
start=0
destdir=${DESTDIR:-}

while [ $# -gt 0 ]; do
	case "$1" in
	--binary) binary=$2; shift 2 ;;
	--binary=*) binary=${1#*=}; shift ;;
	--prefix) prefix=$2; shift 2 ;;
	--prefix=*) prefix=${1#*=}; shift ;;
	--unit-dir) unit_dir=$2; shift 2 ;;
	--unit-dir=*) unit_dir=${1#*=}; shift ;;
	--config-dir) config_dir=$2; shift 2 ;;
	--config-dir=*) config_dir=${1#*=}; shift ;;
	--force-config) force_config=1; shift ;;
	--use-sample-config) use_sample=1; shift ;;
	--enable) enable=1; shift ;;
	--start) start=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "install-kubelet.sh: unknown option: $1" >&2; usage >&2; exit 2 ;;
	esac
done

if [ -z "$binary" ]; then
	for candidate in "$here/target/release/kubelet" "$here/target/debug/kubelet"; do
		if [ -x "$candidate" ]; then binary=$candidate; break; fi
	done
fi
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
	echo "install-kubelet.sh: no kubelet binary found; build it (cargo build --release) or pass --binary" >&2
	exit 1
fi

bin_path="$prefix/bin/kubelet"
config_path="$config_dir/kubelet-conf.yml"

say() { echo "install-kubelet.sh: $*"; }

# Binary: write next to the target and rename, so a running kubelet's
# executable is never modified in place.
install -d -m 0755 "$destdir$prefix/bin"
install -m 0755 "$binary" "$destdir$bin_path.new"
mv -f "$destdir$bin_path.new" "$destdir$bin_path"
say "installed $destdir$bin_path"

# Units, with ExecStart pointing at the installed binary.
install -d -m 0755 "$destdir$unit_dir/kubelet.service.d"
for unit in kubelet.service kubelet.service.d/10-kubeadm.conf; do
	sed "s#/usr/bin/kubelet#$bin_path#g" "$here/systemd/$unit" > "$destdir$unit_dir/$unit.new"
	chmod 0644 "$destdir$unit_dir/$unit.new"
	mv -f "$destdir$unit_dir/$unit.new" "$destdir$unit_dir/$unit"
	say "installed $destdir$unit_dir/$unit"
done

# Configuration and the directories it names.
install -d -m 0755 "$destdir$config_dir" "$destdir$config_dir/manifests"
if [ ! -e "$destdir$config_path" ] || [ "$force_config" = 1 ]; then
	install -m 0644 "$here/config/kubelet-conf.yml" "$destdir$config_path"
	say "installed $destdir$config_path"
else
	say "kept existing $destdir$config_path (use --force-config to replace it)"
fi
install -d -m 0700 "$destdir/var/lib/kubelet"
install -d -m 0755 "$destdir/var/log/pods"

if [ "$use_sample" = 1 ]; then
	install -d -m 0755 "$destdir/etc/default"
	if [ ! -e "$destdir/etc/default/kubelet" ]; then
		printf 'KUBELET_CONFIG_ARGS=--config=%s\n' "$config_path" > "$destdir/etc/default/kubelet"
		chmod 0644 "$destdir/etc/default/kubelet"
		say "wrote $destdir/etc/default/kubelet"
	else
		say "kept existing $destdir/etc/default/kubelet"
	fi
fi

# Tell systemd, only for a live install on a systemd host.
if [ -z "$destdir" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload
	if [ "$enable" = 1 ]; then systemctl enable kubelet; fi
	if [ "$start" = 1 ]; then systemctl restart kubelet; fi
elif [ "$enable" = 1 ] || [ "$start" = 1 ]; then
	say "not enabling or starting: staged install (DESTDIR) or no running systemd"
fi
