"""Finding benchmark_model (user path or cache) and checking its ABI against the device."""

import pytest

from mobilebert_kit.profiler.benchmark_binary import BenchmarkBinary, elf_abi
from mobilebert_kit.profiler.errors import DeviceError


def _elf(path, machine, little_endian=True):
    order = "little" if little_endian else "big"
    header = b"\x7fELF" + b"\x02" + (b"\x01" if little_endian else b"\x02") + b"\x01" + b"\x00" * 9 + (2).to_bytes(2, order) + machine.to_bytes(2, order)
    path.write_bytes(header + b"\x00" * 44)
    return path


@pytest.mark.parametrize("machine, abi", [(183, "arm64-v8a"), (40, "armeabi-v7a"), (62, "x86_64"), (3, "x86"), (999, "elf-machine-999")])
def test_elf_header_names_the_abi(tmp_path, machine, abi):
    assert elf_abi(_elf(tmp_path / "bm", machine)) == abi


def test_scripts_and_non_executables(tmp_path):
    script = tmp_path / "stand_in"
    script.write_text("#!/bin/sh\necho hi\n")
    assert BenchmarkBinary(script).abi == "script"
    text = tmp_path / "notes.txt"
    text.write_text("benchmark_model\n")
    with pytest.raises(DeviceError, match="is not an executable"):
        BenchmarkBinary(text)
    with pytest.raises(DeviceError, match="does not exist"):
        BenchmarkBinary(tmp_path / "absent")


def test_cache_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("MBK_CACHE_DIR", str(tmp_path))
    with pytest.raises(DeviceError) as err:
        BenchmarkBinary.locate("arm64-v8a")
    message = str(err.value)
    assert "android_aarch64_benchmark_model" in message and str(tmp_path / "benchmark_model" / "arm64-v8a" / "benchmark_model") in message
    cached = tmp_path / "benchmark_model" / "arm64-v8a"
    cached.mkdir(parents=True)
    _elf(cached / "benchmark_model", 183)
    binary = BenchmarkBinary.locate("arm64-v8a")
    assert binary.abi == "arm64-v8a"
    binary.check_abi(["arm64-v8a", "armeabi-v7a"], "device X")


def test_abi_mismatch_message(tmp_path):
    binary = BenchmarkBinary(_elf(tmp_path / "bm", 40))
    binary.check_abi(["arm64-v8a", "armeabi-v7a"], "device X")  # 32-bit ARM runs on arm64 phones that list it
    with pytest.raises(DeviceError, match="built for armeabi-v7a but device Y runs arm64-v8a; download .*android_aarch64_benchmark_model"):
        binary.check_abi(["arm64-v8a"], "device Y")
