"""Task metrics of exported files: each head in both formats scored like its Keras model, TF-free, one-line errors."""

import re
import subprocess
import sys

import numpy as np
import pytest

from mobilebert_kit.errors import MbkError
from mobilebert_kit.evaluation.artifact_metrics import TASK_METRICS, evaluate_artifact, spread
from tests.evaluation.conftest import SEQ

_slow = pytest.mark.slow
# Each head in each format; the default tier keeps one file per head and both formats of the classifier.
HEADS = [("classification", "tflite"), ("classification", "onnx"), ("regression", "tflite"), ("regression", "onnx"),
         ("token_classification", "onnx"), ("span_qa", "tflite"),
         pytest.param("token_classification", "tflite", marks=_slow), pytest.param("span_qa", "onnx", marks=_slow)]


def keras_evaluation(task_models, task, data):
    import json

    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.models.api import load
    from mobilebert_kit.training.fine_tuner import model_evaluation

    directory = task_models[task]
    spec = json.loads((directory / "task.json").read_text())
    return model_evaluation(load(directory / "model"), spec, TextTokenizer.from_vocab(directory / "vocab.txt"), data)


@pytest.mark.parametrize("task, fmt", HEADS)
def test_a_float_export_scores_as_its_keras_model(task_models, exported, task, fmt):
    data = task_models["data"][task]
    # A dynamic-axis ONNX file is scored at the length its export planned, which it records (planned_seq_len).
    ours = evaluate_artifact(exported[task, fmt], data, batch_size=7)
    reference = keras_evaluation(task_models, task, data)
    assert (ours.task, ours.primary, ours.rows) == (reference.task, reference.primary, reference.rows)
    assert ours.primary == TASK_METRICS[task].primary and ours.primary in ours.metrics
    assert ours.metrics == pytest.approx(reference.metrics, abs=1e-4)


def test_an_embedding_export_scores_pairs_by_the_cosine_of_its_keras_vectors(task_models, exported):
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.models.api import load
    from mobilebert_kit.training import metrics, task_data

    data = task_models["data"]["embedding"]
    ours = evaluate_artifact(exported["embedding", "tflite"], data)
    rows = task_data.read_table(data)
    tokenizer = TextTokenizer.from_vocab(task_models["classification"] / "vocab.txt")
    encoder = load(task_models["classification"] / "model").encoder
    vectors = []
    for column in ("sentence1", "sentence2"):
        features = task_data.sequence_features(tokenizer, [r[column] for r in rows], None, SEQ)
        hidden = encoder(features, training=False)["sequence_output"].numpy()
        mask = features["attention_mask"][..., None]
        vectors.append((hidden * mask).sum(1) / mask.sum(1))
    a, b = vectors
    cosine = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    gold = [float(r["label"]) for r in rows]
    assert (ours.task, ours.primary, ours.rows) == ("embedding", "spearman", len(rows))
    assert ours.metrics["spearman"] == pytest.approx(metrics.spearman(cosine, gold), abs=1e-4)


def test_evaluating_tflite_and_onnx_files_loads_no_tensorflow(task_models, exported):
    files = [exported["classification", "tflite"], exported["classification", "onnx"]]
    code = (
        "import sys\n"
        "from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact\n"
        f"for path in {[str(f) for f in files]!r}:\n"
        f"    print('ACCURACY', evaluate_artifact(path, {str(task_models['data']['classification'])!r}).metrics['accuracy'])\n"
        "print('IMPORTED', sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ACCURACY") == 2 and "IMPORTED []" in done.stdout, done.stdout


def test_limit_spreads_rows_over_the_file():
    assert spread(10, None).tolist() == list(range(10)) and spread(3, 5).tolist() == [0, 1, 2]
    assert spread(100, 4).tolist() == [0, 25, 50, 75]  # a label-sorted file still gives every class


