"""A thin wrapper over the real ``adb`` client (Debian's ``adb`` package or platform-tools).

Every failure a user can meet (adb missing, no device, unauthorized or offline, a serial not connected, a
device that disappears) becomes one :class:`DeviceError` line saying what to do. Callers quote every path of a
shell command with ``shlex.quote``; it is passed to ``adb shell`` as one argument, parsed once by the device.

Example:
    >>> adb = AdbClient()  # doctest: +SKIP
    >>> [d["serial"] for d in adb.devices()]  # doctest: +SKIP
    ['8A1X0K9M3']
"""

import os
import shutil
import subprocess

from mobilebert_kit.profiler.errors import DeviceDisconnectedError, DeviceError

# What adb prints when the device vanished under a running command.
_GONE_MARKERS = ("device not found", "device offline", "no devices/emulators found", "error: closed", "device '", "protocol fault")
_ATTRIBUTE_KEYS = ("usb", "product", "model", "device", "transport_id", "features")
# Properties that describe a phone in the device list and the report.
DEVICE_PROPS = (
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.product.device",
    "ro.soc.manufacturer",
    "ro.soc.model",
    "ro.board.platform",
    "ro.hardware",
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.fingerprint",
    "ro.product.cpu.abi",
    "ro.product.cpu.abilist",
    "ro.mbk.simulator",
)


