"""A foreign-architecture Python root, built once into the user's cache, run under QEMU's user-mode emulator.

:func:`ensure_sysroot` makes (or finds) a directory holding:

- ``sysroot/``: a Debian Python unpacked (``dpkg -x``) from the architecture's ``.deb`` files, with the given
  wheels of that architecture unzipped into its ``dist-packages``;
- ``qemu/<binary>``: the static user-mode emulator (no root, no binfmt registration, nothing installed);
- ``roots/<cpu>/``: one root per emulated CPU: links to ``sysroot/``'s top directories and its own
  ``proc/cpuinfo`` (``qemu -L`` looks every absolute path up in the root first).

How it is fetched without installing anything, and built once under an ``flock``: docs/export.md ("The
cache"). Standard library only; its one error is an :class:`~mobilebert_kit.errors.EmulationError` (one line:
what failed, and the fix).

Example:
    >>> root = ensure_sysroot(SysrootSpec("arm64", "python3.11", ("numpy==2.4.6",), ("manylinux2014_aarch64",),
    ...                       "qemu-user-static", "qemu-aarch64-static", {"cortex-a76": "..."}))  # doctest: +SKIP
    >>> root.python  # doctest: +SKIP
    PosixPath('/root/.cache/mobilebert-kit/emulation/arm64-3f2a.../sysroot/usr/bin/python3.11')
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mobilebert_kit.errors import EmulationError, first_line
from mobilebert_kit.utils import kernel_lock
from mobilebert_kit.utils.structured import load_json

# Where Debian's packages come from; MBK_DEBIAN_MIRROR replaces the main archive (a local mirror, a proxy).
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY = "http://deb.debian.org/debian-security"
DEBIAN_SUITE = "bookworm"  # Debian 12: its QEMU (7.2) and Python (3.11) are the ones this was measured with
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Not needed to run Python from an unpacked root (they are what dpkg itself needs to install packages).
_PACKAGING_TOOLS = {"dpkg", "perl", "perl-base", "perl-modules-5.36", "libperl5.36", "tar", "install-info"}
_LAYOUT_VERSION = 2  # 2: the manifest lists every file and its size. Bump when the directory's layout changes, so an old cache is never read as a new one


def cache_root():
    """The mobilebert-kit cache directory: ``$MBK_CACHE_DIR``, else ``$XDG_CACHE_HOME/mobilebert-kit``, else
    ``~/.cache/mobilebert-kit``."""
    if os.environ.get("MBK_CACHE_DIR"):
        return Path(os.environ["MBK_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mobilebert-kit"


@dataclasses.dataclass(frozen=True)
class SysrootSpec:
    """What one emulated Python root is built from.

    Args:
        debian_arch (str): Debian's architecture name (``arm64``).
        python (str): the interpreter's package (``python3.11``); the root is it and its dependencies.
        wheels (tuple[str, ...]): ``name==version`` requirements of that architecture, unzipped into the root.
        wheel_platforms (tuple[str, ...]): ``pip download --platform`` tags to accept.
        qemu_package (str): the host-architecture package holding the emulator.
        qemu_binary (str): the emulator's file name in it.
        cpuinfo (dict[str, str]): ``{root name: /proc/cpuinfo text}``: one emulated root per CPU.
        extra_packages (tuple[str, ...]): more packages of the architecture (a runtime's C++ library).
    """

    debian_arch: str
    python: str
    wheels: tuple
    wheel_platforms: tuple
    qemu_package: str
    qemu_binary: str
    cpuinfo: dict
    extra_packages: tuple = ("libstdc++6",)  # every wheel's C++ extension links it; Python does not pull it in

    @property
    def key(self):
        """A short hash of everything the root is built from (its directory's name ends with it)."""
        text = json.dumps([_LAYOUT_VERSION, DEBIAN_SUITE, dataclasses.asdict(self)], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def name(self):
        return f"{self.debian_arch}-{self.key}"


@dataclasses.dataclass(frozen=True)
class Sysroot:
    """A built emulated root: the cache entry ``directory`` and the ``spec`` it was built from."""

    directory: Path
    spec: SysrootSpec

    @property
    def python(self):
        return self.directory / "sysroot" / "usr" / "bin" / self.spec.python

    @property
    def qemu(self):
        return self.directory / "qemu" / self.spec.qemu_binary

    def command(self, root, qemu_cpu, argv):
        """The command line that runs ``python -I argv...`` on emulated CPU ``qemu_cpu`` in root ``root``."""
        return [str(self.qemu), "-L", str(self.directory / "roots" / root), "-cpu", qemu_cpu,
                str(self.python), "-I", *map(str, argv)]


def sysroot_built(spec):
    """Whether the cache holds a finished root of ``spec`` (nothing is built or downloaded to find out)."""
    return (cache_root() / "emulation" / spec.name / "manifest.json").is_file()


def ensure_sysroot(spec, say=None):
    """The :class:`Sysroot` of ``spec``, built first if the cache has none (once, even under concurrent runs).

    Args:
        spec (SysrootSpec): what to build.
        say (callable | None): progress lines (what is fetched, how big, how long); default: stderr.

    Returns:
        Sysroot: complete (a half-built one is never returned).

    Raises:
        EmulationError: a tool is missing, a download or an unpack failed (one line, with the fix).
    """
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    parent = cache_root() / "emulation"
    final = parent / spec.name
    if (final / "manifest.json").is_file():
        return Sysroot(_checked(final, spec), spec)
    unwritable = "; set MBK_CACHE_DIR to a writable directory"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        lock = parent / f".{spec.name}.lock"
        lock.touch(exist_ok=True)
    except OSError as err:
        raise EmulationError(f"cannot write the emulation cache {parent}: {first_line(err)}{unwritable}") from err
    with _build_lock(lock, say):
        if (final / "manifest.json").is_file():  # built by the run we waited for
            return Sysroot(_checked(final, spec), spec)
        for leftover in parent.glob(f".{spec.name}.building-*"):  # we hold the lock: a killed build's
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.building-", dir=parent))
        except OSError as err:
            raise EmulationError(f"cannot write the emulation cache {parent}: {first_line(err)}{unwritable}") from err
        try:
            _build(spec, tmp, say)
            if final.exists():  # a directory without a manifest: not ours to trust, not a finished build
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Sysroot(final, spec)


def seal(entry, manifest):
    """Writes ``entry``'s manifest, last: the entry is complete. It lists every regular file and its size, so
    that a file lost or cut short later is found before the emulated runtime trips over it (:func:`_checked`)."""
    files = {}
    for folder, _, names in os.walk(entry):  # links (each CPU root's into the shared sysroot) are not followed
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                files[str(path.relative_to(entry))] = path.stat().st_size
    (entry / "manifest.json").write_text(json.dumps({**manifest, "files": files}, indent=2))


def _checked(entry, spec):
    """``entry``, once every file its manifest lists is there with its size and each CPU root of ``spec`` links to
    every top directory of ``sysroot/``; else an EmulationError naming the damage and the command that rebuilds it
    (it was blamed on the runtime, with no fix: a root without its ``usr`` link, as a copy that skips links
    leaves it, said ``libstdc++.so.6: cannot open shared object file ...; report it with the file``)."""
    rebuild = f"rebuild it: rm -rf {shlex.quote(str(entry))}, then run the command again (it builds the entry anew)"
    manifest = load_json(entry / "manifest.json", f"the manifest of the emulation cache entry {entry}", expect=dict,
                         error=EmulationError, fix=rebuild)
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise EmulationError(f"the emulation cache entry {entry} is damaged (its manifest lists no files); {rebuild}")
    for name, size in files.items():
        try:
            info = os.lstat(entry / name)
        except OSError:
            raise EmulationError(f"the emulation cache entry {entry} is damaged ({name} is missing); {rebuild}") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            raise EmulationError(f"the emulation cache entry {entry} is damaged ({name} has {info.st_size} bytes, "
                                 f"{size} when it was built); {rebuild}")
    for cpu in spec.cpuinfo:
        for top in (entry / "sysroot").iterdir():
            link = entry / "roots" / cpu / top.name
            if top.name != "proc" and not (link.is_symlink() and link.resolve() == top.resolve()):
                raise EmulationError(f"the emulation cache entry {entry} is damaged (roots/{cpu}/{top.name} is not "
                                     f"its link to sysroot/{top.name}); {rebuild}")
    return entry


@contextlib.contextmanager
def _build_lock(path, say):
    """Holds the build lock at ``path``, waiting (and saying so once) while another run builds."""
    fd = kernel_lock.hold(path)
    if fd is None:
        say(f"waiting for another run that is building the emulation cache ({path.parent}) ...")
        while fd is None:
            time.sleep(0.5)
            fd = kernel_lock.hold(path)
    try:
        yield
    finally:
        kernel_lock.release(fd)


def _build(spec, tmp, say):
    """Fetches and unpacks everything into ``tmp`` (the future cache entry)."""
    start = time.perf_counter()
    for tool in ("apt-get", "apt-cache", "dpkg"):
        if shutil.which(tool) is None:
            raise EmulationError(f"building the {spec.debian_arch} emulation cache needs {tool} (a Debian or "
                                 "Ubuntu host), and this machine has none; run on such a host")
    if not Path(DEBIAN_KEYRING).is_file():
        raise EmulationError(f"building the {spec.debian_arch} emulation cache needs Debian's archive keyring "
                             f"{DEBIAN_KEYRING}; install the debian-archive-keyring package")
    work = tmp / "work"
    host = _run(["dpkg", "--print-architecture"], "dpkg --print-architecture", "run on a Debian host").strip()
    apt = _private_apt(work, spec.debian_arch, host)
    mirror = _mirror()
    say(f"building the {spec.debian_arch} emulation cache once, into {tmp.parent / spec.name}: Debian "
        f"{DEBIAN_SUITE} {spec.python} ({spec.debian_arch}) from {mirror}, {spec.qemu_package}, and the wheels "
        f"{', '.join(spec.wheels)} ({spec.debian_arch})")
    # --error-on=any: apt-get update exits 0 when a source cannot be reached (a warning), and the root would be
    # built from the other sources' packages (measured: 9 of 36 came from the security archive alone).
    _run(apt + ["update", "--error-on=any"], "apt-get update of Debian's package lists", f"check the network and {mirror} "
         "(MBK_DEBIAN_MIRROR picks another mirror)")
    packages = _dependencies(apt, (spec.python, *spec.extra_packages))
    debs = work / "debs"
    debs.mkdir(parents=True)
    _run(apt + ["download", *packages, f"{spec.qemu_package}:{host}"], f"apt-get download of {len(packages) + 1} "
         "Debian packages", f"check the network and {mirror} (MBK_DEBIAN_MIRROR picks another mirror)", cwd=debs)
    say(f"  fetched {len(packages)} Debian {spec.debian_arch} packages and {spec.qemu_package} "
        f"({_megabytes(debs)} MB)")
    root = tmp / "sysroot"
    for deb in sorted(debs.glob("*.deb")):
        into = tmp / "qemu-package" if deb.name.startswith(f"{spec.qemu_package}_") else root
        _run(["dpkg", "-x", str(deb), str(into)], f"dpkg -x {deb.name}", "delete the cache entry and retry")
    (tmp / "qemu").mkdir()
    shutil.move(tmp / "qemu-package" / "usr" / "bin" / spec.qemu_binary, tmp / "qemu" / spec.qemu_binary)
    shutil.rmtree(tmp / "qemu-package")
    wheels = work / "wheels"
    platforms = [arg for tag in spec.wheel_platforms for arg in ("--platform", tag)]
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *platforms,
          "--python-version", spec.python.removeprefix("python"), "--implementation", "cp", "-d", str(wheels),
          *spec.wheels], f"pip download of the {spec.debian_arch} wheels {', '.join(spec.wheels)}",
         "check the network and the package index (PIP_INDEX_URL), and that these versions publish "
         f"{spec.debian_arch} wheels")
    say(f"  fetched the wheels ({_megabytes(wheels)} MB)")
    site = root / "usr" / "lib" / "python3" / "dist-packages"  # on a Debian Python's sys.path
    site.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(wheels.glob("*.whl")):
        _run([sys.executable, "-m", "zipfile", "-e", str(wheel), str(site)], f"unzip {wheel.name}",
             "delete the cache entry and retry")
    for name, text in spec.cpuinfo.items():
        cpu_root = tmp / "roots" / name
        (cpu_root / "proc").mkdir(parents=True)
        for entry in root.iterdir():
            if entry.name != "proc":
                (cpu_root / entry.name).symlink_to(Path("..", "..", "sysroot", entry.name))
        (cpu_root / "proc" / "cpuinfo").write_text(text)
    shutil.rmtree(work)
    seconds = time.perf_counter() - start
    manifest = {"spec": dataclasses.asdict(spec), "packages": sorted(packages), "mirror": mirror,
                "built_seconds": round(seconds, 1), "layout": _LAYOUT_VERSION}
    seal(tmp, manifest)  # last: the entry is complete
    say(f"  built in {seconds:.0f} s ({_megabytes(tmp)} MB)")


def _private_apt(work, debian_arch, host_arch):
    """``apt-get`` with a private state, cache and source list: nothing of the host's apt or dpkg is touched."""
    state, cache, sources, empty = work / "apt-state", work / "apt-cache", work / "apt-sources", work / "apt-empty"
    for directory in (state / "lists" / "partial", cache / "archives" / "partial", sources, empty):
        directory.mkdir(parents=True)
    (sources / "debian.sources").write_text(
        f"Types: deb\nURIs: {_mirror()}\nSuites: {DEBIAN_SUITE} {DEBIAN_SUITE}-updates\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n\n"
        f"Types: deb\nURIs: {DEBIAN_SECURITY}\nSuites: {DEBIAN_SUITE}-security\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n")
    options = {
        "Dir::State": state, "Dir::State::status": "/dev/null", "Dir::Cache": cache,
        "Dir::Etc::SourceList": "/dev/null", "Dir::Etc::SourceParts": sources, "Dir::Etc::Preferences": "/dev/null",
        "Dir::Etc::PreferencesParts": empty,
        # The foreign architecture is apt's native one here, so dependencies resolve to its packages; the
        # host's is listed too, for the emulator's own package.
        "APT::Architecture": debian_arch, "APT::Architectures::": debian_arch,
        "Debug::NoLocking": "1",  # the private state has nobody to lock out; the host's lock is not ours
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else os.environ.get("USER", ""),
        "Acquire::Retries": "2",
    }
    return ["apt-get", "-q", *(arg for key, value in options.items() for arg in ("-o", f"{key}={value}")),
            "-o", f"APT::Architectures::={host_arch}"]


def _dependencies(apt, roots):
    """The packages ``roots`` need (recursively, without recommends), less dpkg's own tools."""
    cache = [a if a != "apt-get" else "apt-cache" for a in apt if a != "-q"]
    # Dependencies of the host's architecture ("dpkg:amd64", through Multi-Arch: foreign) are not the root's.
    out = _run(cache + ["depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks",
                        "--no-replaces", "--no-enhances", "--no-pre-depends", *roots],
               "apt-cache depends", "delete the cache entry and retry")
    names = {line.strip() for line in out.splitlines() if line and not line.startswith((" ", "<"))}
    return sorted(n for n in names if ":" not in n and n not in _PACKAGING_TOOLS)


def _run(command, what, fix, cwd=None):
    """Runs a build step; its failure is one EmulationError line naming the step, its last words and the fix."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EmulationError(f"building the emulation cache: {what} failed ({first_line(err)}); {fix}") from err
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stdout + "\n" + done.stderr).splitlines()
                 if ln.strip() and not ln.startswith(("WARNING: Location", "W: Download is performed"))]
        # apt's first "E:" names the URL and the socket error; its last only says that indexes failed.
        cause = next((ln for ln in lines if ln.startswith(("E:", "ERROR:"))), lines[-1] if lines else "")
        raise EmulationError(f"building the emulation cache: {what} failed ({cause or f'exit {done.returncode}'}); {fix}")
    return done.stdout


def _mirror():
    return os.environ.get("MBK_DEBIAN_MIRROR") or DEBIAN_MIRROR


def _megabytes(directory):
    return round(sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file() and not p.is_symlink()) / 1e6)
