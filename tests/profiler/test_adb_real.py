"""The no-device path with the REAL adb client (Debian's ``adb`` package).

These tests need ``adb`` on PATH: the CI set-up installs it (``apt-get install
adb``). Without it they fail with a message saying so, unless
``MBK_ALLOW_NO_ADB=1`` is set, which skips them.

The client starts its server daemon on localhost. Each test gives it a private
port (``ANDROID_ADB_SERVER_PORT``) so it neither uses nor disturbs a server a
developer may be running on 5037, and kills that server afterwards. Nothing
here talks to anything but localhost.
"""

import os
import shutil
import socket
import subprocess
import sys

import pytest


@pytest.fixture
def real_adb():
    path = shutil.which("adb")
    if path is None:
        if os.environ.get("MBK_ALLOW_NO_ADB") == "1":
            pytest.skip("adb not installed and MBK_ALLOW_NO_ADB=1")
        pytest.fail("the real adb client is needed: install it with `apt-get install -y adb` (or set MBK_ALLOW_NO_ADB=1 to skip)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(port))
    env.pop("ANDROID_SERIAL", None)
    env.pop("ADB_SERVER_SOCKET", None)  # never a remote server
    yield path, env
    subprocess.run([path, "kill-server"], env=env, capture_output=True, timeout=30)


def _mbk(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "mobilebert_kit.cli.main", "profile", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_device_is_one_line_with_the_fix(real_adb, models, tmp_path):
    path, env = real_adb
    version = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30)
    assert "Android Debug Bridge" in version.stdout
    report = tmp_path / "r.json"
    completed = _mbk(env, models["ln_gelu"], "--target", "adb", "--json", report)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "mbk profile: error: no Android device found by adb; connect a phone with USB debugging on "
        "(Settings > Developer options) and check `adb devices`"
    ]
    assert "Traceback" not in completed.stderr + completed.stdout
    assert not report.exists()


def test_no_device_for_a_named_serial_and_for_the_device_list(real_adb, models):
    _, env = real_adb
    named = _mbk(env, models["ln_gelu"], "--target", "adb", "--serial", "0123456789")
    assert named.returncode == 2 and len(named.stderr.strip().splitlines()) == 1
    assert "no Android device found by adb" in named.stderr
    listing = _mbk(env, "--target", "adb", "--list-devices")
    assert listing.returncode == 2 and "no Android device found" in listing.stderr and "Traceback" not in listing.stderr


def test_adb_missing_is_one_line(models, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    completed = _mbk(env, models["ln_gelu"], "--target", "adb")
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "mbk profile: error: adb not found on PATH; install it (Debian/Ubuntu: sudo apt-get install adb, "
        "or Android SDK platform-tools) or pass --adb PATH"
    ]
    wrong = _mbk(dict(os.environ), models["ln_gelu"], "--target", "adb", "--adb", tmp_path / "nope" / "adb")
    assert wrong.returncode == 2 and "no such executable" in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
