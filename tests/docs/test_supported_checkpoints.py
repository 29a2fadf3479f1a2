"""docs/models.md's supported-checkpoints table says what the code does, row by row (issue 35).

Every ``model_type`` of ``checkpoints/families.py`` has one row and every row
names one; for the families whose tokenizer the tests can build
(``tests/tokenizer_fixtures.py``), the row's tokenizer kind, client tokenizer
and ONNX inputs are what ``tokenizer_of`` and ``graph_inputs`` give for that
family's checkpoint. The end-to-end case of each row is
``tests/clients/test_checkpoint_families.py``.
"""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_runner import DOCS  # noqa: E402

from mobilebert_kit.checkpoints.families import FAMILIES  # noqa: E402
from mobilebert_kit.convert.plan.export_tasks import graph_inputs  # noqa: E402

TOKENIZER_WORDS = {"wordpiece": "WordPiece", "sentencepiece": "SentencePiece", "bpe": "byte-level BPE"}
BUILT = ("distilbert", "electra", "albert", "roberta", "xlm-roberta", "mpnet", "deberta-v2")
BUILT = ("distilbert", "electra", "albert", "roberta", "xlm-roberta", "mpnet", "modernbert")


def table_rows():
    text = (DOCS / "models.md").read_text(encoding="utf-8")
    section = text[text.index("### Supported checkpoints"):]
    section = section[:section.index("\n### ", 5)]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([\w-]+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_every_family_has_one_row_and_every_row_is_a_family():
    assert sorted(table_rows()) == sorted(FAMILIES)


@pytest.mark.parametrize("family", BUILT)
def test_a_row_says_what_the_code_does(family, tmp_path):
    pytest.importorskip("transformers")
    from mobilebert_kit.data.text_tokenizer import tokenizer_of
    from tests.tokenizer_fixtures import _config, save_tokenizer

    heads, tokenizer_cell, client_cell, onnx_cell = table_rows()[family]
    size = save_tokenizer(family, tmp_path)
    tokenizer = tokenizer_of(tmp_path)
    assert tokenizer_cell.startswith(TOKENIZER_WORDS[tokenizer.kind.name])
    assert client_cell.startswith("none") == (tokenizer.client_unit() is None)
    if tokenizer.client_unit() is not None:
        assert {"BertTokenizerOptions": "BertTokenizer", "SentencePieceTokenizerOptions": "SentencePiece"}[
            tokenizer.client_unit().options] in client_cell
    token_types = getattr(_config(family, size), "type_vocab_size", 0)
    assert ("token types" in onnx_cell) == ("token_type_ids" in graph_inputs("onnx", token_types))
    assert "sequence" in heads
