"""The Hugging Face families of ``checkpoints/families.py``: DistilBERT, ELECTRA, ALBERT, RoBERTa, XLM-R, MPNet,
DeBERTa-v2/v3.
ModernBERT.

Each family is imported from a tiny random ``transformers`` model saved as
safetensors and compared with it on the same ids (issue 35): hidden states,
and the logits of each head our task models fit. Criterion as in
``test_parity_hf.py``: max |ours - ref| <= 1e-4 * max |ref|, here with weights
far from init (:func:`~tests.parity_helpers.randomize`: init-scale weights
hide transposition bugs). Every family x head pair is one parametrized case
(:data:`FAMILY_MODELS` x :data:`HEADS`). A family mbk cannot build is refused
in one line, and so is a checkpoint whose config names another family.
"""

import json

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import CheckpointError, ConfigError
from mobilebert_kit.layers.disentangled_attention import log_bucket_positions
from mobilebert_kit.layers.relative_position_bias import relative_buckets
from mobilebert_kit.models.api import max_positions, named_weights
from mobilebert_kit.models.encoder import Encoder
from tests.helpers import assert_close_relative, assert_one_line_error, random_inputs, run_encoder
from tests.parity_helpers import save_reference
from tests.tokenizer_fixtures import TINY_DEBERTA_V3

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.parity

VOCAB = 99
TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TINY_DISTILBERT = dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64,
                       dropout=0.0, attention_dropout=0.0)
TINY_ELECTRA = dict(TINY, embedding_size=16)
# RoBERTa's table: max_position_embeddings + pad_token_id + 1 rows, the first two never read.
TINY_ROBERTA = dict(TINY, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1)
# MPNet: RoBERTa's positions, no token types, 32 relative-distance buckets (distances to 63 reach the log ones).
TINY_MPNET = dict(TINY, max_position_embeddings=66, pad_token_id=1)
TINY_ALBERT = dict(TINY_ELECTRA, num_hidden_layers=4)
# ConvBERT's classification head activates with hidden_act (ACT2FN[config.hidden_act]): gelu_new, not its default.
TINY_CONVBERT = dict(TINY_ELECTRA, hidden_act="gelu_new")
# DeBERTa-v3's layout (no position or token-type table, c2p + p2c over a layer-normed table shared by the layers'
# own query and key), 8 log buckets: distances past 4 reach the logarithmic ones within 64 tokens.
TINY_DEBERTA = dict(TINY, **TINY_DEBERTA_V3)


def family_inputs(batch, seq, pad_last=0, pad_id=0, token_types=2, seed=0):
    """Random ids that avoid ``pad_id`` on real tokens (RoBERTa numbers only non-padding ids), padding with it;
    segments 0/1 with ``token_types`` 2, zeros otherwise."""
    inputs = random_inputs(VOCAB, batch_size=batch, seq_len=seq, pad_last=pad_last, type_vocab_size=token_types,
                           seed=seed)
    ids = inputs["input_ids"]
    ids[(ids == pad_id) & (inputs["attention_mask"] == 1)] = pad_id + 2
    ids[inputs["attention_mask"] == 0] = pad_id
    return inputs


def reference(model, inputs, token_types=2):
    """The PyTorch model's output on ``inputs`` (``token_types`` 0: DistilBERT, which takes none)."""
    feed = {k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items() if token_types or k != "token_type_ids"}
    with torch.no_grad():
        return model(**feed)


def compare(ours, expected, mask=None):
    """Asserts the issue-2 criterion; returns the max abs difference (the figure the report quotes)."""
    assert_close_relative(ours, expected, mask=mask)
    keep = np.ones(np.shape(ours)[:2], bool) if mask is None else np.asarray(mask).astype(bool)
    return float(np.abs(np.asarray(ours, np.float64) - np.asarray(expected, np.float64))[keep].max())


def check_encoder(ours, ref, token_types=2, pad_id=0, pooled=False):
    """Unpadded and right-padded batches: sequence output (and pooled output) agree on real tokens."""
    diffs = []
    for batch, seq, pad in ((1, 5, 0), (2, 16, 0), (3, 12, 5)):
        inputs = family_inputs(batch, seq, pad, pad_id, token_types, seed=batch * 100 + seq)
        expected = reference(ref, inputs, token_types)
        got = run_encoder(ours, inputs)
        diffs.append(compare(got["sequence_output"], expected.last_hidden_state.numpy(),
                             mask=inputs["attention_mask"] if pad else None))
        if pooled:
            diffs.append(compare(got["pooled_output"], expected.pooler_output.numpy()))
    return max(diffs)


def check_head(ours, ref, outputs, token_types=2, pad_id=0):
    """The task model's logits agree with the reference's ``outputs`` (ours name -> theirs)."""
    inputs = family_inputs(2, 11, 0, pad_id, token_types, seed=7)
    expected = reference(ref, inputs, token_types)
    got = run_encoder(ours, inputs)
    return max(compare(got[name], getattr(expected, theirs).numpy()) for name, theirs in outputs.items())


def saved(directory, model, seed=0, randomized=True):
    """``model`` saved as safetensors in ``directory`` (random weights far from init unless ``randomized`` is
    False); returns it in eval mode."""
    if randomized:
        return save_reference(model, directory, seed)
    model.eval().save_pretrained(directory, safe_serialization=True)
    return model


# === DistilBERT: BERT's block under other names, no token types, no pooler ===

@pytest.fixture(scope="module")
def distilbert_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("distilbert")
    ref = saved(directory, transformers.DistilBertModel(transformers.DistilBertConfig(**TINY_DISTILBERT)))
    return directory, ref


def test_distilbert_encoder_matches_transformers(distilbert_dir):
    directory, ref = distilbert_dir
    ours = mbk.import_checkpoint(directory)
    assert (ours.config["type_vocab_size"], ours.config["classifier_activation"]) == (0, False)
    check_encoder(ours, ref, token_types=0)