@pytest.mark.slow
def test_a_file_without_vocabulary_takes_tokenizer(task_models, exported, tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "novocab.onnx"
    export(ExportOptions(str(task_models["classification"] / "model"), "onnx", "none", out=str(out), seq_len=SEQ,
                         validate=False, embed_vocab=False), log=None)
    data = task_models["data"]["classification"]
    with pytest.raises(MbkError, match="carries no vocabulary.*--tokenizer"):
        evaluate_artifact(out, data)
    with_vocab = evaluate_artifact(exported["classification", "onnx"], data, seq_len=SEQ)
    given = evaluate_artifact(out, data, seq_len=SEQ, tokenizer=task_models["classification"] / "vocab.txt")
    assert given.metrics == pytest.approx(with_vocab.metrics)


def test_a_tokenizer_of_another_kind_than_the_files_is_refused(task_models, exported, tmp_path):
    # A RoBERTa file given a BERT vocab.txt (the ids fit its table) was scored on WordPiece ids without a word.
    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer("roberta", tmp_path)
    with pytest.raises(MbkError, match=r"--tokenizer .* is a bpe tokenizer but .* whose tokenizer is wordpiece"):
        evaluate_artifact(exported["classification", "onnx"], task_models["data"]["classification"], tokenizer=tmp_path)


@pytest.mark.parametrize("name", ["tokenizer.json", "bert-cased.json"])
def test_a_tokenizer_json_of_other_casing_than_the_file_names_both(task_models, exported, tmp_path, name):
    # An uncased file given a cased BERT tokenizer.json said "... is cased but lower-casing was asked for; drop the
    # option", an option mbk evaluate does not have. Any .json is a tokenizer.json to --tokenizer (TextTokenizer.
    # from_file's rule), whatever its name.
    import json

    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer("bert", tmp_path)
    spec = json.loads((tmp_path / "tokenizer.json").read_text())
    spec["normalizer"]["lowercase"] = False
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / name).write_text(json.dumps(spec))
    with pytest.raises(MbkError, match=rf"^--tokenizer .*{name} is cased but .* was exported uncased; pass"):
        evaluate_artifact(exported["classification", "onnx"], task_models["data"]["classification"],
                          tokenizer=tmp_path / name)


def test_a_tokenizer_larger_than_the_files_embedding_table_is_refused(task_models, exported, tmp_path):
    # Another model's vocab.txt as --tokenizer failed in the runtime ("gather index out of bounds ...; re-export
    # the model"), blaming the file; export and finetune refuse such a vocabulary by name.
    from mobilebert_kit.errors import DataError

    vocab = (task_models["classification"] / "vocab.txt").read_text().splitlines()
    bigger = tmp_path / "vocab.txt"
    bigger.write_text("\n".join(vocab + [f"extra{i}" for i in range(5000)]) + "\n")
    path = exported["classification", "onnx"]
    with pytest.raises(DataError, match=f"has {len(vocab) + 5000} tokens but {path} embeds only"):
        evaluate_artifact(path, task_models["data"]["classification"], seq_len=SEQ, tokenizer=bigger)


def test_an_undefined_correlation_is_refused_not_reported_as_zero(task_models, exported, tmp_path):
    # Every pair with the same cosine (an embedder whose vectors ignore the text, e.g. at --seq-len 2) or the same
    # gold score made Spearman's denominator 0, which metrics.pearson reports as 0.0: "spearman 0.0000".
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.task_scoring import Prepared, _score_pairs

    data = tmp_path / "same.tsv"
    lines = task_models["data"]["embedding"].read_text().splitlines()
    data.write_text("\n".join([lines[0]] + [line.rsplit("\t", 1)[0] + "\t0.5" for line in lines[1:]]) + "\n")
    with pytest.raises(MbkError, match="every pair's similarity score in the data is 0.5"):
        evaluate_artifact(exported["embedding", "tflite"], data)
    constant = {"sentence_embedding": np.ones((6, 4))}
    prepared = Prepared({"attention_mask": np.ones((6, 3))}, 3, np.array([0.1, 0.5, 0.9]))
    with pytest.raises(MbkError, match=r"gives every pair the same cosine \(1.0000\)"):
        _score_pairs(constant, prepared, {"model": "m.onnx"})
    varied = {"sentence_embedding": np.array([[1, 0], [1, 0], [1, 0], [0, 1], [1, 1], [1, 0]], np.float64)}
    assert _score_pairs(varied, prepared, {})["spearman"] == pytest.approx(1.0)


