#!/usr/bin/env bash
# Builds the emunic test guest from Debian's own kernel package:
#   <out>/vmlinuz            the kernel of linux-image-amd64's current dependency
#   <out>/vmlinux            the same kernel uncompressed, booted at its PVH entry
#   <out>/initramfs.cpio.gz  busybox-static, the modules the guest needs, /init
#   <out>/siw/siw.ko         soft-iWARP, built here (see build_siw)
# The .deb is kept in <out>; nothing is rebuilt when the kernel did not change.
# What is slow to make, the .deb (70 MB to download), siw.ko (~30 s to
# build) and the image (~10 s), is also kept in a cache outside the work
# tree, so that a fresh clone does not fetch and build it again (~50 s of
# the first guest's start): $EMUNIC_CACHE, by default ~/.cache/emunic
# (XDG_CACHE_HOME); EMUNIC_CACHE= (empty) uses none.  Each entry is named by
# its package version or, the image, a digest of what it was built from;
# delete the directory to start afresh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../build/guest}
mkdir -p "$out"
out=$(cd "$out" && pwd)

die() { echo "guest-images/build.sh: $*" >&2; exit 1; }

cache=${EMUNIC_CACHE-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/emunic}
[ -z "$cache" ] || mkdir -p "$cache" 2>/dev/null || cache=
# cache_get NAME DEST: DEST from the cache's NAME (a hard link where it can).
cache_get() {
    [ -n "$cache" ] && [ -f "$cache/$1" ] || return 1
    ln -f "$cache/$1" "$2" 2>/dev/null && return 0
    { cp "$cache/$1" "$2.tmp.$$" && mv "$2.tmp.$$" "$2"; } 2>/dev/null && return 0
    rm -f "$2.tmp.$$"
    return 1
}
# cache_put SRC NAME: into the cache unless there; whole or not at all.
cache_put() {
    [ -n "$cache" ] && [ ! -f "$cache/$2" ] || return 0
    { cp "$1" "$cache/$2.tmp.$$" && mv "$cache/$2.tmp.$$" "$cache/$2"; } 2>/dev/null ||
        rm -f "$cache/$2.tmp.$$"
}
command -v busybox >/dev/null || [ -x /bin/busybox ] || die "busybox-static is missing (make deps)"
command -v cpio >/dev/null || die "cpio is missing (make deps)"

# The modules rxe, siw, 9p and virtio-net need; dependencies are added below
# from modinfo, so only the roots are named.  crc32_generic is a crypto soft
# dependency of rdma_rxe (ICRC) that modinfo does not list; crc32c_generic
# the same for siw (its MPA CRC) and libcrc32c.  dummy is siw0's netdev
# (agent.sh).  siw itself is built here, below.
roots="virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm sch_netem veth"
roots="$roots crc32c_generic dummy siw"

