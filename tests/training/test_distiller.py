"""The distillation loop: stage schedule, resume after SIGINT/SIGKILL, replicas, precision, errors."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO, saved_weights
from tests.training.distill_script import resume_config, run


def _script(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tests.training.distill_script", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _quiet():
    import os

    from rich.console import Console

    return Console(file=open(os.devnull, "w"))


@pytest.fixture(scope="module")
def uninterrupted(tiny_run_inputs, tmp_path_factory):
    """One uninterrupted run, with a weight snapshot at the end of every stage."""
    from mobilebert_kit.models.api import named_weights
    from mobilebert_kit.training.distiller import Distiller

    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    snapshots = {}

    def snapshot(distiller):
        return {p: v.numpy().copy() for p, v in named_weights(distiller.student).items()}

    def on_setup_end(distiller):  # the weights before the first step
        snapshots["initial"] = snapshot(distiller)

    def on_step_end(stage, step, global_step, metrics):
        if step == 3:
            snapshots[stage] = snapshot(distiller)

    distiller = Distiller(str(tiny_run_inputs / "teacher"), str(tiny_run_inputs / "student"),
                          str(tiny_run_inputs / "data"), out, resume_config(), console=_quiet(),
                          on_step_end=on_step_end, on_setup_end=on_setup_end)
    result = distiller.run()
    return {"out": out, "result": result, "snapshots": snapshots, "copy": distiller.copy_report,
            "inputs": tiny_run_inputs}


def _changed(before, after, prefix):
    keys = [k for k in before if k.startswith(prefix)]
    assert keys, prefix
    return [k for k in keys if not np.array_equal(before[k], after[k])]


def test_progressive_stages_train_one_layer_each(uninterrupted):
    snaps = uninterrupted["snapshots"]
    init, l0, l1 = snaps["initial"], snaps["layer_0"], snaps["layer_1"]
    # Copied from the teacher (MLM transform, NSP); norms are not (LayerNorm vs NoNorm).
    copied = uninterrupted["copy"]["copied"]
    assert "mlm/transform/kernel" in copied and "nsp/kernel" in copied
    assert "encoder/embeddings/word_embeddings" in copied
    assert "encoder/embeddings/norm/gamma" in uninterrupted["copy"]["skipped"]
    assert not uninterrupted["copy"]["embeddings_complete"]
    # Stage layer_0: block 0 and the (not fully copied) embeddings train; block 1 and heads do not.
    assert _changed(init, l0, "encoder/transformer_layer_0/")
    assert _changed(init, l0, "encoder/embeddings/")
    assert not _changed(init, l0, "encoder/transformer_layer_1/")
    assert not _changed(init, l0, "mlm/") and not _changed(init, l0, "nsp/")
    # Stage layer_1: only block 1; the lower layer and embeddings are frozen (multiplier 0).
    assert _changed(l0, l1, "encoder/transformer_layer_1/")
    assert not _changed(l0, l1, "encoder/transformer_layer_0/")
    assert not _changed(l0, l1, "encoder/embeddings/")
    history = uninterrupted["result"]["history"]
    assert [h["stage"] for h in history] == ["layer_0", "layer_1"]
    assert set(history[0]["final"]) == {"loss", "feature_map", "mean", "variance", "attention"}


def test_softened_schedule_tunes_lower_layers():
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.stages import plan_stages, stage_variables

    config = DistillConfig(layer_steps=10, pd_steps=5, lower_layer_lr_multiplier=0.1)
    stages = plan_stages(config, 3, embeddings_from_teacher=True)
    assert [s.name for s in stages] == ["layer_0", "layer_1", "layer_2", "pretraining_distillation"]
    assert stages[2].train == ("transformer_layer_2",)
    assert stages[2].tune == ("embeddings", "transformer_layer_0", "transformer_layer_1")
    named = {"encoder/embeddings/w": 0, "encoder/transformer_layer_0/k": 1, "encoder/transformer_layer_2/k": 2,
             "mlm/b": 3}
    trained, tuned = stage_variables(stages[2], named)
    assert [p for p, _ in trained] == ["encoder/transformer_layer_2/k"]
    assert [p for p, _ in tuned] == ["encoder/embeddings/w", "encoder/transformer_layer_0/k"]
    assert len(stage_variables(stages[3], named)[0]) == 4
    (e2e,) = plan_stages(DistillConfig(schedule="end_to_end", layer_steps=10), 3, embeddings_from_teacher=False)
    assert e2e.steps == 30 and e2e.layers == (0, 1, 2) and "embeddings" in e2e.train


def test_outputs_and_tensorboard(uninterrupted):
    import mobilebert_kit as mbk
    from mobilebert_kit.training.summaries import read_scalars

    out = uninterrupted["out"]
    student = mbk.load(out / "student")
    assert student.config["num_layers"] == 2 and not student.config["output_hidden_states"]
    assert mbk.load(out / "pretrainer").architecture == "pretrainer"
    assert (out / "student" / "vocab.txt").read_text() == (uninterrupted["inputs"] / "teacher" / "vocab.txt").read_text()
    from mobilebert_kit.sources.pooling import Pooling, read_pooling

    assert read_pooling(out / "student") == Pooling("cls", True)  # the teacher's sentence pooling, declared again
    scalars = read_scalars(out / "tensorboard")
    assert [s for s, _ in scalars["layer_0/feature_map"]] == [1, 2, 3]
    assert [s for s, _ in scalars["layer_1/attention"]] == [4, 5, 6]
    assert len(scalars["learning_rate"]) == 6
    assert json.loads((out / "progress.json").read_text())["complete"]


def test_resume_after_sigint_and_sigkill_matches_uninterrupted(uninterrupted, tiny_run_inputs, tmp_path):
    import os
    import signal

    out = tmp_path / "run"

    def interrupt_at_2(stage, step, global_step, metrics):
        if global_step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    # SIGINT after global step 2 (inside layer_0): the step is finished, checkpointed, and the run stops.
    with pytest.raises(KeyboardInterrupt):
        run(tiny_run_inputs, out, on_step_end=interrupt_at_2)
    progress = json.loads((out / "progress.json").read_text())
    assert (progress["stage_name"], progress["stage_step"], progress["global_step"]) == ("layer_0", 2, 2)
    # Resume in a fresh process, SIGKILL after global step 5 (layer_1; last checkpoint at step 4).
    killed = _script(tiny_run_inputs, out, "resume", "KILL", 5)
    assert killed.returncode == -9, killed.stderr
    progress = json.loads((out / "progress.json").read_text())
    assert (progress["stage_name"], progress["stage_step"], progress["global_step"]) == ("layer_1", 1, 4)
    assert not (out / "student").exists()
    # Given as a model (`mbk finetune --model OUT`, `mbk export OUT`), it said only "not a checkpoint".
    from mobilebert_kit.checkpoints.importer import checkpoint_format
    from mobilebert_kit.errors import CheckpointError

    with pytest.raises(CheckpointError, match=f"{out} holds an unfinished distillation run, not a model yet; finish "
                                              f"it with `mbk distill --out {out} --resume`, then use {out}/student"):
        checkpoint_format(out)
    # Resume to the end: the same weights as the run that was never interrupted.
    run(tiny_run_inputs, out, resume=True)
    assert checkpoint_format(out) == ("saved", out / "student")  # the distilled encoder the docs fine-tune
    resumed, reference = saved_weights(out / "pretrainer"), saved_weights(uninterrupted["out"] / "pretrainer")
    assert set(resumed) == set(reference)
    for name in reference:
        np.testing.assert_allclose(resumed[name], reference[name], rtol=1e-5, atol=1e-6, err_msg=name)
    history = json.loads((out / "progress.json").read_text())["history"]
    assert [h["stage"] for h in history] == ["layer_0", "layer_1"]


@pytest.mark.parametrize("stop_at, stopped", [(2, "interrupted at step 2 of layer_0"), (3, "interrupted after layer_0")])
def test_overwrite_of_a_user_s_directory_puts_it_back_when_stopped_and_replaces_it_when_done(
        uninterrupted, tiny_run_inputs, tmp_path, stop_at, stopped):
    # The run deleted the directory when it started: stopped, it left neither the user's files nor an output.
    # Stopped on a stage's last step (3 of layer_0), it said so and trained on into the next stage.
    import os
    import signal

    from rich.console import Console

    from mobilebert_kit.training.distiller import Distiller

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")

    def interrupt_at_2(stage, step, global_step, metrics):
        if global_step == stop_at:
            os.kill(os.getpid(), signal.SIGINT)

    text = open(tmp_path / "console.txt", "w")
    distiller = Distiller(str(tiny_run_inputs / "teacher"), str(tiny_run_inputs / "student"),
                          str(tiny_run_inputs / "data"), mine, resume_config(), console=Console(file=text, width=400),
                          on_step_end=interrupt_at_2)
    with pytest.raises(KeyboardInterrupt):
        distiller.run(overwrite=True)
    text.close()
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir() if p.name != "console.txt"] == ["mine"]  # nothing set aside is left
    said = (tmp_path / "console.txt").read_text()
    assert f"{stopped}; {mine} is put back as it was and nothing was kept" in said, said
    assert said.count("interrupted") == 1, said  # it stopped there, not a step into the next stage
    # Run through, the finished run replaces the directory; nothing is left beside it.
    Distiller(str(tiny_run_inputs / "teacher"), str(tiny_run_inputs / "student"), str(tiny_run_inputs / "data"), mine,
              resume_config(), console=_quiet()).run(overwrite=True)
    assert not (mine / "notes.txt").exists() and (mine / "student").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "console.txt") == ["mine"]


def test_a_truncated_newest_checkpoint_resumes_from_the_one_before(uninterrupted, tiny_run_inputs, tmp_path):
    import io
    import os
    import signal

    from rich.console import Console

    from mobilebert_kit.training.distiller import Distiller

    out = tmp_path / "run"

    def interrupt_at_5(stage, step, global_step, metrics):
        if global_step == 5:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):  # checkpoints of steps 3 (stage boundary), 4 and 5
        run(tiny_run_inputs, out, on_step_end=interrupt_at_5)
    data = next((out / "checkpoints").glob("ckpt-5.data-*"))
    data.write_bytes(data.read_bytes()[:200])  # a crash mid-write, a bad disk block
    text = io.StringIO()
    Distiller(str(tiny_run_inputs / "teacher"), str(tiny_run_inputs / "student"), str(tiny_run_inputs / "data"), out,
              resume_config(), console=Console(file=text, width=400)).run(resume=True)
    assert "checkpoint ckpt-5" in text.getvalue() and "resuming at layer_1, step 1" in text.getvalue()
    resumed, reference = saved_weights(out / "pretrainer"), saved_weights(uninterrupted["out"] / "pretrainer")
    for name in reference:
        np.testing.assert_allclose(resumed[name], reference[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_cached_run_interrupted_and_resumed_never_runs_the_teacher_and_matches_the_live_run(
        uninterrupted, tiny_run_inputs, tmp_path):
    """The live-teacher run is ``uninterrupted`` (its stages read too little data for ``auto`` to cache)."""
    import os
    import signal
    from dataclasses import replace

    from mobilebert_kit.training.distiller import Distiller

    config = replace(resume_config(), teacher_cache="on")
    out = tmp_path / "run"
    seen = {}

    def interrupt_at_2(stage, step, global_step, metrics):
        seen.setdefault("meta", json.loads((out / "teacher_cache" / "cache.json").read_text()))
        if global_step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        run(tiny_run_inputs, out, on_step_end=interrupt_at_2, config=config)
    assert seen["meta"]["complete"] and seen["meta"]["layers"] == [0, 1]

    # The resumed run's teacher is zeroed once built: its steps can only read the cache the first run left.
    def zero_teacher(distiller):
        for variable in distiller.teacher_encoder.weights:
            variable.assign(np.zeros(variable.shape, variable.dtype.as_numpy_dtype))

    Distiller(str(tiny_run_inputs / "teacher"), str(tiny_run_inputs / "student"), str(tiny_run_inputs / "data"),
              out, config, console=_quiet(), on_setup_end=zero_teacher).run(resume=True)
    resumed, reference = saved_weights(out / "pretrainer"), saved_weights(uninterrupted["out"] / "pretrainer")
    assert set(resumed) == set(reference)
    for name in reference:
        np.testing.assert_allclose(resumed[name], reference[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert not (out / "teacher_cache").exists()  # removed once the layer-transfer stages are done


def test_mirrored_strategy_over_two_cpus_matches_one_device(tiny_run_inputs, tmp_path):
    proc = _script(tiny_run_inputs, tmp_path, "replicas")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["mirrored"]["replicas"] == 2
    one, two = result["default"]["losses"], result["mirrored"]["losses"]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert set(a) == set(b)
        for key in a:  # global normalisation: the replicas' shares add up to the one-device loss
            assert b[key] == pytest.approx(a[key], rel=2e-4, abs=1e-6), key
    w1, w2 = saved_weights(tmp_path / "default" / "pretrainer"), saved_weights(tmp_path / "mirrored" / "pretrainer")
    for name in w1:
        np.testing.assert_allclose(w2[name], w1[name], rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_mixed_bfloat16_runs(tiny_run_inputs, tmp_path):
    from mobilebert_kit.training.distill_config import DistillConfig

    losses = []
    config = DistillConfig(schedule="end_to_end", layer_steps=1, batch_size=4, log_every=1, precision="mixed_bfloat16")
    run(tiny_run_inputs, tmp_path / "run", config=config, on_step_end=lambda *a: losses.append(a[3]))
    assert len(losses) == 2 and all(np.isfinite(v) for m in losses for v in m.values())


def test_float16_teacher_without_mlm_head_skips_kd_and_pd_trains_everything(tiny_run_inputs, tmp_path):
    from mobilebert_kit.backend import keras
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller

    metrics = []
    config = DistillConfig(schedule="none", pd_steps=6, batch_size=4, log_every=1, copy_from_teacher=False,
                           precision="mixed_float16")
    distiller = Distiller(str(tiny_run_inputs / "teacher_encoder"), str(tiny_run_inputs / "student"),
                          str(tiny_run_inputs / "data"), tmp_path / "run", config, console=_quiet(),
                          on_step_end=lambda *a: metrics.append(a[3]))
    distiller.run()
    assert distiller.student_encoder.get_layer("embeddings").compute_dtype == "float16"
    assert set(metrics[0]) == {"loss", "mlm", "nsp", "loss_scale"}
    assert all(np.isfinite(v) for m in metrics for v in m.values())
    assert metrics[0]["loss"] == pytest.approx(metrics[0]["mlm"] + metrics[0]["nsp"], rel=1e-5)
    # Dynamic loss scaling: starts at 2^15 and halves on every overflowing step.
    scales = [m["loss_scale"] for m in metrics]
    assert scales[0] <= 2.0**15 and all(np.log2(s) == int(np.log2(s)) for s in scales)
    assert keras.mixed_precision.global_policy().name == "float32"  # restored after building
    # Every part of the student trains in pre-training distillation (a few NoNorm gammas of the
    # q/k bottleneck get updates below float32 resolution at initialisation, hence "most").
    before, after = saved_weights(tiny_run_inputs / "student"), saved_weights(tmp_path / "run" / "student")
    changed = [k for k in before if not np.array_equal(before[k], after[k])]
    assert len(changed) > 0.9 * len(before)
    for scope in ("embeddings/", "transformer_layer_0/", "transformer_layer_1/"):
        assert any(k.startswith(scope) for k in changed), scope
    heads_before = saved_weights(tmp_path / "run" / "pretrainer")
    assert any(k.startswith("mlm/") for k in heads_before) and any(k.startswith("nsp/") for k in heads_before)


def test_errors_name_the_problem(tiny_run_inputs, uninterrupted, tmp_path):
    from mobilebert_kit.errors import ConfigError, MbkError
    from mobilebert_kit.training.distill_config import DistillConfig

    with pytest.raises(MbkError, match="already holds a distillation run; pass --resume"):
        run(tiny_run_inputs, uninterrupted["out"])
    with pytest.raises(MbkError, match="different layer_steps"):
        run(tiny_run_inputs, uninterrupted["out"], resume=True, config=DistillConfig(layer_steps=5, pd_steps=3))
    with pytest.raises(MbkError, match="nothing to resume"):
        run(tiny_run_inputs, tmp_path / "empty", resume=True)
    with pytest.raises(ConfigError, match=r"feature-map size \(hidden_size\): teacher 64, student 32"):
        from mobilebert_kit.training.teacher_student import check_compatible
        import mobilebert_kit as mbk

        check_compatible(mbk.build("tiny-ib-bert").config, mbk.build("tiny-bert").config)
    with pytest.raises(ConfigError, match="valid values: 'progressive', 'end_to_end', 'none'"):
        DistillConfig(schedule="layerwise")


@pytest.mark.slow
def test_a_resumed_run_with_dropout_draws_the_same_masks(tiny_run_inputs, tmp_path):
    from mobilebert_kit.training.distiller import Distiller

    def distill(out, resume=False, on_step_end=None):  # the preset as given: attention dropout 0.1
        return Distiller(str(tiny_run_inputs / "teacher"), "tiny-mobilebert", str(tiny_run_inputs / "data"), out,
                         resume_config(), console=_quiet(), on_step_end=on_step_end).run(resume=resume)

    def stop_at_5(stage, step, global_step, metrics):
        if global_step == 5:
            raise KeyboardInterrupt  # after the checkpoint of step 4: steps 5-6 are replayed

    distill(tmp_path / "whole")
    with pytest.raises(KeyboardInterrupt):
        distill(tmp_path / "resumed", on_step_end=stop_at_5)
    distill(tmp_path / "resumed", resume=True)
    whole, resumed = saved_weights(tmp_path / "whole" / "pretrainer"), saved_weights(tmp_path / "resumed" / "pretrainer")
    for name in whole:
        np.testing.assert_allclose(resumed[name], whole[name], rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("schedule, precision", [
    ("end_to_end", "float32"),
    pytest.param("end_to_end", "mixed_bfloat16", marks=pytest.mark.slow),
    pytest.param("none", "float32", marks=pytest.mark.slow),
    pytest.param("none", "mixed_bfloat16", marks=pytest.mark.slow),
])
def test_xla_and_bfloat16_steps_give_the_float32_losses(tiny_run_inputs, tmp_path, schedule, precision):
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller

    def two_steps(precision, jit):
        config = DistillConfig(schedule=schedule, layer_steps=2, pd_steps=2 if schedule == "none" else 0,
                               batch_size=4, shuffle_buffer=16, precision=precision, jit_compile=jit)
        distiller = Distiller(str(tiny_run_inputs / "teacher"), "tiny-mobilebert", str(tiny_run_inputs / "data"),
                              tmp_path / f"{precision}-{jit}", config, console=_quiet()).prepare()
        step, _ = distiller.stage_step(distiller.stages[0])
        batch = next(distiller.iterator)
        return [{k: float(v) for k, v in step(batch).items()} for _ in range(2)]  # before and after one update

    reference = two_steps("float32", "off")
    compiled = two_steps(precision, "on")
    assert set(compiled[0]) == set(reference[0])
    # bfloat16 keeps ~3 significant digits; float32 under XLA differs by rounding only.
    rel, abs_ = (5e-2, 1e-3) if precision == "mixed_bfloat16" else (1e-4, 1e-6)
    for key, value in reference[0].items():
        assert compiled[0][key] == pytest.approx(value, rel=rel, abs=abs_), key
        assert compiled[1][key] == pytest.approx(reference[1][key], rel=10 * rel, abs=10 * abs_), key


def test_jit_compile_auto_pays_only_for_long_stages():
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.distill_config import JIT_MIN_STEPS, DistillConfig

    auto = DistillConfig()
    assert not auto.jit_for(JIT_MIN_STEPS - 1) and auto.jit_for(JIT_MIN_STEPS)
    assert DistillConfig(jit_compile="on").jit_for(1) and not DistillConfig(jit_compile="off").jit_for(10**6)
    # bfloat16 stays eager on a CPU (XLA's CPU dot does not use bf16 instructions), not on an accelerator,
    # and an explicit "on" is obeyed.
    bf16 = DistillConfig(precision="mixed_bfloat16")
    assert not bf16.jit_for(10**6, cpu_only=True) and bf16.jit_for(JIT_MIN_STEPS, cpu_only=False)
    assert auto.jit_for(JIT_MIN_STEPS, cpu_only=True)
    assert DistillConfig(precision="mixed_bfloat16", jit_compile="on").jit_for(1, cpu_only=True)
    with pytest.raises(ConfigError, match="unknown jit_compile 'yes'"):
        DistillConfig(jit_compile="yes")


@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_shard_that_is_not_tfrecord_is_one_line(tiny_run_inputs, tmp_path, cache):
    """Read in the training loop and in the teacher cache's pass alike: it was a DataLossError."""
    import shutil
    from dataclasses import replace

    from mobilebert_kit.errors import MbkError

    data = tmp_path / "data"
    shutil.copytree(tiny_run_inputs / "data", data)
    shard = sorted(data.glob("*.tfrecord"))[-1]
    shard.write_bytes(np.random.default_rng(0).bytes(3000))
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("teacher", "student"):
        (inputs / name).symlink_to(tiny_run_inputs / name)
    (inputs / "data").symlink_to(data)
    with pytest.raises(MbkError, match=r"has a record that cannot be read \(corrupted record") as err:
        run(inputs, tmp_path / "run", config=replace(resume_config(), teacher_cache=cache))
    assert "\n" not in str(err.value) and "{{" not in str(err.value)
    # Failed before its first checkpoint: nothing to resume, so nothing kept. Its run.json refused the corrected
    # command ("pass --resume", which read the same data again).
    assert not (tmp_path / "run").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(MbkError, match="cannot be read"):
        run(inputs, tmp_path / "empty", config=replace(resume_config(), teacher_cache=cache))
    assert list((tmp_path / "empty").iterdir()) == []  # the user's empty directory stays, empty