class AdbClient:
    """Runs the ``adb`` client.

    Args:
        adb_path: the adb executable; None looks for ``adb`` on PATH.
        timeout_s: default time limit of one adb command (not of a benchmark
            run, which the caller bounds itself).

    Raises:
        DeviceError: adb is not installed or ``adb_path`` is not executable.
    """

    def __init__(self, adb_path=None, timeout_s=60):
        if adb_path:
            resolved = shutil.which(str(adb_path)) or (str(adb_path) if os.access(str(adb_path), os.X_OK) and os.path.isfile(str(adb_path)) else None)
            if resolved is None:
                raise DeviceError(f"--adb {adb_path}: no such executable; point it at the adb client of Android platform-tools")
        else:
            resolved = shutil.which("adb")
            if resolved is None:
                raise DeviceError(
                    "adb not found on PATH; install it (Debian/Ubuntu: sudo apt-get install adb, or Android SDK platform-tools) "
                    "or pass --adb PATH"
                )
        self.path = resolved
        self.timeout_s = timeout_s

    def run(self, args, *, serial=None, timeout_s=None, check=True, input_bytes=None):
        """Runs ``adb [-s serial] args``; returns the CompletedProcess (text)."""
        command = [self.path] + (["-s", serial] if serial else []) + list(args)
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                timeout=timeout_s or self.timeout_s,
                input=input_bytes,
            )
        except subprocess.TimeoutExpired:
            raise DeviceError(
                f"adb {' '.join(args[:2])} did not answer within {timeout_s or self.timeout_s:.0f} s; "
                "check the USB connection (adb devices) and retry"
            ) from None
        except OSError as err:
            raise DeviceError(f"cannot run {self.path} ({err.strerror}); reinstall adb or pass --adb PATH") from None
        result.stdout = result.stdout.decode("utf-8", "replace")
        result.stderr = result.stderr.decode("utf-8", "replace")
        if check and result.returncode != 0:
            self._raise_for(result, serial, args)
        return result

    def _raise_for(self, result, serial, args):
        message = _first_error(result.stderr) or _first_error(result.stdout) or f"exit status {result.returncode}"
        lowered = message.lower()
        if serial and any(marker in lowered for marker in _GONE_MARKERS):
            raise DeviceDisconnectedError(
                f"device {serial} disconnected ({message}); reconnect it (check `adb devices`) and re-run"
            )
        if "unauthorized" in lowered:
            raise DeviceError(f"device {serial or ''} is unauthorized; unlock the phone and accept the 'Allow USB debugging' prompt, then re-run")
        if "cannot connect to daemon" in lowered or "failed to start daemon" in lowered:
            raise DeviceError(f"adb could not start its server ({message}); run `adb kill-server` and retry")
        raise DeviceError(f"adb {' '.join(str(a) for a in args[:2])} failed: {message}")

    def devices(self):
        """Returns ``[{serial, state, attributes}]`` from ``adb devices -l``."""
        result = self.run(["devices", "-l"], check=False)
        if result.returncode != 0:
            message = _first_error(result.stderr) or _first_error(result.stdout) or f"exit status {result.returncode}"
            raise DeviceError(f"adb devices failed ({message}); run `adb kill-server` and retry")
        found = []
        for line in result.stdout.splitlines():
            line = line.strip()
            if not line or line.startswith(("List of devices", "*", "adb server", "adb: ")):
                continue
            parts = line.split()
            # The state can be several words ("no permissions (...); see [...]"),
            # then come key:value attributes (usb:, product:, model:, device:, transport_id:).
            attributes, state_words = {}, []
            for word in parts[1:]:
                key, sep, value = word.partition(":")
                if sep and key in _ATTRIBUTE_KEYS and state_words:
                    attributes[key] = value
                elif not attributes:
                    state_words.append(word)
            found.append({"serial": parts[0], "state": " ".join(state_words), "attributes": attributes})
        return found

    def ready_serials(self, serials=None):
        """Checks the requested ``serials`` (None or empty: the one device connected) and returns them; DeviceError for
        no device, a serial not connected, one unauthorized/offline/without permissions, or several and no choice."""
        devices = self.devices()
        by_serial = {d["serial"]: d for d in devices}
        if not devices:
            raise DeviceError(
                "no Android device found by adb; connect a phone with USB debugging on "
                "(Settings > Developer options) and check `adb devices`"
            )
        if not serials:
            if len(devices) > 1:
                listed = ", ".join(f"{d['serial']} ({d['state']})" for d in devices)
                raise DeviceError(f"{len(devices)} devices connected ({listed}); choose with --serial (repeat it to run several in parallel)")
            serials = [devices[0]["serial"]]
        for serial in serials:
            device = by_serial.get(serial)
            if device is None:
                listed = ", ".join(by_serial) or "none"
                raise DeviceError(f"device {serial} is not connected (adb sees: {listed}); pass one of those to --serial")
            _check_state(device)
        return list(serials)

    def shell(self, serial, command, *, timeout_s=None, check=True):
        """Runs ``command`` (already quoted) in the device shell; returns stdout."""
        return self.run(["shell", command], serial=serial, timeout_s=timeout_s, check=check).stdout

    def shell_stream(self, serial, command):
        """Starts ``adb shell command`` and returns the Popen (stdout merged, text lines)."""
        try:
            return subprocess.Popen(
                [self.path, "-s", serial, "shell", command],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
            )
        except OSError as err:
            raise DeviceError(f"cannot run {self.path} ({err.strerror}); reinstall adb or pass --adb PATH") from None

    def push(self, serial, local, remote, *, timeout_s=None):
        """Copies ``local`` to ``remote`` (paths are argv items: no shell quoting needed)."""
        self.run(["push", str(local), remote], serial=serial, timeout_s=timeout_s or max(self.timeout_s, 300))

    def get_state(self, serial):
        """Returns adb's state for ``serial`` ("device", "offline", ...) or "gone"."""
        result = self.run(["get-state"], serial=serial, check=False, timeout_s=15)
        return (result.returncode == 0 and result.stdout.strip()) or "gone"

    def props(self, serial, extra_command=None):
        """Returns the :data:`DEVICE_PROPS` of a device as a dict (missing ones are ""), after running the
        already-quoted ``extra_command`` (its output dropped) in the same adb call."""
        script = "; ".join(f'echo "{p}=$(getprop {p})"' for p in DEVICE_PROPS)
        if extra_command:
            script = f"{extra_command}; echo @@MBK_PROPS; {script}"
        out = self.shell(serial, script, timeout_s=30)
        rest = out.partition("@@MBK_PROPS\n")[2] if extra_command else out
        props = {}
        for line in rest.splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key in DEVICE_PROPS:
                props[key] = value.strip()
        return props


def _check_state(device):
    serial, state = device["serial"], device["state"]
    if state == "device":
        return
    if state == "unauthorized":
        raise DeviceError(f"device {serial} is unauthorized; unlock the phone and accept the 'Allow USB debugging' prompt, then re-run")
    if state == "offline":
        raise DeviceError(f"device {serial} is offline; reconnect the USB cable (or run `adb reconnect`), then re-run")
    if state.startswith("no permissions"):
        raise DeviceError(
            f"adb has no permission to open device {serial}; add a udev rule for it "
            "(https://developer.android.com/studio/run/device) and re-plug the cable"
        )
    raise DeviceError(f"device {serial} is in state '{state}', not 'device'; boot it into Android and re-run")


def _first_error(text):
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("* daemon"):
            return line
    return ""
