"""Clusters and masks from sysfs readings and device profiles; throttling flags."""

import glob
import json
import os

import pytest

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.thermal import throttle_reasons, trial_thermal
from mobilebert_kit.profiler.topology import CpuTopology

from sim_device import REPO

PROFILES = sorted(glob.glob(os.path.join(REPO, "android_bench", "devices", "*.json")))


def test_six_pixel_profiles_are_present():
    names = [json.load(open(p))["name"] for p in PROFILES]
    assert names == ["Pixel 3", "Pixel 4", "Pixel 5", "Pixel 6", "Pixel 7", "Pixel 8"]


@pytest.mark.parametrize("path", PROFILES, ids=os.path.basename)
def test_profile_masks_follow_from_the_core_layout(path):
    profile = json.load(open(path))
    topology = CpuTopology.from_profile(profile)
    assert {name: topology.mask(name)[0] for name in profile["masks"]} == profile["masks"]
    assert [c["name"] for c in topology.clusters] == [c["name"] for c in profile["clusters"]]


# What bench_loop.sh prints on a Pixel-4-like phone (cpu_capacity present, one core offline).
PIXEL4_LINES = """cpu 0 1785600 261 1
cpu 1 1785600 261 1
cpu 2 1785600 261 1
cpu 3 1785600 261 0
cpu 4 2419200 871 1
cpu 5 2419200 871 1
cpu 6 2419200 871 1
cpu 7 2841600 1024 1
garbage line
"""


def test_sysfs_lines_give_clusters_and_masks():
    topology = CpuTopology.from_sysfs_lines(PIXEL4_LINES)
    assert [(c["name"], c["cpus"]) for c in topology.clusters] == [("little", [0, 1, 2]), ("mid", [4, 5, 6]), ("prime", [7])]
    assert topology.mask("big") == ("f0", [4, 5, 6, 7])
    assert topology.mask("prime") == ("80", [7])
    assert topology.mask("little") == ("7", [0, 1, 2])
    assert topology.mask("0x30") == ("30", [4, 5])
    assert topology.mask("all")[0] == "f7"


def test_capacity_missing_groups_by_frequency():
    lines = "cpu 0 1766400 - 1\ncpu 1 1766400 - 1\ncpu 2 2803200 - 1\ncpu 3 2803200 - 1\n"
    topology = CpuTopology.from_sysfs_lines(lines)
    assert topology.mask("big") == ("c", [2, 3]) and topology.mask("prime") == ("c", [2, 3])


def test_one_cluster_hosts():
    topology = CpuTopology([{"cpu": 0}, {"cpu": 1}])
    assert topology.mask("big") == topology.mask("little") == topology.mask("all") == ("3", [0, 1])


@pytest.mark.parametrize(
    "selection, error, message",
    [
        ("medium", ConfigError, "valid values: 'big', 'little', 'prime', 'all'"),
        ("0x100", ProfilerError, r"names cores \[8\] that are offline or absent"),
        ("8", ProfilerError, r"names cores \[3\]"),
        ("0", ProfilerError, "selects no core"),
    ],
)
def test_bad_core_selections(selection, error, message):
    topology = CpuTopology.from_sysfs_lines(PIXEL4_LINES)
    with pytest.raises(error, match=message):
        topology.mask(selection)


def test_unreadable_sysfs_is_an_error():
    with pytest.raises(ProfilerError, match="could not read the CPU topology"):
        CpuTopology.from_sysfs_lines("sh: /sys/devices/system/cpu: Permission denied\n")


def test_host_topology_reads_this_machine():
    topology = CpuTopology.from_host()
    assert topology.online_cpus == sorted(os.sched_getaffinity(0))


def _snap(cap, temp=40000):
    return {"max_mc": temp, "zones": {"thermal_zone0:cpu": temp}, "cpus": {"4": {"cur": cap, "max": 2803200, "cap": cap}, "0": {"cur": 1000, "max": 1766400, "cap": 1000}}}