@pytest.mark.parametrize("labels, predicted, problem", [
    ([0.1, 0.5, 0.9], [0.3, 0.3, 0.3], "gives every row the same value (0.3000)"),
    # np.ptp of a NaN is NaN, which passed the constant check: "pearson NaN", no JSON.
    ([0.1, 0.5, 0.9], [0.2, float("nan"), 0.4], "gives nan for 1 of 3 scored row(s)"),
])
def test_an_undefined_regression_correlation_is_refused(labels, predicted, problem):
    import re

    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.task_scoring import Prepared, _score_regression

    prepared = Prepared({}, len(labels), np.array(labels))
    with pytest.raises(MbkError, match=re.escape(problem)):
        _score_regression({"logits": np.array(predicted)[:, None]}, prepared, {"model": "m.onnx"})
    fine = _score_regression({"logits": np.array([[0.2], [0.4], [0.1]])}, Prepared({}, 3, np.array([1.0, 2.0, 0.5])), {})
    assert fine["pearson"] > 0.9
    # A regressor of several targets (problem_type regression, num_labels 3): its first score was taken as the
    # model's answer to the data's one label column.
    with pytest.raises(MbkError, match="outputs 3 regression scores per row, and mbk evaluate scores one"):
        _score_regression({"logits": np.array([[0.2, 1, 2], [0.4, 1, 0], [0.1, 0, 0]])}, prepared, {"model": "m.onnx"})


@pytest.mark.parametrize("labels, problem", [
    (["2", "2", "2"], "every row's label in the data is 2"),
    (["0.1", "0.9"], "2 row(s) cannot measure a correlation"),
])
def test_labels_no_correlation_can_use_are_refused_when_the_data_is_read(tmp_path, labels, problem):
    # Constant labels scored "pearson 0.0000", which then met auto's budget of 99% of a float 0.0; two rows
    # always correlate perfectly. Refused in prepare(), so `finetune --eval` says it before training.
    import re

    from mobilebert_kit.training.task_scoring import prepare

    data = tmp_path / "dev.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"a b\t{label}\n" for label in labels))
    with pytest.raises(MbkError, match=re.escape(problem)):
        prepare("regression", data, _tiny_tokenizer(tmp_path), {"seq_len": 8})


def _tiny_tokenizer(tmp_path):
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d"]) + "\n")
    return TextTokenizer.from_vocab(vocab)


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e39"])
def test_non_finite_pair_scores_are_refused_as_regression_labels_are(tmp_path, value):
    # A "nan" similarity score parsed as a float: Spearman ranked the other pairs and Pearson printed NaN
    # (invalid JSON), exit 0. Both numeric label kinds now go through one rule (task_data.numeric_labels).
    from mobilebert_kit.training.task_scoring import prepare

    tokenizer = _tiny_tokenizer(tmp_path)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"sentence1\tsentence2\tlabel\na\tb\t1\nb\tc\t{value}\nc\td\t3\nd\ta\t4\n")
    with pytest.raises(MbkError, match=rf"similarity score of data row 2 is '{value}', not a finite float32 number"):
        prepare("embedding", pairs, tokenizer, {"seq_len": 8})
    # Every row is checked, also those --limit leaves out (the row named is the file's).
    with pytest.raises(MbkError, match="data row 2"):
        prepare("embedding", pairs, tokenizer, {"seq_len": 8}, limit=1)
    single = tmp_path / "reg.tsv"
    single.write_text(f"sentence\tlabel\na\t1\nb\t{value}\n")
    with pytest.raises(MbkError, match=rf"regression label of data row 2 is '{value}', not a finite float32 number"):
        prepare("regression", single, tokenizer, {"seq_len": 8})
    pairs.write_text("sentence1\tsentence2\tlabel\na\tb\t1\nb\tc\t 2.5 \nc\td\t3\n")
    assert prepare("embedding", pairs, tokenizer, {"seq_len": 8}).context.tolist() == [1.0, 2.5, 3.0]


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_a_metric_that_is_no_finite_number_is_refused_before_any_output(tmp_path):
    # A NaN or infinite metric is no JSON (json.dumps writes a bare NaN) and compares false with any budget:
    # score(), the one scoring path of mbk evaluate, the pipeline and fine-tuning, refuses it by name.
    from mobilebert_kit.training.task_scoring import score

    data = tmp_path / "reg.tsv"
    data.write_text("sentence\tlabel\na\t1\nb\t2\nc\t3\n")
    huge = {"logits": np.array([[1e30], [2e30], [3e30]], np.float32)}  # finite, but their squared error overflows
    with pytest.raises(MbkError, match=r"m.onnx's mse on .*reg.tsv is inf \(not a finite number"):
        score("regression", data, lambda features: huge, _tiny_tokenizer(tmp_path), {"model": "m.onnx", "seq_len": 8})


