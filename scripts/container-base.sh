#!/usr/bin/env bash
# Makes a local runtime base for the Containerfile from Debian's packages, for a machine
# that reaches Debian's archive but no image registry (CI here):
#
#   scripts/container-base.sh [TAG]     # default localhost/toolgate-base:bookworm
#   podman build --build-arg RUNTIME_IMAGE=localhost/toolgate-base:bookworm ...
#
# The image holds what gcr.io/distroless/cc-debian12:nonroot holds for a Rust binary, and is
# made the way distroless makes it (package contents unpacked, no package manager, no shell):
# libc6, libgcc-s1, netbase and tzdata from this machine's Debian release, the host's CA
# bundle (Debian's ca-certificates), and users root, nobody and nonroot (65532) with a home.
# About 16 MB; built in seconds, nothing compiled. Needs apt-get, dpkg-deb and podman.
set -euo pipefail

TAG=${1:-localhost/toolgate-base:bookworm}
die() { printf 'container-base.sh: %s\n' "$*" >&2; exit 1; }
for tool in apt-get dpkg-deb podman; do
  command -v "$tool" >/dev/null || die "$tool is not installed (Debian: apt-get install podman)"
done
[ -f /etc/ssl/certs/ca-certificates.crt ] \
  || die "no CA bundle at /etc/ssl/certs/ca-certificates.crt: apt-get install ca-certificates"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download as root warns that its sandbox user cannot write here; the files arrive.
apt-get download -qq libc6 libgcc-s1 netbase tzdata 2>&1 | grep -v 'unsandboxed' || true
ls ./*.deb >/dev/null 2>&1 || die "apt-get download fetched nothing: run apt-get update first"
mkdir root
for deb in ./*.deb; do dpkg-deb -x "$deb" root; done
# What a package's maintainer scripts would make, and distroless adds by hand.
mkdir -p root/etc/ssl/certs root/tmp root/home/nonroot root/root
cp /etc/ssl/certs/ca-certificates.crt root/etc/ssl/certs/
cat >root/etc/passwd <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >root/etc/group <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
echo 'hosts: files dns' >root/etc/nsswitch.conf
chmod 1777 root/tmp
chmod 0700 root/root
chown 65532:65532 root/home/nonroot
# Documentation and manuals are not needed at run time.
rm -rf root/usr/share/doc root/usr/share/man root/usr/share/lintian root/usr/share/locale
tar --numeric-owner -C root -cf base.tar .
podman import --quiet \
  --change 'USER 65532:65532' --change 'WORKDIR /home/nonroot' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  base.tar "$TAG" >/dev/null
echo "$TAG: $(podman image inspect "$TAG" --format '{{.Size}}') bytes"