# (apt-cache fails without lists: then pkg is empty, and the fallback below)
pkg=$( { apt-cache depends linux-image-amd64 2>/dev/null || true; } |
      awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
# cached_deb PATTERN: the newest .deb in the cache matching PATTERN, or nothing.
cached_deb() {
    [ -n "$cache" ] || return 0
    (cd "$cache" 2>/dev/null && ls -t $1 2>/dev/null | head -1) || true
}
if [ -z "$pkg" ]; then
    # No apt lists yet: fall back to a .deb already here or in the cache.
    deb=$(ls -t "$out"/linux-image-[0-9]*_amd64.deb 2>/dev/null | head -1 || true)
    c=$(cached_deb 'linux-image-[0-9]*_amd64.deb')
    if [ -z "$deb" ] && [ -n "$c" ] && cache_get "$c" "$out/$c"; then
        echo "guest: no apt lists; $c from the cache $cache" >&2
        deb=$out/$c
        cache_get "$c.kver" "$deb.kver" || true
    fi
    [ -n "$deb" ] || die "cannot resolve linux-image-amd64; run 'apt-get update' (make deps does)"
else
    deb=$(ls "$out/${pkg}"_*_amd64.deb 2>/dev/null | head -1 || true)
    c=$(cached_deb "${pkg}_*_amd64.deb")
    if [ -z "$deb" ] && [ -n "$c" ] && cache_get "$c" "$out/$c"; then
        echo "guest: $pkg from the cache $cache" >&2
        deb=$out/$c
        cache_get "$c.kver" "$deb.kver" || true     # spares listing the .deb (below)
    fi
    if [ -z "$deb" ]; then
        echo "guest: downloading $pkg with apt-get download" >&2
        (cd "$out" && apt-get download "$pkg" >/dev/null 2>"$out/download.log") ||
            die "apt-get download $pkg failed: $(tail -1 "$out/download.log")"
        deb=$(ls "$out/${pkg}"_*_amd64.deb | head -1)
    fi
    cache_put "$deb" "${deb##*/}"
fi

# Debian builds its kernels without siw (CONFIG_RDMA_SIW is not set), so
# siw.ko is built out of tree from Debian's own source of that kernel
# (linux-source-X.Y, the same package version as the image) against its
# headers package, and cached in <out>/siw with what it was built from.
# The module is unsigned; the guest kernel loads it with a taint (it does
# not force signatures).  Without them (not root, or not in the archive)
# the guest has no siw0 and tests/test_siw.py skips, saying so.
build_siw() {
    local kver=$1 ver=$2 src="linux-source-${1%.*}" hdr="linux-headers-$1" dir="$out/siw" p
    if [ "$(cat "$dir/.built-from" 2>/dev/null)" = "$kver $ver" ] && [ -f "$dir/siw.ko" ]; then
        cache_put "$dir/siw.ko" "siw-$kver-$ver.ko"
        return
    fi
    if rm -rf "$dir" && mkdir -p "$dir" && cache_get "siw-$kver-$ver.ko" "$dir/siw.ko"; then
        echo "$kver $ver" > "$dir/.built-from"
        echo "guest: siw.ko for $kver from the cache $cache" >&2
        return
    fi
    for p in "$src" "$hdr"; do
        [ "$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null)" = "install ok installed $ver" ] && continue
        if [ "$(id -u)" -ne 0 ]; then
            echo "guest: no siw0: siw.ko needs $src and $hdr; run: sudo apt-get install -y" \
                 "--no-install-recommends $src=$ver $hdr=$ver" >&2
            return 1
        fi
        echo "guest: installing $p=$ver for siw.ko" >&2
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y --no-install-recommends "$p=$ver" >"$out/siw-apt.log" 2>&1 &&
           ! { apt-get update && apt-get install -y --no-install-recommends "$p=$ver"; } >"$out/siw-apt.log" 2>&1; then
            echo "guest: no siw0: apt-get install $p=$ver failed: $(tail -1 "$out/siw-apt.log")" >&2
            return 1
        fi
    done
    rm -rf "$dir" && mkdir -p "$dir/src"
    # Only siw's directory, not the whole 140 MB tree.
    tar -xJf "/usr/src/$src.tar.xz" -C "$dir/src" --strip-components=5 \
        "$src/drivers/infiniband/sw/siw" || die "no drivers/infiniband/sw/siw in /usr/src/$src.tar.xz"
    make -C "/usr/src/$hdr" M="$dir/src" CONFIG_RDMA_SIW=m modules >"$dir/make.log" 2>&1 ||
        die "building siw.ko failed (see $dir/make.log)"
    # Debian strips its modules of debug info too (5 MB -> ~0.3 MB in the initramfs).
    strip --strip-debug -o "$dir/siw.ko" "$dir/src/siw.ko" || die "strip siw.ko failed"
    rm -rf "$dir/src"
    echo "$kver $ver" > "$dir/.built-from"
    cache_put "$dir/siw.ko" "siw-$kver-$ver.ko"
    echo "guest: built siw.ko for $kver from $src $ver" >&2
}
# The kernel version, from the .deb's file list once: listing it unpacks the
# whole archive (~5 s), and every guest.py run comes through here.
kver=$(cat "$deb.kver" 2>/dev/null || true)
if [ -z "$kver" ] || [ "$deb" -nt "$deb.kver" ]; then
    kver=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed -n 's,^\./lib/modules/\([^/]*\)/$,\1,p' | head -1)
    [ -n "$kver" ] || die "no /lib/modules/<version> in $deb"
    echo "$kver" > "$deb.kver.$$" && mv "$deb.kver.$$" "$deb.kver"
fi
cache_put "$deb.kver" "${deb##*/}.kver"
siw_ko=
build_siw "$kver" "$(dpkg-deb -f "$deb" Version)" && siw_ko="$out/siw/siw.ko"
[ -n "$siw_ko" ] || roots=${roots% siw}

