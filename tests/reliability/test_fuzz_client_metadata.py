"""Hostile TFLite Metadata and packed archives: the reader gives a result or one ArtifactError, in bounded time.

A model file comes from anywhere (a download, a colleague), and ``mbk inspect`` reads its ``TFLITE_METADATA``
flatbuffer and the zip archive after it. Truncations and byte flips (hypothesis), and crafted files: offsets
out of range, vectors and strings of absurd length, a zip bomb, a zip with thousands of entries, a zip64
record, a file packed twice. Anything but an ArtifactError would print "internal error"; anything unbounded
would hang ``mbk inspect`` or exhaust memory.
"""

import io
import struct
import time
import warnings
import zipfile

import flatbuffers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobilebert_kit.artifacts.client_metadata import LIMITS, ClientMetadata, packed_disagreements, parse_client_metadata
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.metadata_schema import SLOTS, TFLITE_METADATA
from mobilebert_kit.convert.tflite.metadata import client_metadata, pack_files

FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(60)]
META, FILES = client_metadata("classifier", ["probability"], VOCAB, ["neg", "pos"], name="m", description="d")
MODEL = b"TFL3" + bytes(range(256)) * 4  # stands in for the flatbuffer: the reader only needs the archive's bytes
PACKED = pack_files(MODEL, FILES)


def read_or_artifact_error(meta=META, packed=PACKED, budget_s=5.0):
    """Parses; an ArtifactError must be one line naming the file, and either must come within ``budget_s``."""
    start = time.monotonic()
    try:
        result = parse_client_metadata({TFLITE_METADATA: meta}, packed, "hostile.tflite")
    except ArtifactError as err:
        result = err
        assert "\n" not in str(err) and "hostile.tflite" in str(err), str(err)
    assert time.monotonic() - start < budget_s
    return result


def test_the_unbroken_file_reads():
    read = read_or_artifact_error()
    assert isinstance(read, ClientMetadata) and read.vocab_size == len(VOCAB) and read.label_count == 2
    assert read.blank_lines == {}
    gapped = _zip([("vocab.txt", b"[PAD]\n\n[UNK]\n\nlast"), ("labels.txt", b"neg\npos\n")])
    read = read_or_artifact_error(packed=gapped)
    assert read.vocab_size == 5 and read.blank_lines == {"vocab.txt": 2}  # the last line has no "\n" and counts


@FUZZ
@given(st.integers(0, len(META)))
def test_truncated_metadata(cut):
    assert isinstance(read_or_artifact_error(META[:cut]), (ClientMetadata, ArtifactError))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(META) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_metadata_with_flipped_bytes(flips):
    meta = bytearray(META)
    for index, value in flips:
        meta[index] = value
    assert isinstance(read_or_artifact_error(bytes(meta)), (ClientMetadata, ArtifactError))


@FUZZ
@given(st.integers(len(MODEL), len(PACKED)), st.lists(st.tuples(st.integers(len(MODEL), len(PACKED) - 1),
                                                                st.integers(0, 255)), max_size=8))
def test_truncated_or_flipped_archive(cut, flips):
    packed = bytearray(PACKED)
    for index, value in flips:
        packed[index] = value
    assert isinstance(read_or_artifact_error(packed=bytes(packed[:cut])), (ClientMetadata, ArtifactError))


@FUZZ
@given(st.binary(min_size=0, max_size=512))
def test_random_bytes_with_the_identifier(noise):
    assert isinstance(read_or_artifact_error(noise[:4] + b"M001" + noise[4:]), (ClientMetadata, ArtifactError))


def _model_metadata(subgraphs=1, tensors=1, name="m"):
    """A well-formed ModelMetadata whose vectors repeat one shared entry ``subgraphs`` / ``tensors`` times."""
    b = flatbuffers.Builder(1024)

    def table(kind, fields):
        b.StartObject(max(SLOTS[kind].values()) + 1)
        for key, offset in fields.items():
            b.PrependUOffsetTRelativeSlot(SLOTS[kind][key], offset, 0)
        return b.EndObject()

    def vector(offset, count):
        b.StartVector(4, count, 4)
        for _ in range(count):
            b.PrependUOffsetTRelative(offset)
        return b.EndVector()

    tensor = table("TensorMetadata", {"name": b.CreateString("ids")})
    sub = table("SubGraphMetadata", {"input_tensor_metadata": vector(tensor, tensors)})
    root = table("ModelMetadata", {"name": b.CreateString(name), "subgraph_metadata": vector(sub, subgraphs)})
    b.Finish(root, file_identifier=b"M001")
    return bytes(b.Output())


def _zip(entries):
    out = io.BytesIO()
    out.write(MODEL)
    with zipfile.ZipFile(out, "w") as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns when it writes a name twice, which one case wants
        for name, data in entries:
            archive.writestr(name, data)
    return out.getvalue()


