"""DEVICE SIMULATOR: an ``adb`` stand-in that talks to simulated phones, never to a real one.

Tests put a wrapper named ``adb`` on PATH that runs this file with the test's
Python. It implements the subset of the client the profiler uses, with the
real client's output and error texts:

    adb [-s SERIAL] devices [-l] | get-state | shell CMD... | push LOCAL REMOTE
    adb kill-server | start-server | version

``shell`` runs the command with the host's ``/bin/sh`` inside the phone's
tree (see ``sim_device.py``): ``$MBK_SYSROOT`` is the fake root, the device
tools (taskset, getprop, sleep) come first on PATH, and ``/data/local/tmp``
in the command is mapped into the tree. The command string is handed to
``sh -c`` unchanged apart from that mapping, so quoting mistakes in the
profiler would really execute here. Every invocation is appended to
``<root>/adb_calls.jsonl``.

Fault injection from ``registry.json``: ``state`` (unauthorized, offline) and
``disconnect_after_trials`` (the phone vanishes after N finished trials of a
benchmark loop, mid-command, as when a USB cable is pulled).
"""

import json
import os
import shutil
import signal
import subprocess
import sys

ROOT = os.environ.get("MBK_SIM_ROOT")


def _registry():
    path = os.path.join(ROOT, "registry.json")
    if not os.path.exists(path):
        return {"devices": {}}  # no simulated phone plugged in
    with open(path) as f:
        return json.load(f)


def _save_registry(registry):
    with open(os.path.join(ROOT, "registry.json"), "w") as f:
        json.dump(registry, f, indent=1)


def _log(argv):
    with open(os.path.join(ROOT, "adb_calls.jsonl"), "a") as f:
        f.write(json.dumps(argv) + "\n")


def _fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def _present(registry):
    return {s: d for s, d in registry["devices"].items() if d["state"] != "gone"}


def _pick(registry, serial):
    present = _present(registry)
    if serial is None:
        if not present:
            _fail("error: no devices/emulators found")
        if len(present) > 1:
            _fail("error: more than one device/emulator")
        serial = next(iter(present))
    device = present.get(serial)
    if device is None:
        _fail(f"error: device '{serial}' not found")
    if device["state"] == "unauthorized":
        _fail(
            "error: device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\n"
            "Try 'adb kill-server' if that seems wrong.\nOtherwise check for a confirmation dialog on your device."
        )
    if device["state"] == "offline":
        _fail("error: device offline")
    return serial, device


def _map(device, text):
    return text.replace("/data/local/tmp", os.path.join(device["fs"], "data", "local", "tmp"))


def cmd_devices(registry, long_format):
    print("List of devices attached")
    for serial, device in _present(registry).items():
        line = f"{serial}\t{device['state']}" if not long_format else (
            f"{serial:<22} {device['state']} usb:1-1 product:{device['product']} model:{device['model']} device:{device['product']} transport_id:1"
        )
        print(line)
    print()


def cmd_shell(registry, serial, device, words):
    command = _map(device, " ".join(words))
    env = {
        "PATH": os.path.join(device["fs"], "system", "bin") + os.pathsep + "/usr/bin:/bin",
        "MBK_SYSROOT": device["fs"],
        "MBK_SIM_DEVICE_DIR": device["dir"],
        "MBK_SIM_HOME": os.path.dirname(os.path.abspath(__file__)),
        "MBK_SIM_WARMUP_MIN_SECS": os.environ.get("MBK_SIM_WARMUP_MIN_SECS", "0.5"),
        "HOME": device["fs"],
        "LANG": "C",
    }
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=device["fs"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    limit = device.get("disconnect_after_trials")
    finished = 0
    for line in process.stdout:
        if line.startswith("@@MBK_JSON ") and device.get("trial_json") is not None:
            line = "@@MBK_JSON " + device["trial_json"] + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.startswith("@@MBK_JSON "):
            finished += 1
            if limit is not None and finished >= limit:
                # The cable is pulled: the phone is gone, the command dies mid-run.
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                registry = _registry()
                registry["devices"][serial]["state"] = "gone"
                _save_registry(registry)
                sys.exit(255)
    stderr = process.stderr.read()
    process.wait()
    sys.stderr.write(stderr)
    sys.exit(process.returncode)


def cmd_push(device, local, remote):
    if not os.path.exists(local):
        _fail(f"adb: error: cannot stat '{local}': No such file or directory")
    target = _map(device, remote)
    if os.path.isdir(target):
        target = os.path.join(target, os.path.basename(local))
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        _fail(f"adb: error: failed to copy '{local}' to '{remote}': remote couldn't create file: No such file or directory")
    shutil.copyfile(local, target)
    shutil.copymode(local, target)
    size = os.path.getsize(local)
    print(f"{local}: 1 file pushed, 0 skipped. 42.0 MB/s ({size} bytes in 0.001s)")


def main(argv):
    if not ROOT:
        _fail("fake adb: MBK_SIM_ROOT is not set (this is the device SIMULATOR's adb stand-in)")
    _log(argv)
    serial = None
    args = list(argv)
    while args and args[0] in ("-s", "-P", "-H"):
        if args[0] == "-s":
            serial = args[1]
        args = args[2:]
    if not args:
        _fail("adb: usage: adb [-s SERIAL] COMMAND")
    command, rest = args[0], args[1:]
    registry = _registry()
    if command == "devices":
        cmd_devices(registry, "-l" in rest)
    elif command in ("kill-server", "start-server"):
        return 0
    elif command == "version":
        print("Android Debug Bridge version 1.0.41 (mobilebert-kit DEVICE SIMULATOR stand-in)")
    elif command == "get-state":
        serial, device = _pick(registry, serial)
        print(device["state"])
    elif command == "shell":
        serial, device = _pick(registry, serial)
        cmd_shell(registry, serial, device, rest)
    elif command == "push":
        serial, device = _pick(registry, serial)
        if len(rest) != 2:
            _fail("adb: push requires LOCAL and REMOTE")
        cmd_push(device, rest[0], rest[1])
    else:
        _fail(f"adb: unknown command {command} (not simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
