"""Fixtures of the evaluation tests: one tiny task model per head, saved as `mbk finetune` saves it, and exported.

The models are not trained: weights of trained scale (``trained_like``) make every
row's prediction depend on its text, which is what comparing a file's metrics with
the Keras model's needs; a second label set (9 classes) checks label order.
"""

import json

import numpy as np
import pytest

from tests.convert.conftest import trained_like

SEQ = 24
WORDS = ["good", "bad", "movie", "film", "plot", "was", "is", "the", "a", "very", "not", "actor", "john", "paris",
         "lives", "in", "where", "does", "who", "?", ".", "smith", "london", "play", "##s", "fun", "dull"]
LABELS = {"classification": [f"c{i}" for i in range(9)], "token_classification": ["B-LOC", "B-PER", "O"]}
HEAD = {"classification": "sequence_classifier", "regression": "sequence_classifier",
        "token_classification": "token_classifier", "span_qa": "span_question_answerer"}


def sentences(count, seed):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS[:20], size=int(rng.integers(3, 9)))) for _ in range(count)]


def write_data(directory):
    """Labelled files of every task (random labels: only agreement between the file and Keras matters)."""
    rng = np.random.default_rng(7)
    data = {}
    texts = sentences(40, 1)
    names = LABELS["classification"]
    data["classification"] = directory / "cls.tsv"
    data["classification"].write_text("sentence\tlabel\n" + "".join(f"{t}\t{names[rng.integers(9)]}\n" for t in texts))
    data["regression"] = directory / "reg.tsv"
    data["regression"].write_text("sentence\tlabel\n" + "".join(f"{t}\t{rng.uniform(0, 5):.3f}\n" for t in texts))
    other = sentences(40, 2)
    data["embedding"] = directory / "pairs.tsv"
    data["embedding"].write_text("sentence1\tsentence2\tlabel\n"
                                 + "".join(f"{a}\t{b}\t{rng.uniform(0, 5):.2f}\n" for a, b in zip(texts, other)))
    data["token_classification"] = directory / "tags.conll"
    data["token_classification"].write_text("\n".join(
        "\n".join(f"{w} {rng.choice(LABELS['token_classification'])}" for w in t.split()) + "\n" for t in texts))
    context = "john lives in paris . the actor lives in london ."
    qas = [{"id": str(i), "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("where does john live ?", "paris"), ("who lives in london ?", "the actor"),
                                       ("where is the film ?", "london")] * 3)]
    data["span_qa"] = directory / "squad.json"
    data["span_qa"].write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    return data


def save_task_model(directory, task, vocab):
    """A task model saved as `mbk finetune` does: model/ (vocab, casing, labels) and task.json."""
    import mobilebert_kit as mbk
    from mobilebert_kit.models.heads import HEADS

    labels = LABELS.get(task)
    encoder = mbk.build("tiny-bert", attention_mask_value=-120.0, hidden_dropout=0.0, attention_dropout=0.0)
    kwargs = {} if task == "span_qa" else {"num_labels": len(labels) if labels else 1, "dropout": 0.0}
    model = trained_like(HEADS[HEAD[task]](encoder, **kwargs), seed=3)
    mbk.save(model, directory / "model")
    (directory / "model" / "vocab.txt").write_text(vocab.read_text())
    (directory / "vocab.txt").write_text(vocab.read_text())
    (directory / "model" / "tokenizer_config.json").write_text('{"do_lower_case": true}\n')
    if labels:
        (directory / "model" / "labels.txt").write_text("".join(f"{n}\n" for n in labels))
    spec = {"task": task, "seq_len": SEQ, "doc_stride": 128, "max_query_length": 64, "label_names": labels,
            "vocab": "vocab.txt", "lowercase": True}
    (directory / "task.json").write_text(json.dumps(spec))
    return directory


@pytest.fixture(scope="session")
def task_models(tmp_path_factory):
    """``{task: directory}`` of saved tiny task models, plus ``"data"``: ``{task: labelled file}``."""
    from tests.data.conftest import write_vocab

    root = tmp_path_factory.mktemp("task_models")
    vocab = write_vocab(root / "vocab.txt", WORDS)
    found = {task: save_task_model(root / task, task, vocab) for task in HEAD}
    found["data"] = write_data(root)
    return found


class Exports(dict):
    """``{(task, format): file}``, each exported on first use (a TFLite or ONNX export takes seconds)."""

    def __init__(self, task_models, root):
        super().__init__()
        self.task_models, self.root = task_models, root

    def __missing__(self, key):
        from mobilebert_kit.convert.exporter import ExportOptions, export

        name, fmt = key
        task, _, quantize = name.partition("-")
        source = self.task_models["classification" if task == "embedding" else task] / "model"
        extra = {"task": "embedding", "pooling": "mean"} if task == "embedding" else {}
        out = self.root / f"{name}.{fmt}"
        export(ExportOptions(str(source), fmt, quantize or "none", out=str(out), seq_len=SEQ, validate=False, **extra),
               log=None)
        self[key] = out
        return out


@pytest.fixture(scope="session")
def exported(task_models, tmp_path_factory):
    """``{(name, format): file}``: ``name`` is a task (float export) or ``task-quantize`` (``classification-dynamic``)."""
    return Exports(task_models, tmp_path_factory.mktemp("exported"))
