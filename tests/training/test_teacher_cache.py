"""The teacher cache: its build (resumable, hostile states), its lookup and the decision (a cached run: test_distiller)."""

import errno
import json
import os

import numpy as np
import pytest

ROWS, SEQ, HIDDEN, HEADS = 10, 5, 4, 2


def _data(rows=ROWS, batch=4):
    """Batches of distinct rows, as the unshuffled pass over the data gives them."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 500, size=(rows, SEQ)).astype(np.int32)
    ids[:, 0] = np.arange(rows)  # every row distinct
    mask = np.ones((rows, SEQ), np.int32)
    mask[::3, -2:] = 0
    data = {"input_ids": ids, "token_type_ids": np.zeros((rows, SEQ), np.int32), "attention_mask": mask}
    return [{k: v[i:i + batch] for k, v in data.items()} for i in range(0, rows, batch)]


def _outputs(layers):
    """A stand-in teacher: outputs that are a fixed function of each row's inputs."""
    def outputs(inputs):
        ids = np.asarray(inputs["input_ids"], np.float32)
        hidden = [np.sin(ids[:, :, None] * (l + 1) + np.arange(HIDDEN)) for l in layers]
        attention = [np.cos(ids[:, None, :, None] + ids[:, None, None, :] * (l + 1) + np.arange(HEADS)[None, :, None, None])
                     for l in layers]
        as32 = lambda arrays: [a.astype(np.float32) for a in arrays]  # noqa: E731
        return {"hidden_states": as32(hidden), "attention_probs": as32(attention)}
    return outputs


def _batches(data, stop_after=None):
    def batches(skip):
        for n, batch in enumerate(data[skip:]):
            if stop_after is not None and n == stop_after:
                raise KeyboardInterrupt  # the build is killed here
            yield batch
    return batches


def _build(directory, layers=(0, 2), data=None, stop_after=None, identity=None, progress=None):
    from mobilebert_kit.training.teacher_cache import TeacherCache

    data = data or _data()
    return TeacherCache.build(directory, _outputs(layers), _batches(data, stop_after), ROWS, layers,
                              identity or {"teacher": "t", "data": "d"}, progress)


def _assert_exact(cache, layers=(0, 2)):
    from mobilebert_kit.training.teacher_cache import attention_key, hidden_key

    data = _data()
    batch = {k: np.concatenate([b[k] for b in data])[::-1] for k in data[0]}  # another order than the build's
    attached = cache.attach(batch, layers)
    expected = _outputs(layers)(batch)
    for i, layer in enumerate(layers):
        np.testing.assert_array_equal(attached[hidden_key(layer)], expected["hidden_states"][i])
        np.testing.assert_array_equal(attached[attention_key(layer)], expected["attention_probs"][i])


def test_build_is_exact_in_any_row_order_and_resumes_after_a_kill(tmp_path, monkeypatch):
    from mobilebert_kit.training import teacher_cache

    monkeypatch.setattr(teacher_cache, "FLUSH_EVERY", 1)  # a progress record after every batch
    directory = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        _build(directory, stop_after=2)
    meta = json.loads((directory / "cache.json").read_text())
    assert not meta["complete"] and meta["rows_done"] <= 8
    seen = []
    cache = _build(directory, progress=seen.append)
    assert seen[-1] == ROWS and seen[0] > 4  # resumed: the first report counts the rows already built
    assert cache.meta["rows"] == ROWS and (directory / "hidden_2.bin").stat().st_size == ROWS * SEQ * HIDDEN * 4
    _assert_exact(cache)
    # Complete: built again, it is read back, not recomputed.
    assert _build(directory, stop_after=0).meta["rows"] == ROWS


@pytest.mark.parametrize("damage", ["deep json", "wrong types", "cut file", "other teacher", "symlink", "fifo",
                                    "fifo data file"])
