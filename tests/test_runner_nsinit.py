"""The pid namespace's init: its ELF, its machine code, and how it behaves when run."""

import os
import shutil
import signal
import struct
import subprocess
import time

import pytest

from runner import nsinit, seccomp

# The reference listings: llvm-mc must encode them to exactly our bytes.
LISTINGS = {
    "x86_64": (
        "x86_64",
        """
        .intel_syntax noprefix
        mov eax, 13
        mov edi, 17
        lea rsi, [rip + act]
        xor edx, edx
        mov r10d, 8
        syscall
        mov eax, 436
        xor edi, edi
        mov esi, -1
        xor edx, edx
        syscall
    1:  mov eax, 34
        syscall
        jmp 1b
        .zero 4
    act: .quad 1, 0, 0, 0
    """,
    ),
    "aarch64": (
        "aarch64",
        """
        mov x8, #134
        mov x0, #17
        adr x1, act
        mov x2, #0
        mov x3, #8
        svc #0
        mov x8, #436
        mov x0, #0
        mov w1, #-1
        mov x2, #0
        svc #0
    1:  mov x8, #73
        mov x0, #0
        mov x1, #0
        mov x2, #0
        mov x3, #0
        mov x4, #0
        svc #0
        b 1b
        .zero 4
    act: .quad 1, 0, 0, 0
    """,
    ),
}


@pytest.mark.parametrize("arch", sorted(nsinit.PROGRAMS))
def test_elf_has_one_loadable_executable_segment(arch):
    e = nsinit.elf(arch)
    assert e[:4] == b"\x7fELF" and e[4] == 2 and e[5] == 1  # 64-bit little-endian
    e_type, e_machine = struct.unpack_from("<HH", e, 16)
    entry, phoff = struct.unpack_from("<QQ", e, 24)
    phnum = struct.unpack_from("<H", e, 56)[0]
    assert (e_type, e_machine, phnum) == (2, nsinit.PROGRAMS[arch][0], 1)
    assert phoff == nsinit.EHDR_SIZE and entry == nsinit.BASE + nsinit.CODE
    p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", e, phoff)
    assert (p_type, p_flags, p_offset, p_vaddr) == (1, 5, 0, nsinit.BASE)  # PT_LOAD, R+X
    assert p_filesz == p_memsz == len(e)
    assert e.endswith(nsinit.IGNORE)


@pytest.mark.parametrize("arch", sorted(nsinit.PROGRAMS))
def test_machine_code_is_what_the_assembler_makes(arch, tmp_path):
    llvm_mc, objcopy = shutil.which("llvm-mc"), shutil.which("llvm-objcopy")
    if not (llvm_mc and objcopy):
        pytest.skip("llvm-mc / llvm-objcopy not installed")
    triple, source = LISTINGS[arch]
    (tmp_path / "init.s").write_text(source)
    subprocess.run(
        [llvm_mc, f"-triple={triple}", "-filetype=obj", "-o", str(tmp_path / "init.o"), str(tmp_path / "init.s")],
        check=True,
    )
    subprocess.run(
        [objcopy, "-O", "binary", "--only-section=.text", str(tmp_path / "init.o"), str(tmp_path / "init.bin")],
        check=True,
    )
    assert nsinit.elf(arch)[nsinit.CODE :] == (tmp_path / "init.bin").read_bytes()


def test_running_init_ignores_sigchld_holds_no_descriptors_and_waits():
    if seccomp.host_arch() not in nsinit.PROGRAMS:
        pytest.skip("no init program for this architecture")
    exe = nsinit.executable()  # run it as nsforge does: the sealed memfd, by descriptor
    r, w = os.pipe()  # an inherited descriptor it must close
    proc = subprocess.Popen([f"/proc/self/fd/{exe}"], pass_fds=(exe, w), stdin=subprocess.DEVNULL)
    os.close(w)
    try:
        for _ in range(200):
            status = open(f"/proc/{proc.pid}/status").read()
            if "State:\tS" in status and not os.listdir(f"/proc/{proc.pid}/fd"):
                break
            time.sleep(0.01)
        ignored = int(status.split("SigIgn:")[1].split()[0], 16)
        assert ignored & (1 << (signal.SIGCHLD - 1))
        assert os.listdir(f"/proc/{proc.pid}/fd") == []
        assert os.read(r, 1) == b""  # our pipe's write end is gone with it
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(5)
        os.close(r)
        os.close(exe)


def test_executable_is_sealed_and_execute_only():
    fd = nsinit.executable()
    try:
        st = os.stat(f"/proc/self/fd/{fd}")
        assert st.st_mode & 0o777 == 0o111 and st.st_size == len(nsinit.elf())
    finally:
        os.close(fd)
