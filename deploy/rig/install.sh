#!/usr/bin/env bash
# Installs what the containerd test rig needs, from Debian's packages:
# containerd, runc, the CNI plugins, a static busybox, iptables, and gcc with
# static libc (to build the pause image), and a registry with htpasswd
# (private-registry tests on loopback). Idempotent: packages already
# present are skipped, and nothing is fetched when all of them are.
set -euo pipefail

packages=(containerd runc containernetworking-plugins busybox-static iptables gcc libc6-dev python3 util-linux procps iproute2 file docker-registry apache2-utils dbus-daemon prometheus)

missing=()
for pkg in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "rig: all packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "rig: missing packages (${missing[*]}) and not root; install them or re-run as root" >&2
	exit 1
fi

echo "rig: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

# Debian starts the packaged containerd as a service where an init system
# runs; the rig never uses that instance (it runs its own under a temp dir).
echo "rig: installed"