def test_distilbert_keeps_its_fixed_layer_norm_epsilon_whatever_the_config_says(tmp_path):
    # DistilBERT's LayerNorms are built with eps=1e-12 and read no field; a config carrying layer_norm_eps (kept by
    # DistilBertConfig like any keyword) was imported with it and answered otherwise than transformers.
    config = transformers.DistilBertConfig(**TINY_DISTILBERT, layer_norm_eps=0.5)
    ref = saved(tmp_path, transformers.DistilBertModel(config), seed=3)
    assert json.loads((tmp_path / "config.json").read_text())["layer_norm_eps"] == 0.5
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["layer_norm_epsilon"] == 1e-12
    check_encoder(ours, ref, token_types=0)


# === ELECTRA: embedding-wide tables, LayerNorm, then embeddings_project; no pooler ===

@pytest.mark.parametrize("embedding_size", [16, 32], ids=["projected", "unprojected"])
def test_electra_encoder_matches_transformers(tmp_path, embedding_size):
    config = transformers.ElectraConfig(**{**TINY_ELECTRA, "embedding_size": embedding_size})
    ref = saved(tmp_path, transformers.ElectraModel(config))
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["embedding_projection"] == "after_norm"
    check_encoder(ours, ref)
    out = run_encoder(ours, family_inputs(1, 4))
    np.testing.assert_array_equal(out["pooled_output"], out["sequence_output"][:, 0])  # no pooler


# === ALBERT: factorized embeddings, layer groups shared across blocks ===


@pytest.mark.parametrize("groups", [1, 2])
def test_albert_encoder_matches_transformers(tmp_path, groups, caplog):
    ref = saved(tmp_path, transformers.AlbertModel(transformers.AlbertConfig(**TINY_ALBERT, num_hidden_groups=groups)))
    ours = mbk.import_checkpoint(tmp_path)
    assert "shares its layer weights" in caplog.text
    check_encoder(ours, ref, pooled=True)
    query = [block.attention.query.get_weights()[0] for block in ours.blocks]
    np.testing.assert_array_equal(query[0], query[1])  # a group's blocks hold one tensor's copies
    assert groups == 1 or not np.array_equal(query[0], query[-1])


def test_albert_with_several_layers_per_group_matches_transformers(tmp_path):
    # inner_group_num 2: each of the 4 steps runs its group's two layers in turn (it was refused): steps 0, 1 run
    # group 0 and 2, 3 group 1. (transformers runs it only with at least inner_group_num steps per group.)
    config = transformers.AlbertConfig(**TINY_ALBERT, num_hidden_groups=2, inner_group_num=2)
    ref = saved(tmp_path, transformers.AlbertModel(config), seed=2)
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["num_layers"] == 8
    check_encoder(ours, ref, pooled=True)
    query = [block.attention.query.get_weights()[0] for block in ours.blocks]
    np.testing.assert_array_equal(query[0], query[2])  # group 0, inner layer 0 at steps 0 and 1
    assert not np.array_equal(query[0], query[1]) and not np.array_equal(query[2], query[4])


# === RoBERTa / XLM-R: positions from pad_token_id + 1 ===

@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("roberta")
    ref = saved(directory, transformers.RobertaModel(transformers.RobertaConfig(**TINY_ROBERTA)))
    return directory, ref


def test_roberta_encoder_matches_transformers_with_offset_positions(roberta_dir):
    directory, ref = roberta_dir
    ours = mbk.import_checkpoint(directory)
    assert ours.config["position_offset"] == 2
    assert max_positions(ours.config) == 64  # 66 rows, the first two never read
    check_encoder(ours, ref, token_types=1, pad_id=1, pooled=True)
    # The longest input the table takes reads its last row, as the reference does.
    inputs = family_inputs(1, 64, pad_id=1, token_types=1)
    compare(run_encoder(ours, inputs)["sequence_output"], reference(ref, inputs).last_hidden_state.numpy())


def test_the_position_offset_survives_save_and_load(roberta_dir, tmp_path):
    directory, _ = roberta_dir
    ours = mbk.import_checkpoint(directory)
    mbk.save(ours, tmp_path / "saved")
    loaded = mbk.load(tmp_path / "saved")
    assert loaded.config["position_offset"] == 2
    inputs = family_inputs(2, 9, pad_id=1, token_types=1)
    np.testing.assert_array_equal(run_encoder(loaded, inputs)["sequence_output"],
                                  run_encoder(ours, inputs)["sequence_output"])
    assert mbk.build("tiny-bert").config["position_offset"] == 0  # every other encoder: unchanged
    with pytest.raises(ConfigError, match="position_offset=64 leaves no row of the 64-row position table"):
        Encoder(vocab_size=VOCAB, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=37,
                max_position_embeddings=64, position_offset=64)


def test_xlm_roberta_encoder_matches_transformers(tmp_path):
    ref = saved(tmp_path, transformers.XLMRobertaModel(transformers.XLMRobertaConfig(**TINY_ROBERTA)), seed=3)
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["position_offset"] == 2
    check_encoder(ours, ref, token_types=1, pad_id=1, pooled=True)


# === MPNet: RoBERTa's positions, no token types, a bucketed relative-position bias in every layer ===

@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mpnet")
    ref = saved(directory, transformers.MPNetModel(transformers.MPNetConfig(**TINY_MPNET)), seed=5)
    return directory, ref


def test_mpnet_buckets_are_transformers_own():
    # float32 rounding decides the buckets of distances 16, 32 and 64, where the log term is an integer.
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    distance = torch.arange(-600, 601)
    expected = MPNetEncoder.relative_position_bucket(distance).numpy()
    np.testing.assert_array_equal(relative_buckets(distance.numpy()), expected)


def test_mpnet_encoder_matches_transformers(mpnet_dir):
    directory, ref = mpnet_dir
    ours = mbk.import_checkpoint(directory)
    config = ours.config
    assert (config["attention_bias"], config["position_offset"], config["type_vocab_size"]) == ("relative_buckets", 2, 0)
    check_encoder(ours, ref, token_types=0, pad_id=1, pooled=True)
    # The longest input: distances up to 63 reach the logarithmic buckets.
    inputs = family_inputs(1, 64, pad_id=1, token_types=0)
    compare(run_encoder(ours, inputs)["sequence_output"], reference(ref, inputs, 0).last_hidden_state.numpy())
    tables = [block.attention.relative_attention_bias.get_weights()[0] for block in ours.blocks]
    np.testing.assert_array_equal(tables[0], tables[1])  # every block holds a copy of the one table
    np.testing.assert_array_equal(tables[0], ref.encoder.relative_attention_bias.weight.detach().numpy())


