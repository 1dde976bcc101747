#!/usr/bin/env bash
# Builds the emunic test guest from Debian's own kernel package:
#   <out>/vmlinuz            the kernel of linux-image-amd64's current dependency
#   <out>/initramfs.cpio.gz  busybox-static, the modules the guest needs, /init
# The .deb is cached in <out>; nothing is rebuilt when the kernel did not change.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../build/guest}
mkdir -p "$out"
out=$(cd "$out" && pwd)

die() { echo "guest-images/build.sh: $*" >&2; exit 1; }
command -v busybox >/dev/null || [ -x /bin/busybox ] || die "busybox-static is missing (make deps)"
command -v cpio >/dev/null || die "cpio is missing (make deps)"

# The modules rxe, 9p and virtio-net need; dependencies are added below from
# modinfo, so only the roots are named.  crc32_generic is a crypto soft
# dependency of rdma_rxe (ICRC) that modinfo does not list.
roots="virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm sch_netem veth"

pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
    # No apt lists yet: fall back to a .deb already in the cache.
    deb=$(ls -t "$out"/linux-image-[0-9]*_amd64.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || die "cannot resolve linux-image-amd64; run 'apt-get update' (make deps does)"
else
    deb=$(ls "$out/${pkg}"_*_amd64.deb 2>/dev/null | head -1 || true)
    if [ -z "$deb" ]; then
        echo "guest: downloading $pkg with apt-get download" >&2
        (cd "$out" && apt-get download "$pkg" >/dev/null 2>"$out/download.log") ||
            die "apt-get download $pkg failed: $(tail -1 "$out/download.log")"
        deb=$(ls "$out/${pkg}"_*_amd64.deb | head -1)
    fi
fi

stamp="$out/.built-from"
if [ -f "$out/vmlinuz" ] && [ -f "$out/initramfs.cpio.gz" ] &&
   [ "$(cat "$stamp" 2>/dev/null)" = "$(basename "$deb") $(sha1sum "$here/init" | cut -c1-40)" ]; then
    exit 0
fi

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/pkg"
kver=$(ls "$tmp/pkg/lib/modules")
moddir="$tmp/pkg/lib/modules/$kver"

# Resolve dependencies depth first so that each module follows its deps.
declare -A seen=()
order=()
modfile() { find "$moddir" -name "$1.ko" -o -name "$1.ko.xz" | head -1; }
visit() {
    local m=$1 f d
    [ -n "${seen[$m]:-}" ] && return
    seen[$m]=1
    f=$(modfile "$m"); [ -n "$f" ] || die "module $m not in $pkg"
    for d in $(modinfo -F depends "$f" | tr ',' ' '); do visit "$d"; done
    order+=("$m")
}
for m in $roots; do visit "$m"; done

root="$tmp/initramfs"
mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$(command -v busybox || echo /bin/busybox)" "$root/bin/busybox"
for m in "${order[@]}"; do
    f=$(modfile "$m")
    case "$f" in *.xz) xz -dc "$f" > "$root/lib/modules/$m.ko" ;; *) cp "$f" "$root/lib/modules/$m.ko" ;; esac
done
printf '%s\n' "${order[@]}" > "$root/modules.order"
install -m 0755 "$here/init" "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initramfs.cpio.gz"
cp "$tmp/pkg/boot/vmlinuz-$kver" "$out/vmlinuz"
echo "$(basename "$deb") $(sha1sum "$here/init" | cut -c1-40)" > "$stamp"
echo "guest: built $out (kernel $kver, ${#order[@]} modules)" >&2
