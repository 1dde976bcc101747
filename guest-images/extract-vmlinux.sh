#!/usr/bin/env bash
# extract-vmlinux.sh BZIMAGE VMLINUX: writes the kernel inside BZIMAGE,
# uncompressed, to VMLINUX when it is an ELF that QEMU can boot at its PVH
# entry (-kernel vmlinux); else removes VMLINUX and says why.  Exit 0 either
# way: a guest without a vmlinux boots the bzImage (guest.py's kernel()).
#
# Why: under TCG the bzImage's own XZ decompressor took 4-6 s of every boot
# (a probe boot went from 7.6-10.2 s to 3.5-4.5 s).  Debian's kernels are XZ
# with CONFIG_PVH; the entry is the ELF note XEN_ELFNOTE_PHYS32_ENTRY (18).
# Every XZ magic in the file is tried, as the kernel's own extract-vmlinux
# does, and a stream xz cannot finish (a truncated payload) counts for none.
set -uo pipefail
z=${1:?usage: extract-vmlinux.sh BZIMAGE VMLINUX}
elf=${2:?usage: extract-vmlinux.sh BZIMAGE VMLINUX}
rm -f "$elf" "$elf.tmp"
for tool in xz readelf; do
    if ! command -v "$tool" >/dev/null; then
        echo "guest: no $tool (make deps installs xz-utils and binutils); guests boot $z compressed" >&2
        exit 0
    fi
done
found=
for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$z" 2>/dev/null | cut -d: -f1 | head -8); do
    found=1
    tail -c +$((off + 1)) "$z" | xz -dc --single-stream > "$elf.tmp" 2>/dev/null
    [ "${PIPESTATUS[1]}" = 0 ] || continue
    case $(LC_ALL=C readelf -n "$elf.tmp" 2>/dev/null) in
    *"(0x00000012)"*) mv "$elf.tmp" "$elf" && exit 0 ;;
    esac
done
rm -f "$elf.tmp"
if [ -z "$found" ]; then
    echo "guest: $z has no XZ payload; guests boot it compressed" >&2
else
    echo "guest: $z holds no whole XZ stream of an ELF with a PVH entry; guests boot it compressed" >&2
fi
exit 0
