"""Fine-tuning: metrics against references, task features, and tiny end-to-end runs per task."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.errors import DataError
from mobilebert_kit.training import metrics, task_data
from mobilebert_kit.training.fine_tuner import FineTuner, evaluate_directory
from mobilebert_kit.training.finetune_config import FinetuneConfig

WORDS = ["good", "bad", "movie", "film", "plot", "was", "is", "the", "a", "very", "not", "actor", "john", "paris",
         "lives", "in", "where", "does", "who", "?", ".", "smith", "london", "play", "##s"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    return TextTokenizer.from_vocab(path)


def _quiet():
    import os

    from rich.console import Console

    return Console(file=open(os.devnull, "w"))


def test_metrics_match_references():
    sklearn = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert metrics.matthews_corrcoef(y, p) == pytest.approx(sklearn.matthews_corrcoef(y, p))
    assert metrics.f1_macro(y, p) == pytest.approx(sklearn.f1_score(y, p, average="macro"))
    yb, pb = y % 2, p % 2
    assert metrics.f1_binary(yb, pb) == pytest.approx(sklearn.f1_score(yb, pb))
    x, z = rng.normal(size=50), rng.normal(size=50)
    z[:10] = x[:10]
    x[20:25] = 1.0  # ties
    assert metrics.pearson(x, z) == pytest.approx(stats.pearsonr(x, z)[0])
    assert metrics.spearman(x, z) == pytest.approx(stats.spearmanr(x, z)[0])


def test_squad_and_tagging_metrics_by_hand():
    assert metrics.normalize_answer("The  Eiffel, Tower!") == "eiffel tower"
    result = metrics.squad_metrics({"q1": "the Eiffel Tower", "q2": "in Paris France", "q3": ""},
                                   {"q1": ["Eiffel Tower"], "q2": ["Paris", "Lyon"], "q3": []})
    # q1 exact; q2 vs "Paris": precision 1/3, recall 1, F1 = 2 (1/3) / (4/3) = 1/2; q3 unanswerable, predicted empty
    assert result["exact_match"] == pytest.approx(200 / 3)
    assert result["f1"] == pytest.approx(100 * (1 + 1 / 2 + 1) / 3)
    assert metrics.bio_spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "B-LOC"]) == [
        ("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5), ("LOC", 5, 6)]
    scores = metrics.token_classification_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    assert scores["f1"] == 0.0 and scores["accuracy"] == pytest.approx(2 / 3)


def test_squad_features_find_answers_across_windows(tokenizer):
    context = "john smith lives in paris . " * 6 + "the actor lives in london ."
    start = context.index("london")
    examples = [{"id": "a", "question": "where does the actor play ?", "context": context,
                 "answers": [{"text": "london", "start": start}], "impossible": False}]
    features, windows = task_data.squad_features(tokenizer, examples, seq_len=24, doc_stride=8)
    assert len(windows) > 2  # the context needs several windows
    hits = [w for w in range(len(windows)) if features["start_positions"][w] > 0]
    assert hits and all(features["end_positions"][w] == features["start_positions"][w] for w in hits)
    w = hits[0]
    token = features["input_ids"][w, features["start_positions"][w]]
    assert tokenizer.convert_ids_to_tokens([token]) == ["london"]
    # Postprocessing maps the best span back to context characters; no-answer wins when it scores higher.
    start_logits = np.full((len(windows), 24), -5.0, np.float32)
    end_logits = np.full((len(windows), 24), -5.0, np.float32)
    start_logits[w, features["start_positions"][w]] = 5.0
    end_logits[w, features["end_positions"][w]] = 5.0
    assert task_data.squad_predictions(examples, windows, start_logits, end_logits) == {"a": "london"}
    start_logits[:, 0] = end_logits[:, 0] = 9.0
    assert task_data.squad_predictions(examples, windows, start_logits, end_logits, allow_null=True) == {"a": ""}


def test_a_data_label_that_only_looks_like_a_models_label_says_how(tokenizer, tmp_path):
    # `mbk evaluate` of data labelled "Pos" (or NFD "café", a full-width letter) for a model of "pos" said "label
    # 'café' was not seen in training; known: café", the two names printing alike; the message names the match.
    data = tmp_path / "d.tsv"
    for label, name, how in (("Pos", "pos", "differ only in case"), ("cafe\u0301", "caf\u00e9", "composed differently"),
                             ("\uff50os", "pos", "look alike")):
        data.write_text(f"sentence\tlabel\na\tneg\nb\t{label}\n")
        with pytest.raises(DataError, match=rf"label {label!r} \(data row 2\) and the model's {name!r} .*{how}"):
            task_data.load_sequence_task(data, tokenizer, 8, "classification", label_names=["neg", name])
    with pytest.raises(DataError, match=r"tag 'b-per' \(sentence 1\) and the model's 'B-PER' differ only in case"):
        task_data.tagging_features(tokenizer, [(["John"], ["b-per"])], 8, ["B-PER", "O"], "eval.conll")


def test_tagging_features_label_first_pieces(tokenizer):
    sentences = [(["John", "plays", "good"], ["B-PER", "O", "O"])]
    features, labels, first = task_data.tagging_features(tokenizer, sentences, 8, ["B-PER", "O"], "t.conll")
    # plays -> play ##s: only "play" carries the tag
    assert tokenizer.convert_ids_to_tokens(features["input_ids"][0, :6]) == ["[CLS]", "john", "play", "##s", "good", "[SEP]"]
    assert labels[0, :6].tolist() == [-100, 0, 1, -100, 1, -100]
    assert first == [{0: 1, 1: 2, 2: 4}]


def test_an_unknown_tag_names_its_file_and_sentence(tokenizer):
    # The error named the tag only: with --train and --eval files, or a long file, the user could not find it.
    sentences = [(["John"], ["B-PER"]), (["plays", "good"], ["O", "B-FOO"])]
    with pytest.raises(DataError, match=r"^eval.conll: tag 'B-FOO' \(sentence 2\) was not seen in training; known: "):
        task_data.tagging_features(tokenizer, sentences, 8, ["B-PER", "O"], "eval.conll")


def _sentiment(path, n, seed):
    rng = random.Random(seed)
    rows = ["sentence\tlabel"]
    for _ in range(n):
        good = rng.random() < 0.5
        filler = rng.sample(["the", "movie", "was", "very", "plot", "is", "a", "film"], 3)
        rows.append(" ".join(filler + ["good" if good else "bad"]) + f"\t{'pos' if good else 'neg'}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_classification_learns_and_round_trips(tokenizer, tmp_path):
    train = _sentiment(tmp_path / "train.tsv", 64, 0)
    dev = _sentiment(tmp_path / "dev.tsv", 32, 1)
    config = FinetuneConfig(task="classification", epochs=4, batch_size=8, learning_rate=2e-3, seq_len=12, dropout=0.0)
    results = FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(train, tmp_path / "out", eval_path=dev)
    assert results["accuracy"] >= 0.9, results
    assert set(results) == {"accuracy", "f1", "matthews_corrcoef"}
    spec = json.loads((tmp_path / "out" / "task.json").read_text())
    assert spec["label_names"] == ["neg", "pos"] and spec["text_columns"] == ["sentence"]
    # TensorBoard: the running loss and learning rate while training, the metrics at the last step.
    from mobilebert_kit.training.summaries import read_scalars

    scalars = read_scalars(tmp_path / "out" / "tensorboard")
    assert {"finetune/loss", "finetune/learning_rate", "eval/accuracy", "eval/f1"} <= set(scalars), sorted(scalars)
    losses = [value for _, value in scalars["finetune/loss"]]
    assert len(losses) >= 2 and losses[-1] < losses[0], losses  # it learned (accuracy >= 0.9 above)
    assert [step for step, _ in scalars["finetune/loss"]] == sorted(step for step, _ in scalars["finetune/loss"])
    assert scalars["eval/accuracy"] == [(32, pytest.approx(results["accuracy"]))]  # 4 epochs x 64 / 8
    again = evaluate_directory(tmp_path / "out", dev)
    assert again == pytest.approx(results)
    # What `mbk export OUT/model` embeds for an app: vocabulary, casing and class names.
    from mobilebert_kit.sources.model_source import ModelSource

    source = ModelSource.load(tmp_path / "out" / "model")
    assert source.labels == ["neg", "pos"]
    assert source.tokenizer is not None and source.tokenizer.do_lower_case is True
    assert source.tokenizer.vocab_lines() == open(tokenizer.source).read().splitlines()
    # The saved task model alone (what `mbk substitute` of it writes too: no task.json) scores the same at
    # the same length: its task from the head, labels and vocabulary from the files beside it.
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.fine_tuner import directory_evaluation

    alone = directory_evaluation(tmp_path / "out" / "model", dev, seq_len=12)
    assert alone.task == "classification" and alone.metrics == pytest.approx(results)
    (tmp_path / "out" / "model" / "labels.txt").write_text("neg\npos\nmeh\n")
    with pytest.raises(MbkError, match="labels.txt names 3 class\\(es\\) and the model's head has 2"):
        directory_evaluation(tmp_path / "out" / "model", dev, seq_len=12)
    with pytest.raises(MbkError, match="exceeds the model's 64 positions"):
        directory_evaluation(tmp_path / "out", dev, seq_len=65)


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_metrics_are_those_of_the_saved_model(tokenizer, tmp_path, precision):
    # The model is saved (and evaluated, exported) in float32; --eval scored the half-precision model, which
    # rounded every dev row's score to one value (0.2539): the run was refused as "learned nothing" and its
    # model not saved. On other data its metrics in task.json were not those `mbk evaluate` gives the output.
    for name, seed in (("train", 0), ("dev", 1)):
        rows = _sentiment(tmp_path / f"{name}.tsv", 48 if name == "train" else 32, seed).read_text()
        (tmp_path / f"{name}.tsv").write_text(rows.replace("\tpos", "\t0.9").replace("\tneg", "\t0.1"))
    config = FinetuneConfig(task="regression", epochs=2, batch_size=8, learning_rate=2e-3, seq_len=12,
                            precision=precision)
    results = FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(
        tmp_path / "train.tsv", tmp_path / "out", eval_path=tmp_path / "dev.tsv")
    assert json.loads((tmp_path / "out" / "task.json").read_text())["metrics"] == results
    assert evaluate_directory(tmp_path / "out", tmp_path / "dev.tsv") == pytest.approx(results, rel=1e-6, abs=1e-7)


def test_a_saved_encoder_without_a_head_is_refused_by_evaluate(tmp_path):
    import mobilebert_kit as mbk_api
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.fine_tuner import directory_evaluation

    mbk_api.save(mbk_api.build("tiny-bert"), tmp_path / "enc")
    with pytest.raises(MbkError, match="holds an encoder without a task head to score"):
        directory_evaluation(tmp_path / "enc", _sentiment(tmp_path / "dev.tsv", 4, 0))


def test_token_classification_runs(tokenizer, tmp_path, caplog):
    # Span QA runs end to end in test_cli.py; here the tagging path (sample weights on first pieces).
    conll = tmp_path / "train.conll"
    conll.write_text("John B-PER\nlives O\nin O\nParis B-LOC\n\nthe O\nactor O\nplays O\nin O\nLondon B-LOC\n\n" * 4)
    config = FinetuneConfig(task="token_classification", epochs=1, batch_size=4, seq_len=12, learning_rate=1e-3)
    results = FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(conll, tmp_path / "ner", eval_path=conll)
    assert set(results) == {"accuracy", "precision", "recall", "f1"}
    # The tagger never reads the pooler: it is not trained, so TensorFlow has no "Gradients do not exist for
    # variables ['pooler/kernel:0', ...] ... did you forget to provide a `loss` argument?" to print.
    assert not [r for r in caplog.records if "Gradients do not exist" in r.getMessage()]
    assert json.loads((tmp_path / "ner" / "task.json").read_text())["label_names"] == ["B-LOC", "B-PER", "O"]


def test_bad_task_inputs(tokenizer, tmp_path):
    from mobilebert_kit.errors import MbkError

    (tmp_path / "x.tsv").write_text("foo\tbar\n1\t2\n")
    with pytest.raises(MbkError, match="cannot tell the text column"):
        task_data.load_sequence_task(tmp_path / "x.tsv", tokenizer, 8, "classification")
    with pytest.raises(MbkError, match="the SQuAD file .* is not valid JSON"):
        task_data.read_squad(tmp_path / "x.tsv")
    with pytest.raises(MbkError, match="is neither a fine-tuned model"):
        evaluate_directory(tmp_path, tmp_path / "x.tsv")


def test_rows_longer_than_the_positions_are_refused_before_any_state(tokenizer, tmp_path):
    # --seq-len 1024 on a 512-position MiniLM was "internal error (ValueError: in user code:)" from the first step,
    # after OUT/run was written, and that state then blocked the same command until --overwrite.
    from mobilebert_kit.errors import ConfigError

    train = _sentiment(tmp_path / "train.tsv", 16, 0)
    config = FinetuneConfig(task="classification", epochs=1, batch_size=8, seq_len=65)  # tiny-bert has 64
    with pytest.raises(ConfigError, match="--seq-len 65 exceeds the model's 64 positions"):
        FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(train, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bad_evaluation_file_is_refused_before_training(tokenizer, tmp_path):
    # Read only after the whole run: a label the training data lacks stopped it at its end, model unsaved.
    from mobilebert_kit.errors import MbkError

    train = _sentiment(tmp_path / "train.tsv", 16, 0)
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\nthe film was good\tpos\nthe plot\tmeh\n")
    config = FinetuneConfig(task="classification", epochs=1, batch_size=8, seq_len=16)
    with pytest.raises(MbkError, match="meh"):
        FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(train, tmp_path / "out", eval_path=dev)
    assert not (tmp_path / "out").exists()


def test_the_evaluation_file_is_read_once(tokenizer, tmp_path, monkeypatch):
    # It was read before training (to fail early) and again to be scored: minutes twice on a large SQuAD dev set.
    reads = []
    real = task_data.load_sequence_task
    monkeypatch.setattr(task_data, "load_sequence_task", lambda path, *a, **k: reads.append(Path(path).name) or real(path, *a, **k))
    train, dev = _sentiment(tmp_path / "train.tsv", 16, 0), _sentiment(tmp_path / "dev.tsv", 6, 1)
    config = FinetuneConfig(task="classification", epochs=1, batch_size=8, seq_len=16)
    results = FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(train, tmp_path / "out", eval_path=dev)
    assert sorted(reads) == ["dev.tsv", "train.tsv"]
    assert 0.0 <= results["accuracy"] <= 1.0


def test_a_trained_model_that_cannot_be_scored_says_so_and_what_to_do(tokenizer, tmp_path, monkeypatch):
    # A run at --learning-rate 10 answered one value for every row: the error named the undefined correlation
    # only, though the model was not saved and --resume would score the same model again.
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training import fine_tuner

    def constant(*args, **kwargs):
        raise MbkError("the model gives every row the same value (3.4682), so its correlation with the labels is "
                       "undefined")

    monkeypatch.setattr(fine_tuner, "model_evaluation", constant)
    train, dev = _sentiment(tmp_path / "train.tsv", 16, 0), _sentiment(tmp_path / "dev.tsv", 6, 1)
    config = FinetuneConfig(task="classification", epochs=1, batch_size=8, seq_len=16)
    with pytest.raises(MbkError) as err:
        FineTuner("tiny-bert", tokenizer, config, console=_quiet()).train(train, tmp_path / "out", eval_path=dev)
    assert str(err.value).startswith(f"scoring the trained model on {dev} failed: the model gives every row")
    assert str(err.value).endswith("the model was not saved (a model that answers one value diverged or learned "
                                   "nothing: a lower --learning-rate may help); run again with --overwrite")
    assert not (tmp_path / "out" / "model").exists()


_QA = '{"id": 1, "question": "q", "answers": [{"text": "a", "answer_start": 0}]}'


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000, "nests too deeply"),
    ('{"data": 5}', 'no "data" list'),
    ('{"data": [5]}', "data[0] has no list 'paragraphs'"),
    ('{"data": [{"paragraphs": [{"context": 5, "qas": []}]}]}', "paragraphs[0] has no str 'context'"),
    ('{"data": [{"paragraphs": [{"context": "abc", "qas": [' + _QA.replace('0}', '"x"}') + ']}]}]}',
     "answers has no int 'answer_start'"),
    ('{"data": [{"paragraphs": [{"context": "abc", "qas": [' + _QA.replace('"q"', "null") + ']}]}]}',
     "qas[0] has no str 'question'"),
])
def test_a_hostile_squad_file_is_one_line(tmp_path, text, fragment):
    """Each of these was an internal error (RecursionError, TypeError, int('x')) before it reached the model."""
    from mobilebert_kit.errors import MbkError

    import re

    (tmp_path / "qa.json").write_text(text)
    with pytest.raises(MbkError, match=re.escape(fragment)) as err:
        task_data.read_squad(tmp_path / "qa.json")
    assert "\n" not in str(err.value)
    (tmp_path / "ok.json").write_text('{"data": [{"paragraphs": [{"context": "abc", "qas": [' + _QA + ']}]}]}')
    assert task_data.read_squad(tmp_path / "ok.json")[0]["answers"] == [{"text": "a", "start": 0}]


@pytest.mark.parametrize("task_json, fragment", [
    ("[" * 100_000, "nests too deeply"),
    ("[1]", "task.json"),
    ('{"vocab": "../../etc/passwd"}', "names no vocabulary file"),
    ('{"vocab": 5}', "names no vocabulary file"),
])
def test_a_hostile_task_json_is_one_line(tmp_path, task_json, fragment):
    from mobilebert_kit.errors import MbkError

    (tmp_path / "model").mkdir()
    (tmp_path / "task.json").write_text(task_json)
    (tmp_path / "x.tsv").write_text("text\tlabel\na\t1\n")
    with pytest.raises(MbkError, match=fragment) as err:
        evaluate_directory(tmp_path, tmp_path / "x.tsv")
    assert "\n" not in str(err.value)


def test_class_labels_drop_surrounding_whitespace_and_refuse_two_spellings(tokenizer, tmp_path):
    # "pos", "pos " and "Pos" trained as three classes without a word (['Pos', 'neg', 'pos', 'pos ']).
    from mobilebert_kit.errors import MbkError

    spaced = tmp_path / "spaced.tsv"
    spaced.write_text("sentence\tlabel\ngood movie\tpos\nbad film\t neg\nthe plot\tpos \n")
    features, labels, names, _ = task_data.load_sequence_task(spaced, tokenizer, 8, "classification")
    assert names == ["neg", "pos"] and labels.tolist() == [1, 0, 1]
    # Evaluation reads labels by the same rule: "pos " is the trained class "pos".
    assert task_data.load_sequence_task(spaced, tokenizer, 8, "classification", label_names=["neg", "pos"])[1].tolist() \
        == [1, 0, 1]
    cased = tmp_path / "cased.tsv"
    cased.write_text("sentence\tlabel\na\tpos\nb\tneg\nc\tPos \n")
    with pytest.raises(MbkError, match=r"labels 'pos' \(data row 1\) and 'Pos' \(data row 3\) differ only in case"):
        task_data.load_sequence_task(cased, tokenizer, 8, "classification")
    with pytest.raises(MbkError, match="differ only in case"):
        task_data.load_sequence_task(cased, tokenizer, 8, "classification", label_names=["Pos", "neg", "pos"])