stamp="$out/.built-from"
# The tools extract-vmlinux.sh needs are part of what the image was built
# from: a build made before they were installed is made again.
built_from="$(basename "$deb") $(cat "$here/init" "$0" "$here/extract-vmlinux.sh" $siw_ko | sha1sum | cut -c1-40)"
built_from="$built_from $( { command -v xz readelf || true; } | tr '\n' ' ')"
# The image itself is cached under a digest of what it was built from:
# image-KEY/ holds vmlinuz, initramfs.cpio.gz and vmlinux.  An image whose
# vmlinux could not be made (no xz or readelf, or a failed extraction) is not
# cached: a failure that passes would otherwise stay in the cache under the
# same key, and every later clone would boot the slow bzImage.
key=image-$(echo "$built_from" | sha1sum | cut -c1-16)
put_image() {
    [ -n "$cache" ] && [ -f "$out/vmlinux" ] || return 0
    if [ -d "$cache/$key" ]; then
        [ ! -f "$cache/$key/vmlinux" ] || { touch "$cache/$key" 2>/dev/null || true; return 0; }   # used last
        rm -rf "$cache/$key" 2>/dev/null || return 0    # an older build's, without vmlinux
    fi
    local t="$cache/$key.tmp.$$" f
    { rm -rf "$t" && mkdir "$t"; } 2>/dev/null || return 0
    for f in vmlinuz vmlinux initramfs.cpio.gz; do
        [ ! -f "$out/$f" ] || cp "$out/$f" "$t/$f" || { rm -rf "$t"; return 0; }
    done
    mv -T "$t" "$cache/$key" 2>/dev/null || { rm -rf "$t"; return 0; }
    prune_cache
}
# The cache would grow by an image (~50 MB) each time this script or the
# kernel changes, and by a .deb (70 MB) each kernel update: a new image
# keeps the three images used last (a hit touches its directory) and the
# two newest kernels' .deb, version and siw.ko.
prune_cache() {
    local f
    # One name a line (a space in the path stays in the name); temp
    # entries a killed build left go after an hour.
    { ls -dt "$cache"/image-* 2>/dev/null | grep -v '\.tmp\.' | tail -n +4 |
        while IFS= read -r f; do rm -rf -- "$f"; done; } || true
    { ls -t "$cache"/linux-image-*_amd64.deb 2>/dev/null | tail -n +3 |
        while IFS= read -r f; do rm -f -- "$f"; done; } || true
    { ls -t "$cache"/siw-*.ko 2>/dev/null | tail -n +3 |
        while IFS= read -r f; do rm -f -- "$f"; done; } || true
    find "$cache" -maxdepth 1 -name '*.tmp.*' -mmin +60 -exec rm -rf -- {} + 2>/dev/null || true
    # a kernel version whose .deb is not here (pruned above, or cached
    # without apt lists)
    for f in "$cache"/*.deb.kver; do
        { [ -e "$f" ] && [ ! -e "${f%.kver}" ] && rm -f -- "$f"; } || true
    done
}
if [ -f "$out/vmlinuz" ] && [ -f "$out/initramfs.cpio.gz" ] &&
   [ "$(cat "$stamp" 2>/dev/null)" = "$built_from" ]; then
    put_image
    exit 0
fi
if [ -n "$cache" ] && [ -f "$cache/$key/vmlinuz" ] && [ -f "$cache/$key/vmlinux" ] &&
   [ -f "$cache/$key/initramfs.cpio.gz" ]; then
    touch "$cache/$key" 2>/dev/null || true     # used last: kept by another build's prune_cache
    got=1
    for f in vmlinuz vmlinux initramfs.cpio.gz; do
        rm -f "$out/$f"
        cache_get "$key/$f" "$out/$f" || { got=; break; }
    done
    if [ -n "$got" ]; then
        echo "$built_from" > "$stamp"
        echo "guest: the image (kernel $kver) from the cache $cache" >&2
        exit 0
    fi
    echo "guest: could not take the image from $cache/$key; building it" >&2
fi

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/pkg"
moddir="$tmp/pkg/lib/modules/$kver"
[ -d "$moddir" ] || die "no $moddir in $deb"
[ -z "$siw_ko" ] || cp "$siw_ko" "$moddir/siw.ko"

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
# New files, not rewritten ones: they may be hard links into the cache.
rm -f "$out/initramfs.cpio.gz" "$out/vmlinuz" "$out/vmlinux"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initramfs.cpio.gz"
cp "$tmp/pkg/boot/vmlinuz-$kver" "$out/vmlinuz"
"$here/extract-vmlinux.sh" "$out/vmlinuz" "$out/vmlinux"
echo "$built_from" > "$stamp"
put_image
echo "guest: built $out (kernel $kver, ${#order[@]} modules)" >&2
