"""Fixtures of the training tests: a tiny teacher/student pair and synthetic pre-training data."""

import pytest


@pytest.fixture(scope="session")
def tiny_run_inputs(tmp_path_factory):
    """Saved tiny teacher (with MLM head), teacher encoder without one, student (dropout 0) and data."""
    import mobilebert_kit as mbk
    from mobilebert_kit.backend import keras
    from mobilebert_kit.models.heads import BertPretrainer
    from tests.training.synthetic import write_synthetic_data

    root = tmp_path_factory.mktemp("distill_inputs")
    keras.utils.set_random_seed(1)
    teacher = BertPretrainer(mbk.build("tiny-ib-bert", hidden_dropout=0.0, attention_dropout=0.0))
    mbk.save(teacher, root / "teacher")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(507)]
    (root / "teacher" / "vocab.txt").write_text("\n".join(vocab) + "\n")  # copied next to the student
    from mobilebert_kit.sources.pooling import Pooling, write_pooling

    write_pooling(root / "teacher", Pooling("cls", True))  # a sentence encoder: its student embeds the same way
    mbk.save(teacher.encoder, root / "teacher_encoder")
    mbk.save(mbk.build("tiny-mobilebert", hidden_dropout=0.0, attention_dropout=0.0), root / "student")
    write_synthetic_data(root / "data", num_examples=48, seq_len=12, max_predictions=3)
    return root