@pytest.mark.slow  # 10 s of conversion; the default tier is over budget
def test_mpnet_bias_converts_to_tflite_with_a_dynamic_length(mpnet_dir):
    import tensorflow as tf

    ours = mbk.import_checkpoint(mpnet_dir[0])
    spec = [tf.TensorSpec([1, None], tf.int32, name=name) for name in ("input_ids", "attention_mask")]
    forward = tf.function(lambda ids, mask: ours({"input_ids": ids, "attention_mask": mask,
                                                  "token_type_ids": tf.zeros_like(ids)})["sequence_output"],
                          input_signature=spec)
    blob = tf.lite.TFLiteConverter.from_concrete_functions([forward.get_concrete_function()], ours).convert()
    interpreter = tf.lite.Interpreter(model_content=blob)
    for length in (3, 40):
        inputs = family_inputs(1, length, pad_id=1, token_types=0, seed=length)
        runner = interpreter.get_signature_runner()
        got = list(runner(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).values())[0]
        compare(got, run_encoder(ours, inputs)["sequence_output"])


# === DeBERTa-v2/v3: disentangled attention over log-bucketed relative positions ===

@pytest.fixture(scope="module")
def deberta_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("deberta")
    ref = saved(directory, transformers.DebertaV2Model(transformers.DebertaV2Config(**TINY_DEBERTA)), seed=8)
    return directory, ref


@pytest.mark.parametrize("buckets,longest", [(256, 512), (8, 64), (16, 64), (6, 33)])
def test_deberta_buckets_are_transformers_own(buckets, longest):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    relative = torch.arange(-1500, 1501)
    expected = make_log_bucket_position(relative, buckets, longest).long().numpy()
    np.testing.assert_array_equal(log_bucket_positions(relative.numpy(), buckets, longest), expected)


def test_deberta_v2_encoder_matches_transformers(deberta_dir):
    directory, ref = deberta_dir
    ours = mbk.import_checkpoint(directory)
    config = ours.config
    assert (config["attention_bias"], config["position_embedding_type"], config["type_vocab_size"]) == \
        ("disentangled", "none", 0)
    assert (config["position_buckets"], config["max_relative_positions"], config["disentangled_terms"]) == \
        (8, 64, "c2p_p2c")
    diffs = [check_encoder(ours, ref, token_types=0)]
    # The longest input and a padded long batch: distances up to 63 read the logarithmic buckets.
    for batch, seq, pad in ((1, 64, 0), (2, 40, 9)):
        inputs = family_inputs(batch, seq, pad, token_types=0, seed=seq)
        diffs.append(compare(run_encoder(ours, inputs)["sequence_output"],
                             reference(ref, inputs, 0).last_hidden_state.numpy(),
                             mask=inputs["attention_mask"] if pad else None))
    print(f"deberta-v2 max |ours - transformers| {max(diffs):.2e}")
    assert max(diffs) <= 1e-4
    tables = [block.attention.rel_embeddings.get_weights()[0] for block in ours.blocks]
    np.testing.assert_array_equal(tables[0], tables[1])  # every block holds a copy of the one table
    np.testing.assert_array_equal(tables[0], ref.encoder.rel_embeddings.weight.detach().numpy())


def test_a_deberta_v2_encoder_survives_save_and_load(deberta_dir, tmp_path):
    ours = mbk.import_checkpoint(deberta_dir[0])
    loaded = mbk.load(mbk.save(ours, tmp_path / "saved"))
    assert loaded.config["attention_bias"] == "disentangled" and loaded.config["position_buckets"] == 8
    inputs = family_inputs(2, 30, 4, token_types=0)
    np.testing.assert_array_equal(run_encoder(loaded, inputs)["sequence_output"],
                                  run_encoder(ours, inputs)["sequence_output"])


@pytest.mark.parametrize("changes", [
    {"position_buckets": -1, "max_relative_positions": 20},  # the clamped distance itself, no buckets
    {"pos_att_type": "c2p", "norm_rel_ebd": "none"},  # the older string form; no norm on the table
    {"pos_att_type": ["p2c"], "position_biased_input": True, "type_vocab_size": 2},  # absolute positions too
], ids=["unbucketed", "c2p", "p2c-absolute"])
def test_deberta_v2_variants_match_transformers(tmp_path, changes):
    ref = saved(tmp_path, transformers.DebertaV2Model(transformers.DebertaV2Config(**{**TINY_DEBERTA, **changes})),
                seed=9)
    ours = mbk.import_checkpoint(tmp_path)
    types = changes.get("type_vocab_size", 0)
    check_encoder(ours, ref, token_types=types)
    inputs = family_inputs(1, 64, token_types=types)
    compare(run_encoder(ours, inputs)["sequence_output"], reference(ref, inputs, types).last_hidden_state.numpy())
# === ModernBERT: pre-norm blocks, rotary positions, local sliding-window layers, GeGLU, no biases ===
# The tiny checkpoints of tests/tokenizer_fixtures.py: three layers, the middle one local with a 4-token window,
# RoBERTa's byte-level BPE (padding id 1), the reference in eager (padded) attention.

MODERNBERT_SHAPES = ((1, 5, 0), (2, 16, 0), (3, 14, 6))  # (batch, seq, pad_last): 14 and 16 reach past the window


@pytest.fixture(scope="module")
def modernbert_dirs(tmp_path_factory):
    """``{kind: (directory, reference)}``: the plain model and sequence classifiers pooling cls and mean."""
    from tests.tokenizer_fixtures import save_checkpoint

    out = {}
    for kind, head, changes in (("model", None, {}), ("cls", "classification", {"classifier_pooling": "cls"}),
                                ("mean", "classification", {"classifier_pooling": "mean"})):
        directory = tmp_path_factory.mktemp(f"modernbert-{kind}")
        out[kind] = directory, save_checkpoint("modernbert", directory, head=head, seed=11, **changes)
    return out


