#!/usr/bin/env bash
# Installs profd's build and test dependencies from Debian's packages (Debian 12, as root).
# nodejs and default-jdk-headless: tests/integration/test_runtimes.sh (skipped without them).
# uftrace: bench/run.sh measures the same call under it (the overhead ratio).
# tmux: tests/integration/test_top.sh drives the interactive profctl top in it (skipped without).
set -eu
pkgs=(build-essential pkg-config clang llvm libzstd-dev zstd zlib1g-dev libisal-dev libprotobuf-c-dev protobuf-c-compiler
	protobuf-compiler libzydis-dev libelf-dev libdw-dev libbpf-dev bpftool libsystemd-dev
	sqlite3 libsqlite3-dev binutils gdb strace libclang-rt-14-dev libc6-dbg systemd python3
	libpython3.11-testsuite curl golang-go nodejs default-jdk-headless uftrace tmux)
# make ARCH=aarch64 / make test-aarch64: cross toolchain, qemu-user and the arm64
# libraries the agent links (multiarch), and libstdc++ for the C++ targets
# under plain qemu-aarch64. ~8 s to install on this machine's mirror;
# drop this list (and the --add-architecture) to leave arm64 out.
arm64_pkgs=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
	libprotobuf-c-dev:arm64 libstdc++6:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	[ "$(id -u)" -eq 0 ] && dpkg --add-architecture arm64 || sudo dpkg --add-architecture arm64
	arm64_new=1
fi
pkgs+=("${arm64_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ -n "${arm64_new:-}" ]; then
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