def _bomb():
    """vocab.txt inflating to 64 MiB of newlines from about 64 KiB, written in chunks (never all in memory)."""
    out = io.BytesIO()
    out.write(MODEL)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("vocab.txt", "w") as stream:
            for _ in range(64):
                stream.write(b"\n" * (1 << 20))
    return out.getvalue()


def _with_zip64_locator(packed):
    end = packed.rfind(b"PK\x05\x06")
    return packed[:end] + b"PK\x06\x07" + bytes(16) + packed[end:]


def _patched(data, offset, value):
    return data[:offset] + struct.pack("<I", value) + data[offset + 4:]


@pytest.mark.parametrize("meta, packed, fragment", [
    (_model_metadata(subgraphs=100_000), PACKED, f"lists 100000 subgraphs in one ModelMetadata.subgraph_metadata, "
     f"over the {LIMITS['subgraphs']}"),
    (_model_metadata(tensors=1_000_000), PACKED, "lists 1000000 tensors"),
    (_model_metadata(name="x" * 5000), PACKED, "is 5000 bytes long, over the 4096"),
    (_patched(META, 0, 0xFFFFFFF0), PACKED, "is corrupt (offset"),  # the root table far outside the buffer
    (META[:4] + b"M002" + META[8:], PACKED, "is corrupt (no M001 identifier)"),
    (META, _zip([(f"f{i}.txt", b"x") for i in range(5000)]), "lists 5000 files"),
    (META, _bomb(), "vocab.txt is 67108864 bytes, over the 16777216"),
    (META, _with_zip64_locator(PACKED), "zip64 archive"),
    (META, _zip([("vocab.txt", b"a\n"), ("vocab.txt", b"b\n")]), "holds 'vocab.txt' more than once"),
    (META, PACKED[:-30] + PACKED[-22:], "packed archive is corrupt"),
])
def test_crafted_hostile_files_are_one_bounded_error(meta, packed, fragment):
    err = read_or_artifact_error(meta, packed, budget_s=2.0)
    assert isinstance(err, ArtifactError) and fragment in str(err), err


def test_a_bomb_that_hides_its_size_is_read_no_further_than_it_claims():
    # The central directory claims 100 bytes for 64 MiB of deflated newlines: the read stops at the claim and
    # the checksum fails, instead of inflating everything.
    bomb = _bomb()
    entry = bomb.rfind(b"PK\x01\x02")
    err = read_or_artifact_error(META, _patched(bomb, entry + 24, 100), budget_s=2.0)
    assert isinstance(err, ArtifactError) and "packed archive is corrupt" in str(err), err


_LINES = st.lists(st.text(st.sampled_from(["w", "1", "[", "]", "é", "\u200b", "\r", " "]), max_size=4), max_size=70)


@FUZZ
@given(_LINES, _LINES, st.none() | st.integers(-1, 80) | st.text(max_size=2))
def test_packed_files_against_what_the_model_records(packed_vocab, packed_labels, rows):
    # issue 37: whatever the packed vocab.txt and labels.txt hold, comparing them with the model's own record
    # gives one-line reasons (none when they agree), never an error: inspect and evaluate both read them.
    files = {"vocab.txt": "".join(f"{t}\n" for t in packed_vocab).encode(),
             "labels.txt": "".join(f"{t}\n" for t in packed_labels).encode()}
    read = read_or_artifact_error(packed=pack_files(MODEL, files))
    assert isinstance(read, ClientMetadata)
    recorded = {"vocab_size": rows, "labels": ["neg", "pos"], "special_tokens": {"cls": "[CLS]"}}
    reasons = packed_disagreements(read, recorded, VOCAB)
    assert all(isinstance(r, str) and "\n" not in r for r in reasons)
    fits = not (isinstance(rows, int) and len(VOCAB) > rows)
    agrees = packed_vocab == VOCAB and packed_labels == ["neg", "pos"] and fits
    assert (reasons == []) == agrees


def test_packed_files_that_agree_give_no_reason():
    assert packed_disagreements(read_or_artifact_error(), {"vocab_size": len(VOCAB), "labels": ["neg", "pos"]},
                                VOCAB) == []


def test_tokens_renamed_for_the_clients_are_no_disagreement():
    # MPNet: <s> is packed as [CLS], and BERT's own [CLS] (id 5 here) moved aside; any other difference counts.
    ours = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>", "[CLS]", "w"]
    packed = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]", "[unused-cls-5]", "w"]
    specials = {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "[UNK]", "mask": "<mask>"}
    meta = ClientMetadata("m", "1.0", 1, (), (), "bert", "vocab.txt", ("vocab.txt",), packed_lines={"vocab.txt": packed})
    assert packed_disagreements(meta, {"vocab_size": 7, "special_tokens": specials}, ours) == []
    packed[6] = "x"
    assert packed_disagreements(meta, {"vocab_size": 7, "special_tokens": specials}, ours) == [
        "line 7 of the packed vocab.txt is 'x' where the model's vocabulary has 'w' (mbk_vocab)"]