def modernbert_inputs(batch, seq, pad, seed):
    return family_inputs(batch, seq, pad, pad_id=1, token_types=0, seed=seed)


def test_modernbert_encoder_matches_transformers(modernbert_dirs, tmp_path, capsys):
    directory, ref = modernbert_dirs["model"]
    assert ref.config._attn_implementation == "eager"
    proc = _mbk_import(capsys, directory, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    ours = mbk.load(tmp_path / "out")
    config = ours.config
    assert (config["block_layout"], config["feed_forward_type"], config["position_embedding_type"]) == \
        ("pre_norm", "gated", "rotary")
    assert (config["local_attention_window"], config["global_attention_every_n_layers"]) == (4, 2)
    assert [block.attention.attention_window for block in ours.blocks] == [0, 4, 0]
    assert [block.attention.rotary_theta for block in ours.blocks] == [160000.0, 10000.0, 160000.0]
    assert ours.blocks[0].attention_norm is None and ours.blocks[1].attention_norm is not None
    assert not any(path.endswith(("beta", "bias")) for path in named_weights(ours))  # no biases
    diffs = []
    for batch, seq, pad in MODERNBERT_SHAPES:
        inputs = modernbert_inputs(batch, seq, pad, seed=batch * 100 + seq)
        expected = reference(ref, inputs, token_types=0).last_hidden_state.numpy()
        got = run_encoder(ours, inputs)["sequence_output"]
        diffs.append(compare(got, expected, mask=inputs["attention_mask"] if pad else None))
    assert max(diffs) <= 1e-5 * 10  # ~1e-6 measured at outputs of magnitude ~3
    # The window is what the local layer computes: without it, 16 tokens come out otherwise.
    inputs = modernbert_inputs(1, 16, 0, seed=3)
    unwindowed = mbk.import_checkpoint(directory, local_attention_window=0)
    expected = reference(ref, inputs, token_types=0).last_hidden_state.numpy()
    assert np.abs(run_encoder(unwindowed, inputs)["sequence_output"] - expected).max() > 1e-2


def test_modernbert_unpadded_reference_agrees_with_the_padded_one(modernbert_dirs):
    # transformers' sdpa path (what users run on CPU) and eager give the same real-token outputs that we match.
    directory, ref = modernbert_dirs["model"]
    sdpa = transformers.AutoModel.from_pretrained(str(directory), attn_implementation="sdpa").eval()
    inputs = modernbert_inputs(3, 14, 6, seed=5)
    mask = inputs["attention_mask"].astype(bool)
    np.testing.assert_allclose(reference(sdpa, inputs, 0).last_hidden_state.numpy()[mask],
                               reference(ref, inputs, 0).last_hidden_state.numpy()[mask], atol=1e-5)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_modernbert_sequence_classifier_matches_transformers(modernbert_dirs, tmp_path, capsys, pooling):
    directory, ref = modernbert_dirs[pooling]
    proc = _mbk_import(capsys, directory, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    ours = mbk.load(tmp_path / "out")
    assert ours.architecture == "sequence_classifier"
    encoder = ours.encoder.config
    assert (encoder["pooler_input"], encoder["pooler_norm"], encoder["pooler_activation"]) == \
        ({"cls": "first_token", "mean": "mean"}[pooling], True, "gelu")
    diffs = []
    for batch, seq, pad in MODERNBERT_SHAPES:
        inputs = modernbert_inputs(batch, seq, pad, seed=batch + seq)
        expected = reference(ref, inputs, token_types=0).logits.numpy()
        diffs.append(compare(run_encoder(ours, inputs)["logits"], expected))
    assert max(diffs) <= 1e-5 * 10


@pytest.mark.parametrize("head", ["token_classification", "question_answering"])
def test_modernbert_token_and_span_heads_match_transformers(tmp_path, capsys, head):
    """ModernBertForTokenClassification / ...ForQuestionAnswering run the prediction head (dense + GELU + norm)
    on every token before their classifier (they were refused): our pooler on every token, padded and natural."""
    from tests.tokenizer_fixtures import save_checkpoint

    ref = save_checkpoint("modernbert", tmp_path / "hf", head=head, seed=13)
    proc = _mbk_import(capsys, tmp_path / "hf", tmp_path / "out")  # head "auto": from the checkpoint
    assert proc.returncode == 0, proc.stderr
    ours = mbk.load(tmp_path / "out")
    assert ours.architecture == {"token_classification": "token_classifier",
                                 "question_answering": "span_question_answerer"}[head]
    assert ours.encoder.config["pooler_input"] == "every_token"
    names = ("logits",) if head == "token_classification" else ("start_logits", "end_logits")
    diffs = []
    for batch, seq, pad in MODERNBERT_SHAPES:
        inputs = modernbert_inputs(batch, seq, pad, seed=batch + seq)
        expected, got = reference(ref, inputs, token_types=0), run_encoder(ours, inputs)
        mask = inputs["attention_mask"] if pad else None
        diffs += [compare(got[name], getattr(expected, name).numpy(), mask=mask) for name in names]
    assert max(diffs) <= 1e-5 * 10


@pytest.mark.parametrize("options,match", [
    ({"feed_forward_type": "gated"}, "feed_forward_type='gated' applies to block_layout='pre_norm'"),
    ({"norm_use_bias": False}, "norm_use_bias=False applies to block_layout='pre_norm'"),
    ({"local_attention_window": 4}, "local_attention_window applies to position_embedding_type='rotary'"),
    ({"block_layout": "pre_norm", "num_feedforward_networks": 2}, "block_layout='pre_norm' .* num_feedforward_networks=1"),
    ({"position_embedding_type": "rotary", "attention_type": "composite"}, "rotary' apply to attention_type='self_attention'"),
    ({"pooler_input": "max"}, "unknown pooler_input 'max'"),
])
def test_modernbert_options_are_refused_where_no_layout_builds_them(options, match):
    with pytest.raises(ConfigError, match=match):
        Encoder(vocab_size=VOCAB, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=37, **options)


def test_the_modernbert_options_leave_every_other_encoder_unchanged():
    bert = mbk.build("tiny-bert")
    block = bert.blocks[0]
    assert (block.block_layout, block.feed_forward_type, block.attention.fused_qkv) == ("post_norm", "dense", False)
    assert "use_bias" not in block.attention.get_config() and bert.config["pooler_input"] == "first_token"
    assert not any("final_norm" in path or "pooler_norm" in path for path in named_weights(bert))


def _cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_modernbert_exports_onnx_and_dynamic_tflite_with_an_open_length(modernbert_dirs, tmp_path, capsys, pooling):
    import onnxruntime as ort

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.cli.main import main

    directory, ref = modernbert_dirs[pooling]
    onnx_file, tflite_file = tmp_path / "m.onnx", tmp_path / "m.tflite"
    assert main(["export", str(directory), "--format", "onnx", "--out", str(onnx_file)]) == 0, capsys.readouterr().err
    assert main(["export", str(directory), "--format", "tflite", "--quantize", "dynamic", "--out",
                 str(tflite_file)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    inputs = modernbert_inputs(4, 15, 7, seed=21)  # rows of 15 and 8 real tokens, past the 4-token window
    expected = reference(ref, inputs, token_types=0).logits.numpy()

    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in session.get_inputs()) == ["attention_mask", "input_ids"]
    assert all(i.shape[1] != 15 and not isinstance(i.shape[1], int) for i in session.get_inputs())  # open length
    feeds = {k: inputs[k].astype(np.int64) for k in ("input_ids", "attention_mask")}
    logits = session.run(["logits"], feeds)[0]
    assert _cosines(logits, expected).min() >= 0.9999

    runner = ArtifactRunner(tflite_file)
    assert [spec["shape"] for spec in runner.input_specs] == [[1, None]] * 3
    probabilities = []
    for row in range(4):  # each sentence at its own length: the file's sequence axis is open
        real = int(inputs["attention_mask"][row].sum())
        one = {k: inputs[k][row:row + 1, :real] for k in ("input_ids", "attention_mask", "token_type_ids")}
        probabilities.append(runner.run(one)["probability"][0])
    softmax = np.exp(expected - expected.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    assert _cosines(np.array(probabilities), softmax).min() >= 0.99


@pytest.mark.parametrize("axes", [[], ["--static-axes"]])
def test_modernbert_exports_full_int8_that_runs_and_agrees_with_transformers(modernbert_dirs, tmp_path, capsys, axes):
    """Full int8 failed in both layouts: the open-length file in calibration (the calibrator resizes one input
    at a time; nothing in the graph waited for all three, PositionClip's GATHER now does), the static file in
    XNNPACK's preparation (V, one output of the fused qkv SPLIT, made symmetric alone by int8_graph)."""
    from mobilebert_kit.artifacts.reader import read_tflite_bytes
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.cli.main import main

    directory, ref = modernbert_dirs["cls"]
    out = tmp_path / "m.tflite"
    code = main(["export", str(directory), "--format", "tflite", "--quantize", "int8", "--out", str(out), *axes])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert "PASSED" in said.out and "symmetric int8" in said.out, said.out
    graph = read_tflite_bytes(out.read_bytes())
    splits = [op for op in graph.ops if op["type"] == "SPLIT"]
    assert len(splits) == 6  # per layer the fused qkv and GeGLU; SPLIT's int8 kernel copies bytes: one scale
    for op in splits:
        params = {str(graph.tensors[t].get("quantization")) for t in [op["inputs"][1], *op["outputs"]]}
        assert len(params) == 1, params
    inputs = modernbert_inputs(4, 15, 7, seed=21)
    expected = reference(ref, inputs, token_types=0).logits.numpy()
    softmax = np.exp(expected - expected.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    runner = ArtifactRunner(out)
    probabilities = []
    for row in range(4):  # the open file at each row's own length, the static one padded
        real = int(inputs["attention_mask"][row].sum()) if not axes else 15
        one = {k: inputs[k][row:row + 1, :real] for k in ("input_ids", "attention_mask", "token_type_ids")}
        if axes:
            one = {k: np.pad(v, [[0, 0], [0, 64 - real]], constant_values=1 if k == "input_ids" else 0)
                   for k, v in one.items()}
        probabilities.append(runner.run(one)["probability"][0])
    cosines = _cosines(np.array(probabilities), softmax)
    print("int8 cosines to transformers", axes, cosines)
    assert cosines.min() >= 0.98  # 0.991 measured


def test_modernbert_full_int8_is_judged_by_the_task_metric_gate(modernbert_dirs, tmp_path, capsys):
    """--eval-data scores a byte-level BPE file with the checkpoint's tokenizer (it carries none: the gate was
    refused, asking for a --tokenizer export has not). The tiny random classifier's labels are transformers'
    own answers; full int8 either holds 99% of the float accuracy or --quantize auto refuses in one line."""
    from importlib import resources

    from mobilebert_kit.cli.main import main

    directory, ref = modernbert_dirs["cls"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory))
    text = resources.files("mobilebert_kit.convert.plan").joinpath("sentences.txt").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and "\t" not in line][:48]
    with torch.no_grad():
        answers = ref(**tokenizer(lines, padding=True, return_tensors="pt")).logits.argmax(-1).tolist()
    data = tmp_path / "eval.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"{line}\t{ref.config.id2label[a]}\n" for line, a in
                                                   zip(lines, answers)), encoding="utf-8")
    out = tmp_path / "m.tflite"
    assert main(["export", str(directory), "--format", "tflite", "--quantize", "int8", "--eval-data", str(data),
                 "--out", str(out)]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert "note: accuracy " in said, said
    code = main(["export", str(directory), "--format", "tflite", "--quantize", "auto", "--eval-data", str(data),
                 "--out", str(tmp_path / "auto.tflite")])
    err = capsys.readouterr().err.strip().splitlines()
    if code == 0:
        report = json.loads((tmp_path / "auto.tflite.report.json").read_text())
        chosen = [row for row in report["search"]["frontier"] if row["passed"]]
        assert chosen and all(row["drop"] <= 0.01 for row in chosen), report["search"]
    else:
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith("mbk export: error: --quantize auto: no setting held accuracy") and "int8 0." in err[0]


def test_a_modernbert_export_is_not_ready_for_mediapipe_and_inspect_says_why(modernbert_dirs, tmp_path, capsys):
    from mobilebert_kit.cli.main import main

    tflite_file = tmp_path / "m.tflite"
    assert main(["export", str(modernbert_dirs["cls"][0]), "--format", "tflite", "--out", str(tflite_file)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(tflite_file)]) == 0
    said = capsys.readouterr().out
    assert "not ready for MediaPipe TextClassifier" in said and "byte-level BPE" in said, said


def test_a_modernbert_sentence_encoder_exports_its_mean_pooled_embedding(tmp_path, capsys):
    pytest.importorskip("sentence_transformers")
    import onnxruntime as ort

    from mobilebert_kit.cli.main import main
    from tests.tokenizer_fixtures import save_sentence_encoder

    model = save_sentence_encoder("modernbert", tmp_path / "st", seed=4)
    onnx_file = tmp_path / "e.onnx"
    assert main(["export", str(tmp_path / "st"), "--format", "onnx", "--out", str(onnx_file)]) == 0, \
        capsys.readouterr().err
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "st"))
    texts = ["a short one", "Please book a table for four at seven tonight, by the window if you can."]
    feeds = {k: v.astype(np.int64) for k, v in tokenizer(texts, padding=True, return_tensors="np").items()}
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    embedding = session.run(["sentence_embedding"], feeds)[0]
    assert _cosines(embedding, model.encode(texts)).min() >= 0.9999


