"""Training and data errors are told apart by type (issue 34 item 4), and both stay one-line ``MbkError``s.

Cheap real call sites, no TensorFlow: a table, a pre-training data directory and
a vocabulary that cannot be used are ``DataError``; a run record without its
configuration and a cluster port that is taken are ``TrainingError``.
"""

import json
import socket
from types import SimpleNamespace

import pytest

from mobilebert_kit.cli import cmd_evaluate
from mobilebert_kit.data.records import read_metadata
from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.errors import ConfigError, DataError, MbkError, TrainingError
from mobilebert_kit.training.strategies import wait_for_workers
from mobilebert_kit.training.task_data import read_table
from mobilebert_kit.utils.run_state import read_run_record


def _is_one_kind(err, kind):
    """``err`` is ``kind``, an MbkError exiting 2, and not the other new kind (nor a ConfigError)."""
    other = TrainingError if kind is DataError else DataError
    assert type(err) is kind
    assert isinstance(err, MbkError) and err.exit_code == MbkError.exit_code == 2
    assert not isinstance(err, (other, ConfigError))


def test_the_two_kinds_are_mbk_errors_with_the_base_exit_code():
    for kind in (DataError, TrainingError):
        assert issubclass(kind, MbkError) and kind.exit_code == 2 and "exit_code" not in vars(kind)
    assert not issubclass(DataError, TrainingError) and not issubclass(TrainingError, DataError)


def test_a_table_row_of_the_wrong_width_is_a_data_error(tmp_path):
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\nfine\t1\nthree\tfields\there\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 3 has 3 field") as caught:
        read_table(table)
    _is_one_kind(caught.value, DataError)


def test_a_directory_without_pretraining_metadata_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="is not a pre-training data directory") as caught:
        read_metadata(tmp_path)
    _is_one_kind(caught.value, DataError)


def test_a_vocabulary_without_special_tokens_is_a_data_error(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(DataError, match="lacks the special token") as caught:
        TextTokenizer.from_vocab(vocab)
    _is_one_kind(caught.value, DataError)


def test_a_run_record_without_its_configuration_is_a_training_error(tmp_path):
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"command": "finetune"}), encoding="utf-8")
    with pytest.raises(TrainingError, match="is not a fine-tuning run record") as caught:
        read_run_record(run_file, "fine-tuning", "start over")
    _is_one_kind(caught.value, TrainingError)
    run_file.write_text("{not json", encoding="utf-8")  # the shared reader's own refusal is of the same kind
    with pytest.raises(TrainingError):
        read_run_record(run_file, "fine-tuning", "start over")


def test_a_worker_whose_port_is_taken_is_a_training_error():
    with socket.create_server(("", 0)) as taken:  # IPv4 and (dual-stack) IPv6 binds of this port both fail
        port = taken.getsockname()[1]
        cluster = {"worker": [f"localhost:{port}", "localhost:1"]}
        with pytest.raises(TrainingError, match=f"cannot listen on port {port}") as caught:
            wait_for_workers(cluster, "worker", 0, timeout_s=0.1, say=lambda line: None)
    _is_one_kind(caught.value, TrainingError)


@pytest.mark.parametrize("kind", [DataError, TrainingError, MbkError])
def test_evaluate_names_the_model_and_keeps_the_kind(monkeypatch, kind):
    def refuse(path, args):
        raise kind(f"{path} is bad")

    monkeypatch.setattr(cmd_evaluate, "evaluate_one", refuse)
    args = SimpleNamespace(model=["a.tflite", "b.tflite"])
    with pytest.raises(MbkError, match="^--model a.tflite: a.tflite is bad$") as caught:
        cmd_evaluate._named("a.tflite", args)
    assert type(caught.value) is kind