@pytest.mark.parametrize("meta, cause", [
    ({"do_lower_case": True}, "exported with --no-vocab or embed_vocab = false"),
    # A preset has no tokenizer: the export records no casing and nothing used --no-vocab.
    ({"do_lower_case": None, "source": "preset tiny-bert (random weights, seed 0)"},
     "its source, preset tiny-bert (random weights, seed 0), had no vocab.txt"),
])
def test_a_file_without_vocabulary_names_why_it_has_none(meta, cause):
    from types import SimpleNamespace

    from mobilebert_kit.evaluation.artifact_metrics import _tokenizer_of

    onnx = SimpleNamespace(format="onnx", metadata={})
    with pytest.raises(MbkError, match=re.escape(f"u.onnx carries no vocabulary ({cause}), so the data cannot be "
                                                 "tokenized; pass --tokenizer")):
        _tokenizer_of("u.onnx", onnx, None, meta, [], None)


def test_a_file_reads_tables_by_its_fine_tunes_column_names(task_models, tmp_path):
    # `mbk finetune --text-columns "tweet text" --label-column "my label"` records the columns in task.json;
    # `mbk evaluate FILE` and `mbk export --eval-data` of its export refused the same table ("cannot tell the text
    # column(s)"), and export has no --text-columns to pass (session 12's probe).
    import json
    import shutil

    from mobilebert_kit.convert.exporter import ExportOptions, export

    directory = tmp_path / "ft"
    shutil.copytree(task_models["classification"], directory)
    spec = json.loads((directory / "task.json").read_text())
    (directory / "task.json").write_text(json.dumps({**spec, "text_columns": ["tweet text"], "label_column": "my label"}))
    out = tmp_path / "clf.tflite"
    export(ExportOptions(str(directory), "tflite", "none", out=str(out), seq_len=SEQ, validate=False), log=None)
    glue = task_models["data"]["classification"]
    lines = glue.read_text().splitlines()
    custom = tmp_path / "custom.tsv"
    custom.write_text("\n".join(["id\ttweet text\tmy label"] + [f"{i}\t{line}" for i, line in enumerate(lines[1:])]) + "\n")
    ours = evaluate_artifact(out, custom)
    assert ours.rows == len(lines) - 1
    assert ours.metrics == pytest.approx(evaluate_artifact(out, glue).metrics)  # a GLUE header still reads
    with pytest.raises(MbkError, match="cannot tell the text column"):
        evaluate_artifact(_exported_without_columns(task_models, tmp_path), custom)