# === Task heads: every family x head against the transformers task model ===

# family -> (transformers class prefix, config class, tiny config, token types, pad id)
FAMILY_MODELS = {
    "distilbert": ("DistilBert", "DistilBertConfig", TINY_DISTILBERT, 0, 0),
    "electra": ("Electra", "ElectraConfig", TINY_ELECTRA, 2, 0),
    "albert": ("Albert", "AlbertConfig", TINY_ALBERT, 2, 0),
    "roberta": ("Roberta", "RobertaConfig", TINY_ROBERTA, 1, 1),
    "xlm-roberta": ("XLMRoberta", "XLMRobertaConfig", TINY_ROBERTA, 1, 1),
    "mpnet": ("MPNet", "MPNetConfig", TINY_MPNET, 0, 1),
    "deberta-v2": ("DebertaV2", "DebertaV2Config", TINY_DEBERTA, 0, 0),
    "convbert": ("ConvBert", "ConvBertConfig", TINY_CONVBERT, 2, 0),
}
# our head -> (transformers class suffix, labels, our outputs -> theirs)
HEADS = {
    "sequence_classifier": ("ForSequenceClassification", 3, {"logits": "logits"}),
    "token_classifier": ("ForTokenClassification", 5, {"logits": "logits"}),
    "span_question_answerer": ("ForQuestionAnswering", 2, {"start_logits": "start_logits", "end_logits": "end_logits"}),
}
# The activation of the classification head each family's pooler stands for (transformers' source).
POOLER_ACTIVATIONS = {"distilbert": "relu", "electra": "gelu", "deberta-v2": "gelu",  # DeBERTa: ContextPooler
                      "convbert": "gelu_tanh"}  # ConvBERT: its hidden_act (gelu_new)


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("family", list(FAMILY_MODELS))
def test_task_heads_import_with_their_logits(tmp_path, family, head):
    prefix, config_class, tiny, token_types, pad_id = FAMILY_MODELS[family]
    suffix, labels, outputs = HEADS[head]
    config = getattr(transformers, config_class)(**tiny, num_labels=labels)
    ref = saved(tmp_path, getattr(transformers, prefix + suffix)(config), seed=1)
    ours = mbk.import_checkpoint(tmp_path, head="auto")
    assert ours.architecture == head
    if head == "sequence_classifier":
        encoder = ours.encoder.config
        assert encoder["classifier_activation"] is True
        assert encoder["pooler_activation"] == POOLER_ACTIVATIONS.get(family, "tanh")
    check_head(ours, ref, outputs, token_types=token_types, pad_id=pad_id)