def test_throttling_is_a_capped_pinned_core():
    assert throttle_reasons(_snap(2803200), _snap(2803200), [4]) == []
    assert throttle_reasons(_snap(2803200), _snap(1996800), [4]) == ["cpu4 capped at 1996 MHz of 2803 MHz after the trial"]
    # A capped core the trial did not use does not count.
    assert throttle_reasons(_snap(2803200), _snap(2803200), [4]) == [] and throttle_reasons(_snap(2803200), _snap(2803200), [0]) != []


def test_trial_thermal_fields():
    record = {"cooldown_s": 12, "cooldown_timed_out": False, "baseline_mc": 35000, "before": _snap(2803200, 36000), "after": _snap(1996800, 61500)}
    fields = trial_thermal(record, [4])
    assert fields["temp_rise_c"] == 25.5 and fields["throttled"] and fields["cooldown_s"] == 12 and fields["baseline_c"] == 35.0


def test_shipped_profiles_pass_their_own_check():
    from mobilebert_kit.profiler.device import device_profiles

    assert sorted(device_profiles()) == ["Pixel 3", "Pixel 4", "Pixel 5", "Pixel 6", "Pixel 7", "Pixel 8"]


def _pixel6():
    return json.load(open(os.path.join(REPO, "android_bench", "devices", "pixel6.json")))


def _with(path, value):
    profile = _pixel6()
    *parents, last = path
    target = profile
    for key in parents:
        target = target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return json.dumps(profile)


# A profile a user adds with MBK_ANDROID_BENCH_DIR (say for a phone we do not ship) is input like any other.
@pytest.mark.parametrize("text, fragment", [
    ("[" * 100000 + "]" * 100000, "nests too deeply"),
    ("[1]", "JSON object"),
    ("{", "not valid JSON"),
    (_with(["name"], 5), "name must be"),
    (_with(["name"], KeyError), "name must be"),
    (_with(["codenames"], "oriole"), "codenames must be a list of strings"),
    (_with(["model_names"], [1]), "model_names must be a list of strings"),
    (_with(["clusters"], []), "clusters must be a list of 1 to 64 objects"),
    (_with(["clusters"], [5]), "clusters must be a list of 1 to 64 objects"),
    (_with(["clusters", 0, "cpus"], ["0"]), "clusters[0].cpus must be"),
    (_with(["clusters", 1, "cpus"], [True]), "clusters[1].cpus must be"),
    (_with(["clusters", 0, "cpus"], [10**12]), "clusters[0].cpus must be"),
    (_with(["clusters", 2, "max_freq_khz"], float("nan")), "clusters[2].max_freq_khz must be"),
    (_with(["clusters", 2, "max_freq_khz"], 2.8), "clusters[2].max_freq_khz must be"),
    (_with(["clusters", 0, "capacity"], -1), "clusters[0].capacity must be"),
])
def test_a_users_device_profile_is_checked_field_by_field(tmp_path, monkeypatch, text, fragment):
    from mobilebert_kit.profiler.device import device_profiles, match_profile

    (tmp_path / "devices").mkdir()
    path = tmp_path / "devices" / "mine.json"
    path.write_text(text)
    monkeypatch.setenv("MBK_ANDROID_BENCH_DIR", str(tmp_path))
    for read in (device_profiles, lambda: match_profile({"ro.product.device": "oriole"})):
        with pytest.raises(ProfilerError) as err:
            read()
        message = str(err.value)
        assert fragment in message and str(path) in message and "\n" not in message, message


def test_a_special_file_in_place_of_a_device_profile_is_not_opened(tmp_path, monkeypatch):
    from mobilebert_kit.profiler.device import device_profiles

    (tmp_path / "devices").mkdir()
    os.mkfifo(tmp_path / "devices" / "pipe.json")  # opening a FIFO for reading would block forever
    monkeypatch.setenv("MBK_ANDROID_BENCH_DIR", str(tmp_path))
    with pytest.raises(ProfilerError, match="pipe.json"):
        device_profiles()
