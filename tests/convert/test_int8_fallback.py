"""Full int8's fallback: an all-int8 file that fails validation is exported again with the fewest layers float.

A post-LN encoder whose residual stream carries outlier channels (all-MiniLM-L6-v2's shape of problem,
imitated on a tiny BERT with ``with_outliers``) fails validation in all-int8; the mode record's
``fallback`` search (tests/convert/test_quantization_search.py) gives a file that passes, and the report
says what stayed float. A user who
chose float layers or ops gets exactly what they asked for: no second attempt.
"""

import pytest

from tests.convert.conftest import trained_like, with_outliers


@pytest.fixture(scope="module")
def outlier_bert():
    import mobilebert_kit as mbk

    # x200 on two feed-forward channels of every block (full int8 keeps a LayerNorm model's norms and residual
    # ADDs float by default, so outliers there no longer fail it): all-int8 fails validation.
    return with_outliers(trained_like(mbk.build("tiny-bert", attention_mask_value=-120.0)), factor=200.0,
                         weights=("intermediate/kernel", "intermediate/bias"))


@pytest.mark.slow  # ~25 s; the default tier has the one-sensitive-layer case (test_quantization_search.py)
def test_failed_all_int8_is_exported_with_layers_in_float(outlier_bert, tmp_path):
    from mobilebert_kit.artifacts.inspection import inspect_artifact
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "m.tflite"
    result = export(ExportOptions(outlier_bert, "tflite", "int8", out=str(out), seq_len=16), log=None)
    assert result.validation.passed
    chosen = result.search["frontier"][-1]
    assert chosen["passed"] and chosen["float_layers"], chosen
    assert any(n.startswith("int8 as asked failed validation (") and chosen["setting"] in n for n in result.notes), \
        result.notes
    # The written file is the fallback: the chosen layers' LayerNorm arithmetic and projections are float.
    float_ops = inspect_artifact(out).float_ops
    assert float_ops.get("FULLY_CONNECTED", 0) > 0 and float_ops.get("RSQRT", 0) > 0, float_ops


@pytest.mark.parametrize("chosen", [pytest.param({"keep_float_layers": ("pooler",)}, marks=pytest.mark.slow),
                                    {"keep_float_ops": ("SOFTMAX",)}])
def test_a_users_own_float_choice_gets_no_second_attempt(outlier_bert, tmp_path, chosen):
    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.errors import MbkError

    out = tmp_path / "m.tflite"
    with pytest.raises(MbkError, match="pooled_output cosine"):
        export(ExportOptions(outlier_bert, "tflite", "int8", out=str(out), seq_len=16, **chosen), log=None)
    assert not out.exists()