def test_a_relu_pooler_survives_save_and_load(tmp_path):
    config = transformers.DistilBertConfig(**TINY_DISTILBERT, num_labels=3)
    saved(tmp_path / "hf", transformers.DistilBertForSequenceClassification(config), seed=2)
    ours = mbk.import_checkpoint(tmp_path / "hf", head="sequence_classifier")
    mbk.save(ours, tmp_path / "saved")
    loaded = mbk.load(tmp_path / "saved")
    assert loaded.encoder.config["pooler_activation"] == "relu"
    inputs = family_inputs(2, 7, token_types=0)
    np.testing.assert_array_equal(run_encoder(loaded, inputs)["logits"], run_encoder(ours, inputs)["logits"])
    with pytest.raises(ConfigError, match="unknown pooler_activation 'swish'"):
        Encoder(vocab_size=VOCAB, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=37,
                pooler_activation="swish")


# === No silently wrong import: a config that names another family ===

def _mbk_import(capsys, source, out):
    """``mbk import SOURCE --out OUT`` in this process: (exit code, stderr)."""
    from mobilebert_kit.cli.main import main

    code = main(["import", str(source), "--out", str(out)])
    captured = capsys.readouterr()
    return type("Proc", (), {"returncode": code, "stdout": captured.out, "stderr": captured.err})


def _relabel(directory, **changes):
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **changes}))