@pytest.mark.parametrize("field, value, fragment", [
    ("seq_len", 24, "holds records of 12 input_ids values but {meta} says seq_len 24"),
    ("max_predictions", 5, "holds records of 3 masked_lm_positions values but {meta} says max_predictions 5"),
])
def test_a_dataset_json_that_disagrees_with_its_records_is_refused_before_any_state(tiny_run_inputs, tmp_path, field,
                                                                                    value, fragment):
    # It was TensorFlow's parse error at the first step, cut mid-word, after the run directory was written.
    import shutil

    from mobilebert_kit.data.pretraining_dataset import pretraining_dataset
    from mobilebert_kit.errors import MbkError

    data = tmp_path / "data"
    shutil.copytree(tiny_run_inputs / "data", data)
    meta = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").write_text(json.dumps({**meta, field: value}))
    with pytest.raises(MbkError) as err:
        pretraining_dataset(data, 4)
    assert fragment.format(meta=data / "dataset.json") in str(err.value)
    assert str(err.value).endswith("the two were written apart: re-create the data with `mbk pretraining-data`")
    sorted(data.glob("*.tfrecord"))[0].write_bytes(b"\x00" * 40)
    (data / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(MbkError, match="is not a shard of pre-training records"):
        pretraining_dataset(data, 4)


@pytest.mark.parametrize("values, fragment", [
    ({"learning_rate": "x"}, "learning_rate must be a finite number > 0"),
    ({"batch_size": 1e300}, "batch_size must be an integer"),
    ({"layer_steps": 10**18}, "layer_steps must be an integer >= 1 and <= 1000000000"),
    ({"clip_norm": "x"}, "clip_norm must be a finite number"),
    ({"weight_decay": float("nan")}, "weight_decay must be a finite number"),
    ({"seed": -1}, "seed must be an integer >= 0"),
    ({"log_every": 2.5}, "log_every must be an integer"),
    ({"weights": {"attention": "x"}}, "loss weight attention must be a finite number"),
    ({"weights": [1]}, "weights must be a mapping"),
    ({"copy_from_teacher": "no"}, "copy_from_teacher must be true or false"),
])
def test_a_hand_edited_run_record_is_refused_field_by_field(values, fragment):
    """run.json (read on --resume) and recipes reach DistillConfig without the CLI's checks; these reached LAMB."""
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.finetune_config import FinetuneConfig

    with pytest.raises(ConfigError, match=fragment) as err:
        DistillConfig.from_dict(values)
    assert "\n" not in str(err.value)
    assert DistillConfig.from_dict({"clip_norm": None, "pd_learning_rate": None}).clip_norm is None  # unset is valid
    with pytest.raises(ConfigError, match="epochs must be an integer"):
        FinetuneConfig(epochs="3")


def test_plain_progress_lines_show_the_rate_and_the_time_left():
    import io

    from rich.console import Console

    from mobilebert_kit.training.stage_progress import StageProgress

    out = io.StringIO()
    with StageProgress(Console(file=out, force_terminal=False), "layer_0", total=4, plain_every=2) as bar:
        bar._start_time -= 2.0  # two seconds for the first two steps: 1 step/s, two steps left
        bar.update(2, {"loss": 1.5})
    line = out.getvalue().strip()
    assert line.startswith("layer_0 2/4 ") and "step/s" in line and "loss=1.5" in line
    assert "eta 0:00:02" in line, line


def test_data_longer_than_a_model_s_usable_positions_is_refused(tiny_run_inputs, tmp_path):
    # A RoBERTa-style position table (position_offset) has fewer usable positions than rows: 12-token data into
    # 14 rows less an offset of 3 was accepted and failed inside the embedding's gather.
    import mobilebert_kit as mbk
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.models.heads import BertPretrainer

    for name, preset in (("teacher", "tiny-ib-bert"), ("student", "tiny-mobilebert")):
        model = mbk.build(preset, max_position_embeddings=14, position_offset=3)
        mbk.save(BertPretrainer(model) if name == "teacher" else model, tmp_path / name)
    shutil.copytree(tiny_run_inputs / "data", tmp_path / "data")
    with pytest.raises(ConfigError, match="the data has sequences of 12 tokens but the teacher has only 11 positions"):
        run(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before the run directory is made
