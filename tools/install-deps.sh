#!/usr/bin/env bash
# Installs profd's build and test dependencies from Debian's packages (Debian 12, as root).
set -eu
pkgs=(build-essential pkg-config clang llvm libzstd-dev zstd zlib1g-dev libisal-dev libprotobuf-c-dev protobuf-c-compiler
	protobuf-compiler libzydis-dev libelf-dev libdw-dev libbpf-dev bpftool libsystemd-dev
	sqlite3 libsqlite3-dev binutils gdb strace libclang-rt-14-dev libc6-dbg systemd python3
	libpython3.11-testsuite curl golang-go)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