def test_a_qa_file_is_scored_on_its_fine_tunes_windows(task_models, tmp_path):
    # `mbk finetune --task span_qa --doc-stride 16` records its windows in task.json; `mbk evaluate FILE` cut
    # contexts and questions at the defaults (stride 128, question 64), so a float ONNX file of such a fine-tune
    # (outputs at 141 dB) scored 0.0 exact match against its model's 16.7 and "FAIL" (session 12's probe).
    import json
    import shutil

    from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
    from mobilebert_kit.artifacts.reader import read_artifact
    from mobilebert_kit.convert.exporter import ExportOptions, export

    directory = tmp_path / "qa"
    shutil.copytree(task_models["span_qa"], directory)
    spec = json.loads((directory / "task.json").read_text())
    (directory / "task.json").write_text(json.dumps({**spec, "doc_stride": 2, "max_query_length": 2}))
    out = tmp_path / "qa.onnx"
    export(ExportOptions(str(directory / "model"), "onnx", "none", out=str(out), seq_len=SEQ, validate=False), log=None)
    meta, _ = parse_mbk_metadata(read_artifact(out).metadata, out)
    assert meta["squad_windows"] == {"doc_stride": 2, "max_query_length": 2}
    data = task_models["data"]["span_qa"]
    ours = evaluate_artifact(out, data)
    assert ours.metrics == pytest.approx(keras_evaluation({"span_qa": directory}, "span_qa", data).metrics, abs=1e-4)
    assert ours.metrics != pytest.approx(keras_evaluation(task_models, "span_qa", data).metrics, abs=1e-4)


def _exported_without_columns(task_models, tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "plain.tflite"
    export(ExportOptions(str(task_models["classification"]), "tflite", "none", out=str(out), seq_len=SEQ,
                         validate=False), log=None)
    return out


@pytest.mark.parametrize("fmt, ids", [("tflite", ["[UNK]"]), ("onnx", ["fun"])])
def test_a_tflite_file_is_scored_on_the_ids_its_app_computes(task_models, exported, monkeypatch, fmt, ids):
    # MediaPipe and the Task Library lower-case A-Z and keep accents; the checkpoint's tokenizer strips them. A
    # .tflite was scored with the latter, so rows with accents counted other ids than the app's (an int8 file
    # scored 0.454 where MediaPipe gave 0.462). ONNX apps tokenize with the checkpoint's (Hugging Face) tokenizer.
    from mobilebert_kit.evaluation import artifact_metrics

    seen = []
    real = artifact_metrics.score
    monkeypatch.setattr(artifact_metrics, "score", lambda task, data, predict, tokenizer, *a: seen.append(tokenizer)
                        or real(task, data, predict, tokenizer, *a))
    evaluate_artifact(exported["classification", fmt], task_models["data"]["classification"], seq_len=SEQ)
    assert seen[0].tokenize("Fün") == ids


def test_a_fine_tuned_model_exports_at_the_length_it_was_trained_at(task_models, tmp_path):
    # Exported at 128 by default, a model fine-tuned at 32 ran 4x the work on inputs it never saw in training.
    from mobilebert_kit.artifacts.reader import read_artifact
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "clf.tflite"
    export(ExportOptions(str(task_models["classification"]), "tflite", "none", out=str(out), validate=False), log=None)
    # A classifier's file is dynamic-length (issue 36): the planned length is what it allocates and validates at.
    def planned(path):
        return [spec.get("allocated", spec["shape"]) for spec in read_artifact(path).input_specs()]

    assert [spec["shape"] for spec in read_artifact(out).input_specs()] == [[1, -1]] * 3
    assert planned(out) == [[1, SEQ]] * 3
    given = tmp_path / "given.tflite"
    export(ExportOptions(str(task_models["classification"]), "tflite", "none", out=str(given), seq_len=16,
                         validate=False), log=None)
    assert planned(given)[0] == [1, 16]
    # An explicit --task keeps the fine-tuned length too (the length was decided before the source loaded: 128).
    named = tmp_path / "named.tflite"
    export(ExportOptions(str(task_models["classification"]), "tflite", "none", out=str(named), task="classification",
                         validate=False), log=None)
    assert planned(named)[0] == [1, SEQ]