def test_a_damaged_or_foreign_cache_is_rebuilt(tmp_path, damage):
    directory = tmp_path / "cache"
    _build(directory)
    meta_file = directory / "cache.json"
    if damage == "deep json":
        meta_file.write_text("[" * 100000 + "]" * 100000)
    elif damage == "wrong types":
        meta = json.loads(meta_file.read_text())
        meta_file.write_text(json.dumps(dict(meta, rows="10", layers=[0, -1])))
    elif damage == "cut file":
        with open(directory / "attention_0.bin", "r+b") as f:
            f.truncate(100)
    elif damage == "fifo":  # a special file where the record was: never opened (it would block)
        meta_file.unlink()
        os.mkfifo(meta_file)
    elif damage == "fifo data file":  # the build would append to it and block
        (directory / "keys.bin").unlink()
        os.mkfifo(directory / "keys.bin")
    elif damage == "symlink":
        elsewhere = tmp_path / "users_own"
        directory.rename(elsewhere)
        directory.symlink_to(elsewhere)
    identity = {"teacher": "another", "data": "d"} if damage == "other teacher" else None
    cache = _build(directory, identity=identity)
    _assert_exact(cache)
    assert not directory.is_symlink()
    if damage == "symlink":  # the link is replaced, never written through
        assert (tmp_path / "users_own" / "cache.json").is_file()


def test_a_fifo_in_a_cache_that_has_no_row_yet_is_not_appended_to(tmp_path):
    # No row flushed: no file is "short", so only the special-file check stands between the build and an
    # append to the FIFO, which blocks until a reader comes (the alarm turns a hang into a failure).
    import signal

    directory = tmp_path / "cache"
    _build(directory)
    meta_file = directory / "cache.json"
    meta_file.write_text(json.dumps(dict(json.loads(meta_file.read_text()), rows_done=0, batches_done=0,
                                         complete=False)))
    (directory / "keys.bin").unlink()
    os.mkfifo(directory / "keys.bin")

    def hung(*_):
        raise TimeoutError("the build blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        cache = _build(directory)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    _assert_exact(cache)
    assert (directory / "keys.bin").is_file()


def test_a_row_not_in_the_cache_and_a_full_disk_are_one_line_errors(tmp_path, monkeypatch):
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training import teacher_cache

    cache = _build(tmp_path / "cache")
    stranger = {k: np.asarray(v) for k, v in _data()[0].items()}
    stranger["input_ids"] = stranger["input_ids"] + 1
    with pytest.raises(MbkError, match="not in the teacher cache .* --teacher-cache off") as err:
        cache.attach(stranger, (0,))
    assert "\n" not in str(err.value)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def denied(*args, **kwargs):  # a read-only directory (chmod does not stop root, who runs CI here)
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    with monkeypatch.context() as patch:
        patch.setattr(teacher_cache, "open", denied, raising=False)
        with pytest.raises(MbkError, match=f"Permission denied.*make {tmp_path} writable or run with") as err:
            _build(tmp_path / "denied")
    assert "\n" not in str(err.value) and not (tmp_path / "denied").exists()

    monkeypatch.setattr(teacher_cache.os, "fsync", full)
    with pytest.raises(MbkError, match="cannot write the teacher cache .*No space left.*removed.*--teacher-cache off") \
            as err:
        _build(tmp_path / "full")
    assert "\n" not in str(err.value) and not (tmp_path / "full").exists()


def test_the_cache_is_built_where_it_pays_and_fits():
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.stages import Stage
    from mobilebert_kit.training.teacher_cache import cache_bytes, decide

    progressive = [Stage(f"layer_{l}", "layer_transfer", 100, (l,)) for l in range(4)]
    # Live, stage l runs the teacher's layers 0..l on 100 x 8 rows: 8,000 layer-rows. Building runs
    # 4 layers on every row: 1,000 rows is 4,000 layer-rows, the teacher's work needed 2.0x over.
    assert decide("auto", progressive, 1000, 8, 10**6, 10**9)[0]
    use, why = decide("auto", progressive, 10000, 8, 10**6, 10**9)
    assert not use and "0.2x" in why and "--teacher-cache on" in why
    use, why = decide("auto", progressive, 1000, 8, 10**9, 10**9)
    assert not use and "half" in why
    assert decide("on", progressive, 1000, 8, 10**6, 10**9)[0]
    assert decide("off", progressive, 100, 8, 1, 10**9) == (False, "off")
    assert not decide("auto", [], 100, 8, 1, 10**9)[0]
    with pytest.raises(ConfigError, match="needs .* GiB .* free .*--teacher-cache off"):
        decide("on", progressive, 100, 8, 10**9, 10**8)
    assert cache_bytes(2, 3, 4, 5, (0, 1)) == 2 * (16 + 4 * 2 * (3 * 4 + 5 * 9))
    with pytest.raises(ConfigError, match="unknown teacher_cache 'yes'"):
        DistillConfig(teacher_cache="yes")