def test_roberta_weights_under_a_bert_config_are_refused_in_one_line(tmp_path, capsys):
    config = transformers.RobertaConfig(**TINY_ROBERTA)
    saved(tmp_path / "prefixed", transformers.RobertaForMaskedLM(config), randomized=False)
    # Relabelled thoroughly (architectures too): the weights still tell.
    _relabel(tmp_path / "prefixed", model_type="bert", architectures=["BertForMaskedLM"])
    proc = _mbk_import(capsys, tmp_path / "prefixed", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_error(proc, "says model_type 'bert'", "'roberta.'", '"model_type"', "roberta / xlm-roberta")
    # A base model has no prefix: its position table, pad_token_id + 1 rows longer than BERT's, tells.
    saved(tmp_path / "table", transformers.RobertaModel(config), randomized=False)
    _relabel(tmp_path / "table", model_type="bert", max_position_embeddings=64, architectures=["BertModel"])
    proc = _mbk_import(capsys, tmp_path / "table", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_error(proc, "position table has 66 rows", '"model_type"', "(roberta or xlm-roberta or mpnet)")
    # With the table's own length in the config, its padding row (zeros, never trained) tells.
    _relabel(tmp_path / "table", max_position_embeddings=66)
    proc = _mbk_import(capsys, tmp_path / "table", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_error(proc, "row pad_token_id (1) of its position table is all zeros", '"model_type"')
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def xlmr_as_bert(tmp_path_factory):
    """An XLM-R base model relabelled ``model_type: bert`` (its config's ``architectures`` left as saved), its
    table's length in the config, trained weights (no zero padding row to give it away)."""
    directory = tmp_path_factory.mktemp("xlmr_as_bert")
    saved(directory, transformers.XLMRobertaModel(transformers.XLMRobertaConfig(**TINY_ROBERTA)), seed=6)
    _relabel(directory, model_type="bert")
    return directory


def test_an_xlm_r_checkpoint_relabelled_bert_is_refused_by_its_architectures(xlmr_as_bert, tmp_path, capsys):
    proc = _mbk_import(capsys, xlmr_as_bert, tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_error(proc, "says model_type 'bert'", "XLMRobertaModel, a xlm-roberta class", '"model_type"')
    assert not (tmp_path / "out").exists()


def test_a_roberta_tokenizer_under_a_bert_config_is_refused(xlmr_as_bert, tmp_path, capsys):
    import shutil

    shutil.copytree(xlmr_as_bert, tmp_path / "src")
    _relabel(tmp_path / "src", architectures=["BertModel"])
    (tmp_path / "src" / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "RobertaTokenizerFast"}))
    proc = _mbk_import(capsys, tmp_path / "src", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_error(proc, "says model_type 'bert'", "tokenizer is RobertaTokenizerFast", "(roberta or xlm-roberta)")
    assert not (tmp_path / "out").exists()


def test_relabelled_through_and_through_trained_xlm_r_weights_pass_as_bert(xlmr_as_bert, tmp_path):
    # Documented limit: architectures rewritten too, XLM-R's tokenizer (which BERT checkpoints such as
    # paraphrase-multilingual-MiniLM are published with), the table's length in the config and a trained
    # padding row: nothing tells RoBERTa's layout from BERT's (type_vocab_size 1 is a BERT option too).
    import shutil

    shutil.copytree(xlmr_as_bert, tmp_path / "src")
    _relabel(tmp_path / "src", architectures=["BertModel"])
    (tmp_path / "src" / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "XLMRobertaTokenizer"}))
    assert mbk.import_checkpoint(tmp_path / "src").config["position_offset"] == 0


@pytest.mark.parametrize("family,tokenizer", [("distilbert", "BertTokenizerFast"), ("electra", "BertTokenizer"),
                                              ("roberta", "XLMRobertaTokenizer")])
def test_a_tokenizer_the_family_is_published_with_is_accepted(tmp_path, family, tokenizer):
    prefix, config_class, tiny, _, _ = FAMILY_MODELS[family]
    saved(tmp_path, getattr(transformers, prefix + "Model")(getattr(transformers, config_class)(**tiny)))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": tokenizer}))
    assert mbk.import_checkpoint(tmp_path).config["vocab_size"] == VOCAB


def _tokenizer_files(directory, pad_id):
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "RobertaTokenizer",
                                                                  "pad_token": "<pad>"}))
    (directory / "tokenizer.json").write_text(json.dumps({
        "added_tokens": [{"id": pad_id, "content": "<pad>"}, {"id": 2, "content": "</s>"}],
        "model": {"type": "BPE", "vocab": {"<pad>": pad_id, "</s>": 2}},
    }))


def test_a_tokenizer_padding_with_another_id_than_the_positions_is_refused(roberta_dir, tmp_path):
    import shutil

    shutil.copytree(roberta_dir[0], tmp_path / "ckpt")
    _tokenizer_files(tmp_path / "ckpt", pad_id=0)
    with pytest.raises(CheckpointError, match=r"pads with '<pad>' \(id 0\) but roberta numbers positions from the "
                                              r"padding id 1") as info:
        mbk.import_checkpoint(tmp_path / "ckpt")
    assert "\n" not in str(info.value)
    _tokenizer_files(tmp_path / "ckpt", pad_id=1)
    assert mbk.import_checkpoint(tmp_path / "ckpt").config["position_offset"] == 2


DEBERTA_V3_CONFIG = dict(TINY_DEBERTA, model_type="deberta-v2")


@pytest.mark.parametrize("config,match", [
    ({"model_type": "roberta", "max_position_embeddings": 2, "pad_token_id": 1},
     r"max_position_embeddings \(2\) leaves no position: roberta numbers positions from 2"),
    ({"model_type": "mpnet", "relative_attention_num_buckets": 64},
     "relative_attention_num_buckets 64 differs from the 32 buckets"),
    ({"model_type": "deberta"}, r"DeBERTa \(v1\) uses disentangled attention.*'deberta-v2'.*optimum"),
    ({**DEBERTA_V3_CONFIG, "conv_kernel_size": 3}, "conv_kernel_size 3 adds DeBERTa-v2-xlarge's convolution.*optimum"),
    ({**DEBERTA_V3_CONFIG, "share_att_key": False}, "share_att_key is not true.*pos_key_proj"),
    ({**DEBERTA_V3_CONFIG, "relative_attention": False}, "relative_attention is not true"),
    ({**DEBERTA_V3_CONFIG, "attention_head_size": 16}, "attention_head_size 16 differs from 8"),
    ({**DEBERTA_V3_CONFIG, "pos_att_type": ["p2p"]}, "pos_att_type.*'c2p' and 'p2c'"),
    ({"model_type": "modernbert", "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
     "rope_scaling .* stretches ModernBERT's rotary positions"),
    ({"model_type": "modernbert", "classifier_pooling": "max"}, "classifier_pooling 'max' is not one of cls, mean"),
    ({"model_type": "modernbert", "local_attention": -4}, "local_attention must be between 0 and"),
])
def test_configs_mbk_cannot_import_faithfully_are_refused_in_one_line(tmp_path, config, match):
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match=match) as info:
        mbk.import_checkpoint(tmp_path)
    assert "\n" not in str(info.value)


