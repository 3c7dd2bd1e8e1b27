#!/usr/bin/env python3
"""Turn the wheel built with avfs staged in agentvfs/_bin/ into a platform wheel.

    platform_wheel.py WHEEL BINARY GOOS GOARCH OUTDIR
    platform_wheel.py --check BINARY GOOS GOARCH   (only check the binary)

setuptools tags a package without extension modules py3-none-any, and
Debian's wheel (0.38) has no `wheel tags` command, so the retagging is done
here with the standard library alone, which also keeps the script working
offline with whatever wheel or setuptools version is installed. It:

- checks that BINARY really is an executable for GOOS/GOARCH (a release
  must never ship an amd64 binary in an arm64 wheel);
- rewrites .dist-info/WHEEL: Root-Is-Purelib false, one Tag line per
  platform tag (py3-none-PLATFORM: the Go binary is static and does not
  depend on the Python version);
- marks agentvfs/_bin/* executable in the archive, so pip installs it so;
- rewrites RECORD with fresh hashes and names the file after its tags.

Prints the path of the platform wheel.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import sys
import zipfile

# Platform tags per GOOS/GOARCH. avfs is built with CGO_ENABLED=0, so the
# Linux binary is static: it runs on any glibc (manylinux) and on musl.
# Go 1.25 and later need macOS 12.
PLATFORMS = {
    ("linux", "amd64"): ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    ("linux", "arm64"): ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    ("darwin", "amd64"): ["macosx_12_0_x86_64"],
    ("darwin", "arm64"): ["macosx_12_0_arm64"],
}

# ELF e_machine and Mach-O cputype of each GOARCH.
ELF_MACHINE = {"amd64": 0x3E, "arm64": 0xB7}
MACHO_CPU = {"amd64": 0x01000007, "arm64": 0x0100000C}

BIN_PREFIX = "agentvfs/_bin/"


def check_binary(path: str, goos: str, goarch: str) -> None:
    """Fail unless path is an executable of goos/goarch (from its header)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if goos == "linux":
        if head[:4] != b"\x7fELF" or head[5] != 1:  # little-endian ELF
            sys.exit(f"platform_wheel: {path} is not a little-endian ELF executable (GOOS=linux)")
        machine = struct.unpack_from("<H", head, 18)[0]
        if machine != ELF_MACHINE[goarch]:
            sys.exit(f"platform_wheel: {path} is an ELF for machine {machine:#x}, not {goarch}")
    elif goos == "darwin":
        magic, cpu = struct.unpack_from("<II", head, 0)
        if magic != 0xFEEDFACF:
            sys.exit(f"platform_wheel: {path} is not a 64-bit Mach-O executable (GOOS=darwin)")
        if cpu != MACHO_CPU[goarch]:
            sys.exit(f"platform_wheel: {path} is a Mach-O for cpu {cpu:#x}, not {goarch}")


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def retag(wheel: str, tags: list, outdir: str) -> str:
    """Write the platform wheel of `wheel` into outdir and return its path."""
    with zipfile.ZipFile(wheel) as src:
        infos = src.infolist()
        contents = {i.filename: src.read(i) for i in infos}
    dist_info = next(n.split("/")[0] for n in contents if n.split("/")[0].endswith(".dist-info"))
    if not any(n.startswith(BIN_PREFIX) and not n.endswith("/") for n in contents):
        sys.exit(f"platform_wheel: {wheel} holds nothing under {BIN_PREFIX}")

    wheel_meta = f"{dist_info}/WHEEL"
    lines = [
        ln for ln in contents[wheel_meta].decode("utf-8").splitlines()
        if ln and not ln.startswith(("Tag:", "Root-Is-Purelib:"))
    ]
    lines.append("Root-Is-Purelib: false")
    lines += [f"Tag: py3-none-{t}" for t in tags]
    contents[wheel_meta] = ("\n".join(lines) + "\n\n").encode("utf-8")

    record_name = f"{dist_info}/RECORD"
    record = [f"{n},{record_hash(d)},{len(d)}" for n, d in contents.items() if n != record_name]
    record.append(f"{record_name},,")
    contents[record_name] = ("\n".join(record) + "\n").encode("utf-8")

    name_version = dist_info[: -len(".dist-info")]
    out = os.path.join(outdir, f"{name_version}-py3-none-{'.'.join(tags)}.whl")
    os.makedirs(outdir, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in infos:  # keep the original order, RECORD last as it was
            new = zipfile.ZipInfo(info.filename, info.date_time)
            new.compress_type = zipfile.ZIP_DEFLATED
            mode = (info.external_attr >> 16) or 0o100644
            if info.filename.startswith(BIN_PREFIX):
                mode |= 0o755
            new.external_attr = mode << 16
            dst.writestr(new, contents[info.filename])
    return out


def platform_tags(goos: str, goarch: str) -> list:
    tags = PLATFORMS.get((goos, goarch))
    if tags is None:
        known = ", ".join(f"{o}/{a}" for o, a in PLATFORMS)
        sys.exit(f"platform_wheel: no platform tag for {goos}/{goarch} (known: {known})")
    return tags


def main(argv: list) -> int:
    if len(argv) == 4 and argv[0] == "--check":
        platform_tags(argv[2], argv[3])
        check_binary(*argv[1:])
        return 0
    if len(argv) != 5:
        sys.exit("usage:\n" + "\n".join(__doc__.strip().splitlines()[2:4]))
    wheel, binary, goos, goarch, outdir = argv
    tags = platform_tags(goos, goarch)
    check_binary(binary, goos, goarch)
    print(retag(wheel, tags, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