def test_mbk_import_writes_a_saved_model_of_a_new_family(tmp_path, capsys):
    ref = saved(tmp_path / "electra", transformers.ElectraModel(transformers.ElectraConfig(**TINY_ELECTRA)), seed=4)
    proc = _mbk_import(capsys, tmp_path / "electra", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    check_encoder(mbk.load(tmp_path / "out"), ref)


def test_unsupported_model_type_lists_the_families(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="supported: mobilebert, bert, convbert, nezha, distilbert, electra, "
                                              "albert, roberta, xlm-roberta, mpnet, deberta-v2, modernbert"):
        mbk.import_checkpoint(tmp_path)


# === DeBERTa-v3 end to end: mbk import and export of a checkpoint with its own tokenizer ===

@pytest.mark.parametrize("head", ["classification", None], ids=["sequence_classifier", "model"])
def test_deberta_v3_checkpoint_imports_and_exports(tmp_path, capsys, head):
    import onnxruntime as ort

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.cli.main import main
    from mobilebert_kit.convert.plan.sample_text import SENTENCES
    from tests.tokenizer_fixtures import save_checkpoint

    source = tmp_path / "deberta-v3"
    model = save_checkpoint("deberta-v2", source, head=head, seed=11)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(source))
    texts = list(SENTENCES[:6]) + ["a long one: " + " ".join(SENTENCES[6:12])]  # up to 64 tokens: the log buckets
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="np")
    with torch.no_grad():
        out = model(**{k: torch.tensor(v) for k, v in encoded.items()})
    expected = out.logits.numpy() if head else out.last_hidden_state.numpy()[:, 0]

    proc = _mbk_import(capsys, source, tmp_path / "imported")
    assert proc.returncode == 0, proc.stderr
    onnx_file, tflite_file = tmp_path / "f.onnx", tmp_path / "f.tflite"
    task = [] if head else ["--task", "embedding", "--pooling", "cls"]
    for fmt, path, quantize in (("onnx", onnx_file, []), ("tflite", tflite_file, ["--quantize", "dynamic"])):
        code = main(["export", str(source), "--format", fmt, "--out", str(path), *quantize, *task])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    # ONNX as optimum users feed it: the tokenizer's arrays by name (no token types: DeBERTa-v3 has none).
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert sorted(names) == ["attention_mask", "input_ids"]
    got = session.run(["logits" if head else "sentence_embedding"], {k: encoded[k].astype(np.int64) for k in names})[0]
    onnx_cosine = _cosines(got, expected).min()
    # TFLite dynamic int8, one sentence at a time at its own length: the file's sequence is open.
    runner = ArtifactRunner(tflite_file)
    assert [spec["shape"] for spec in runner.input_specs] == [[1, None]] * 3
    rows = []
    for i in range(len(texts)):
        length = int(encoded["attention_mask"][i].sum())
        ids = encoded["input_ids"][i:i + 1, :length]
        result = runner.run({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
        rows.append(result["probability" if head else "sentence_embedding"][0])
    softmax = np.exp(expected - expected.max(-1, keepdims=True))
    reference_rows = softmax / softmax.sum(-1, keepdims=True) if head else expected
    tflite_cosine = _cosines(np.stack(rows), reference_rows).min()
    print(f"deberta-v3 {head or 'model'}: onnx min cosine {onnx_cosine:.7f}, tflite dynamic {tflite_cosine:.5f}")
    assert onnx_cosine >= 0.9999 and tflite_cosine >= 0.99


def test_a_fine_tuned_deberta_classifiers_encoder_loads_alone(tmp_path):
    # mbk finetune starts from the encoder of the checkpoint it is given: a DeBERTa sequence classifier's
    # ContextPooler (pooler.dense) is then a head weight, skipped, not "does not fit the model".
    from mobilebert_kit.sources.model_source import ModelSource
    from tests.tokenizer_fixtures import save_checkpoint

    save_checkpoint("deberta-v2", tmp_path / "clf")
    encoder = ModelSource.load(str(tmp_path / "clf"), head=None).encoder
    assert encoder.config["attention_bias"] == "disentangled" and not encoder.config["classifier_activation"]


# === A sequence head's problem type (transformers' problem_type), through import, save and export ===

@pytest.mark.parametrize("problem_type, output, answer", [
    ("multi_label_classification", "probability", lambda logits: 1 / (1 + np.exp(-logits))),
    ("regression", "score", lambda logits: logits),
])
def test_a_sequence_head_exports_what_its_problem_type_answers(tmp_path, capsys, problem_type, output, answer):
    """Multi-label: its users read sigmoid(logits) per label; the TFLite file gave a softmax over the labels (cosine
    0.88 to the sigmoids), silently. Regression of several targets: raw scores; it was exported as a classifier,
    a softmax over the scores."""
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.cli.main import main
    from mobilebert_kit.convert.plan.sample_text import SENTENCES
    from tests.tokenizer_fixtures import save_checkpoint

    model = save_checkpoint("bert", tmp_path / "hf", seed=5, problem_type=problem_type)  # three labels
    proc = _mbk_import(capsys, tmp_path / "hf", tmp_path / "saved")
    assert proc.returncode == 0, proc.stderr
    assert mbk.load(tmp_path / "saved").head_config["problem_type"] == problem_type  # survives import and load
    out = tmp_path / "m.tflite"
    assert main(["export", str(tmp_path / "saved"), "--format", "tflite", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    runner = ArtifactRunner(out)
    for text in SENTENCES[:4]:  # each at its own length
        ids = tokenizer(text, return_tensors="np")
        with torch.no_grad():
            logits = model(**{k: torch.tensor(v) for k, v in ids.items()}).logits.numpy()[0]
        got = runner.run({k: ids[k] for k in ("input_ids", "attention_mask", "token_type_ids")})[output][0]
        assert got.shape == (model.config.num_labels,)
        np.testing.assert_allclose(got, answer(logits), atol=1e-5)
