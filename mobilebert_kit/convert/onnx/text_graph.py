"""The checkpoint's tokenizer inside the ``.onnx``: a file whose one input is the text (``--tokenizer-in-graph``).

onnxruntime-extensions runs the tokenizer as custom operators of the ``ai.onnx.contrib`` domain; an app
registers them with ``SessionOptions.register_custom_ops_library(onnxruntime_extensions.get_library_path())``
(``docs/clients/text-in-onnx.md``). The tokenizer graph is built from the checkpoint's own files, as
:meth:`~mobilebert_kit.data.text_tokenizer.TextTokenizer.model_files` hands them out (never transformers), with
onnxruntime-extensions' op of the kind's record (``TokenizerKind.extensions_op``):

- **WordPiece**: what the checkpoint's normalizer and pre-tokenizer do to each character (removed, a space,
  padded, mapped, isolated: ``text_chars``, measured on the ``tokenizers`` library) as string ops, then
  ``WordpieceTokenizer``, one text at a time in an ONNX ``Loop``;
- **SentencePiece Unigram**: ``SentencepieceTokenizer`` on a SentencePiece model written in the checkpoint's
  id order (``data/sentencepiece_model.py``; XLM-R's own ``.model`` has other ids), after the normalizer's
  whitespace, the Replace steps and transformers' Metaspace prefix as string ops;
- **byte-level BPE**: ``RobertaTokenizer`` (``vocab.json`` and ``merges.txt`` from the ``tokenizer.json``).

Special tokens typed in the text (``[SEP]``, ``<s>``, ``a <mask>``) get their ids, as transformers gives them:
WordPiece and SentencePiece see a sentinel noncharacter in their place (a word or user-defined piece of its
own), the BPE op is told of them.

Each op's content tokens (its own special tokens cut off) go through one common tail of standard ONNX ops,
which lays the rows out as transformers' tokenizer does for single texts: the class token, the text's tokens
truncated to the planned length less two, the separator token, then the pad id up to the batch's longest row
(or the planned length for a static file), with the attention mask 1 on real tokens and token types 0. These
feed the model's inputs (``onnx.compose.merge_models``), cast to their types.

A tokenizer onnxruntime-extensions cannot run as the checkpoint does is refused in one line, saying why
(:func:`refusal`), before anything is converted.

Example:
    >>> refusal(None)
    'it has no tokenizer (no tokenizer.json or vocab.txt beside the checkpoint)'
"""

import functools
import json
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mobilebert_kit.artifacts.formats import EXTENSIONS_DOMAIN, TOKENIZER_PREFIX
from mobilebert_kit.convert.errors import ExportError

TEXT_INPUT = "text"
EXTENSIONS_PACKAGE = "onnxruntime-extensions"
_P = TOKENIZER_PREFIX  # every tensor and node of the tokenizer graph: no name of the model's starts so
_INT64_MAX = np.iinfo(np.int64).max
_ML_OPSET = 2  # ai.onnx.ml: LabelEncoder with string keys and int64 values
_TYPES = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "float32": TensorProto.FLOAT}


def extensions_version():
    """The installed onnxruntime-extensions' version; raises ExportError in one line when it is missing."""
    # Its version from the package's record: its library is loaded only in the process that runs a text-in file
    # (artifacts/text_session.py says why).
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(EXTENSIONS_PACKAGE)
    except PackageNotFoundError as err:
        raise ExportError(f"--tokenizer-in-graph needs {EXTENSIONS_PACKAGE} (pip install {EXTENSIONS_PACKAGE}): "
                          f"its custom operators run the tokenizer") from err


def _first(node, kind):
    """The first ``{"type": kind}`` dict in a tokenizer.json node (a Sequence's items included), else None."""
    if isinstance(node, dict):
        if node.get("type") == kind:
            return node
        for key in ("pretokenizers", "normalizers", "processors"):
            for item in node.get(key) or []:
                found = _first(item, kind)
                if found is not None:
                    return found
    return None


def refusal(tokenizer):
    """Why onnxruntime-extensions cannot run ``tokenizer`` (a TextTokenizer) as the checkpoint does, or None."""
    if tokenizer is None:
        return "it has no tokenizer (no tokenizer.json or vocab.txt beside the checkpoint)"
    kind = tokenizer.kind
    if kind.extensions_op is None:
        return f"onnxruntime-extensions has no operator for its {kind.name} tokenizer"
    added = tokenizer.added_tokens()
    if added:
        token = next(iter(added.values())).content
        return (f"it adds the token {token[:40]!r} with add_tokens, which onnxruntime-extensions' {kind.extensions_op} "
                "never produces")
    spec = getattr(tokenizer, "_spec", None) or {}
    steps = [step.get("type") for step in _steps(spec.get("pre_tokenizer"), "pretokenizers")]
    if kind.extensions_op == "SentencepieceTokenizer":
        if tokenizer.lowercase or tokenizer.strip_accents:
            what = "lower-cases" if tokenizer.lowercase else "strips the accents of"
            return (f"its {kind.name} tokenizer {what} the text before SentencePiece (ALBERT-style), which "
                    "onnxruntime-extensions' SentencepieceTokenizer cannot do")
        if spec and _first(spec.get("pre_tokenizer"), "Metaspace") is None:
            return f"its {kind.name} tokenizer has no Metaspace pre-tokenizer, which SentencePiece always applies"
        if spec and (steps != ["Metaspace"] or _first(spec.get("pre_tokenizer"), "Metaspace").get("split") is False):
            # SentencePiece splits at spaces and nowhere else (a WhitespaceSplit first dropped runs of spaces).
            return (f"its {kind.name} tokenizer pre-tokenizes with {' + '.join(map(str, steps))}, where "
                    "SentencePiece splits at spaces only (a Metaspace alone)")
        other = [step.get("type") for step in _steps(spec.get("normalizer"), "normalizers")
                 if step.get("type") not in _UNIGRAM_NORMALIZERS]
        if other:
            return (f"its {kind.name} tokenizer normalizes with {other[0]}, which the graph cannot reproduce before "
                    f"SentencePiece (it reproduces {', '.join(_UNIGRAM_NORMALIZERS)})")
    if kind.extensions_op == "RobertaTokenizer":
        level = _first(spec.get("pre_tokenizer"), "ByteLevel")
        if level is None:
            return (f"its {kind.name} tokenizer is not byte-level (no ByteLevel pre-tokenizer), and "
                    "onnxruntime-extensions' RobertaTokenizer is")
        if steps != ["ByteLevel"] or level.get("use_regex") is False:
            # The op splits words by GPT-2's pattern, then bytes: no other split (Digits, Split) nor none.
            return (f"its {kind.name} tokenizer pre-tokenizes with {' + '.join(map(str, steps))}"
                    f"{' without its word pattern (use_regex false)' if level.get('use_regex') is False else ''}, "
                    "and onnxruntime-extensions' RobertaTokenizer splits by GPT-2's word pattern alone")
        if level.get("add_prefix_space"):
            return ("its byte-level BPE adds a space before the text (add_prefix_space), which "
                    "onnxruntime-extensions' RobertaTokenizer does not")
        if spec.get("normalizer") is not None:
            return f"its {kind.name} tokenizer normalizes the text first, which RobertaTokenizer does not"
    if kind.extensions_op == "WordpieceTokenizer":
        from mobilebert_kit.convert.onnx.text_chars import unsupported_step

        model = spec.get("model") or {}
        if model.get("continuing_subword_prefix", "##") != "##":
            return "its WordPiece continues words with a prefix other than '##'"
        step = unsupported_step(tokenizer)
        if step is not None:
            return f"its {kind.name} tokenizer {step}, as the graph needs to reproduce it"
    return _single_layout(tokenizer)


def _steps(node, key):
    """A ``tokenizer.json`` normalizer or pre-tokenizer as the flat list of its steps (a Sequence's ``key`` items
    in order)."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [step for item in node.get(key) or [] for step in _steps(item, key)]
    return [node]


def _single_layout(tokenizer):
    """Why the tokenizer does not lay one text out as the graph does (class token, text, separator), or None."""
    backend = tokenizer._tokenizer
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    laid = backend.post_processor.process(backend.encode("", add_special_tokens=False)).ids \
        if backend.post_processor is not None else []
    if laid != [cls_id, sep_id]:
        names = [tokenizer.inverse_vocab.get(i, str(i)) for i in laid]
        return (f"its post-processor lays a text out as {' '.join(names + ['(text)'])[:60]!r}, not as the class "
                f"token, the text and the separator ({tokenizer.special_tokens['cls']} ... "
                f"{tokenizer.special_tokens['sep']}), the one layout the graph writes")
    return None


def in_graph_record(tokenizer, seq_len):
    """What ``mbk_metadata`` records of a text-in file's tokenizer (``tokenizer_in_graph``)."""
    return {"library": f"{EXTENSIONS_PACKAGE} {extensions_version()}", "domain": EXTENSIONS_DOMAIN,
            "op": tokenizer.kind.extensions_op, "kind": tokenizer.kind.name, "truncates_to": int(seq_len),
            "input": TEXT_INPUT}


def _const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype), _P + name)


def _node(op, inputs, outputs, **attrs):
    domain = attrs.pop("domain", "")
    return helper.make_node(op, [_P + i if i and not i.startswith(_P) and i != TEXT_INPUT else i for i in inputs],
                            [_P + o for o in outputs], name=_P + outputs[0], domain=domain, **attrs)


def _special_tokens(tokenizer):
    """``[(content, id, normalized, lstrip, rstrip)]`` of the tokenizer's special tokens, longest first: what
    transformers finds in the text itself (``tokenizer("[SEP]")`` gives the separator's id)."""
    decoder = tokenizer._tokenizer.get_added_tokens_decoder()
    found = [(token.content, int(index), bool(token.normalized), bool(token.lstrip), bool(token.rstrip))
             for index, token in decoder.items() if token.special and token.content]
    return sorted(found, key=lambda item: (-len(item[0]), item[1]))


def _wordpiece_words(tokenizer, nodes, inits):
    """Nodes that make the words of one text ``one_text`` ``[1]`` as the checkpoint's tokenizer makes them, its
    special tokens typed in the text as sentinel words; returns ``{sentinel: id}``.

    onnxruntime-extensions' ``BasicTokenizer`` alone strips the accents of Latin-1 letters only, lower-cases few
    scripts ("Tōkyō" became ``t [UNK]`` where transformers gives ``tokyo``), and has control, space and
    punctuation tables of its own (U+007F and U+FEFF were kept, fullwidth ``！`` joined to its word). So what the
    checkpoint's normalizer and pre-tokenizer do to each character is measured on them (``text_chars``) and
    written as string ops, in transformers' order:

    1. ``BasicTokenizer`` splits at whitespace and drops NULs, the words joined by one space again: it reads the
       text whole (the other string ops stop at a NUL, which transformers removes). Its ``remove_control_chars``
       stays off: its table also drops 83 unassigned code points and 7 CJK ideographs of Unicode 13-14 (U+9FFD)
       that transformers keeps (as ``[UNK]``, or padded CJK); step 3 removes what the checkpoint removes;
    2. special tokens typed in the text (``[SEP]``; transformers matches them before normalizing) become
       sentinel noncharacters, each a word of its own (a noncharacter the user typed becomes a placeholder first);
    3. the characters the normalizer removes are removed, its whitespace made spaces, its CJK characters padded,
       every other character it changes (case, accents) mapped (StringMapping over the text's characters);
    4. special tokens the tokenizer matches on the normalized text (MPNet's) become sentinels too;
    5. the characters the pre-tokenizer isolates (punctuation) padded; ``BasicTokenizer`` with every option off
       splits the words at the spaces.
    """
    from mobilebert_kit.convert.onnx import text_chars as tc

    classes = tc.char_classes(tokenizer)
    specials = _special_tokens(tokenizer)
    if len(specials) > tc.SENTINEL_LAST - tc.SENTINEL_FIRST + 1:
        raise ExportError(f"--tokenizer-in-graph: the tokenizer has {len(specials)} special tokens, more than the "
                          f"text-in graph can mark ({tc.SENTINEL_LAST - tc.SENTINEL_FIRST + 1})")
    sentinels = {chr(tc.SENTINEL_FIRST + k): index for k, (_, index, *_) in enumerate(specials)}
    nodes += [
        helper.make_node("BasicTokenizer", ["one_text"], ["raw_words"], domain=EXTENSIONS_DOMAIN, do_lower_case=0,
                         strip_accents=0, tokenize_chinese_chars=0, tokenize_punctuation=0, remove_control_chars=0),
        helper.make_node("StringJoin", ["raw_words", _P + "space", _P + "zero"], ["raw_text"],
                         domain=EXTENSIONS_DOMAIN),
    ]
    inits.append(numpy_helper.from_array(np.array([" "], object), _P + "space"))
    step = functools.partial(_replace, nodes, inits, body=True)
    text = step("raw_text", tc.re2_class(range(tc.SENTINEL_FIRST, tc.PLACEHOLDER + 1)), chr(tc.PLACEHOLDER), "unmarked")

    def mark(text, normalized_pass):
        for k, (content, _, normalized, _, _) in enumerate(specials):
            if normalized != normalized_pass:
                continue
            if normalized:
                content = tc.normalized_text(tokenizer, content)
            if content:
                text = step(text, tc.re2_literal(content), f" {chr(tc.SENTINEL_FIRST + k)} ", f"special{k}")
        return text

    text = mark(text, False)
    if classes.removed:
        text = step(text, tc.re2_class(classes.removed), "", "cleaned")
    spaces = [code for code in classes.spaces if code != 0x20]
    if spaces:
        text = step(text, tc.re2_class(spaces), " ", "spaced")
    if classes.padded:
        text = step(text, f"({tc.re2_class(classes.padded)})", " \\1 ", "padded")
    if classes.mapped:
        odd = next((code for code, out in classes.mapped if "\t" in chr(code) + out or "\n" in chr(code) + out), None)
        if odd is not None:  # StringMapping's table is "char<TAB>value" lines
            raise ExportError(f"--tokenizer-in-graph: the tokenizer's normalizer maps U+{odd:04X} to text with a tab "
                              "or line break, which onnxruntime-extensions' StringMapping cannot hold")
        table = "\n".join(f"{chr(code)}\t{out}" for code, out in classes.mapped)
        nodes += [
            helper.make_node("StringRegexSplitWithOffsets", [text, _P + "any_char", _P + "any_char"],
                             ["chars", "char_begins", "char_ends", "char_splits"], domain=EXTENSIONS_DOMAIN),
            helper.make_node("StringMapping", ["chars"], ["plain_chars"], domain=EXTENSIONS_DOMAIN, map=table),
            helper.make_node("StringJoin", ["plain_chars", _P + "empty", _P + "zero"], ["mapped"],
                             domain=EXTENSIONS_DOMAIN),
        ]
        inits += [numpy_helper.from_array(np.array([value], object), _P + name)
                  for name, value in (("empty", ""), ("any_char", "(.)"))]
        text = "mapped"
    text = mark(text, True)
    if classes.isolated:
        text = step(text, f"({tc.re2_class(classes.isolated)})", " \\1 ", "isolated")
    nodes.append(helper.make_node("BasicTokenizer", [text], ["words"], domain=EXTENSIONS_DOMAIN, do_lower_case=0,
                                  strip_accents=0, tokenize_chinese_chars=0, tokenize_punctuation=0,
                                  remove_control_chars=0))
    return sentinels


# The int64 outputs of the custom ops in the WordPiece Loop (the others are strings).
_INT_OUTPUTS = ("char_begins", "char_ends", "char_splits", "splits", "piece_begins", "piece_ends")


def _wordpiece(tokenizer, files):
    """Content tokens of a WordPiece tokenizer, one text at a time in a Loop: the words as the checkpoint makes
    them (:func:`_wordpiece_words`), the words into pieces by ``WordpieceTokenizer``, and a word with an unknown
    piece made one unknown token, as transformers makes it (the op keeps the pieces before the unknown one: Hindi
    ``पाठ`` gave ``प ##ा [UNK]`` for ``[UNK]``); the pieces' ids by the vocabulary (``ai.onnx.ml`` LabelEncoder),
    a special token typed in the text its own id."""
    unk = tokenizer.special_tokens.get("unk", "[UNK]")
    spec = getattr(tokenizer, "_spec", None) or {}
    longest = int((spec.get("model") or {}).get("max_input_chars_per_word") or 100)
    c = {name: _P + name for name in ("axis0", "axis1", "one", "one1", "minus1", "zero", "unk_id")}
    body_nodes = [
        helper.make_node("Unsqueeze", ["i", c["axis0"]], ["i1"]),
        helper.make_node("Add", ["i1", c["one1"]], ["i2"]),
        helper.make_node("Slice", [TEXT_INPUT, "i1", "i2"], ["one_text"]),
    ]
    word_inits = []
    sentinels = _wordpiece_words(tokenizer, body_nodes, word_inits)
    vocab = {**tokenizer.vocab, **sentinels}
    body_nodes += [
        helper.make_node("Size", ["words"], ["word_count"]),
        helper.make_node("Add", ["word_count", c["one"]], ["word_count1"]),
        helper.make_node("Range", [c["zero"], "word_count1", c["one"]], ["word_rows"]),
        helper.make_node("WordpieceTokenizer", ["words", "word_rows"], ["pieces", "splits", "piece_begins", "piece_ends"],
                         domain=EXTENSIONS_DOMAIN, vocab=json.dumps(vocab, ensure_ascii=False), suffix_indicator="##",
                         unknown_token=unk, max_input_chars_per_word=longest),
        helper.make_node("LabelEncoder", ["pieces"], ["piece_ids"], domain="ai.onnx.ml",
                         keys_strings=list(vocab), values_int64s=[int(v) for v in vocab.values()],
                         default_int64=int(vocab[unk])),
        helper.make_node("Equal", ["piece_ids", c["unk_id"]], ["is_unk"]),
        helper.make_node("Size", ["pieces"], ["piece_count"]),
        helper.make_node("Range", [c["zero"], "piece_count", c["one"]], ["positions"]),
        # The word of each piece: how many word boundaries (splits[1:-1]) lie at or before it.
        helper.make_node("Slice", ["splits", c["one1"], c["minus1"]], ["inner_splits"]),
        helper.make_node("Unsqueeze", ["positions", c["axis1"]], ["position_col"]),
        helper.make_node("Unsqueeze", ["inner_splits", c["axis0"]], ["inner_row"]),
        helper.make_node("GreaterOrEqual", ["position_col", "inner_row"], ["past"]),
        helper.make_node("Cast", ["past"], ["past_count"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["past_count", c["axis1"]], ["word_of"], keepdims=0),
        # The words holding an unknown piece.
        helper.make_node("Range", [c["zero"], "word_count", c["one"]], ["word_index"]),
        helper.make_node("Unsqueeze", ["word_index", c["axis1"]], ["word_col"]),
        helper.make_node("Unsqueeze", ["word_of", c["axis0"]], ["word_of_row"]),
        helper.make_node("Equal", ["word_col", "word_of_row"], ["member"]),
        helper.make_node("Cast", ["member"], ["member_count"], to=TensorProto.INT64),
        helper.make_node("Cast", ["is_unk"], ["unk_count"], to=TensorProto.INT64),
        helper.make_node("Unsqueeze", ["unk_count", c["axis0"]], ["unk_row"]),
        helper.make_node("Mul", ["member_count", "unk_row"], ["member_unk"]),
        helper.make_node("ReduceSum", ["member_unk", c["axis1"]], ["word_unks"], keepdims=0),
        helper.make_node("Greater", ["word_unks", c["zero"]], ["word_unknown"]),
        helper.make_node("Gather", ["word_unknown", "word_of"], ["in_unknown_word"]),
        helper.make_node("Gather", ["splits", "word_of"], ["word_start"]),
        helper.make_node("Equal", ["positions", "word_start"], ["starts_word"]),
        helper.make_node("Not", ["in_unknown_word"], ["known"]),
        helper.make_node("Or", ["known", "starts_word"], ["keep"]),
        helper.make_node("Where", ["in_unknown_word", c["unk_id"], "piece_ids"], ["word_ids"]),
        helper.make_node("Compress", ["word_ids", "keep"], ["content"], axis=0),
        helper.make_node("Concat", ["values_in", "content"], ["values_out"], axis=0),
        helper.make_node("Size", ["content"], ["length"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ]
    for node in body_nodes:  # named as the outer graph's nodes (inspect's census tells them from the model's)
        node.name = node.name or _P + node.output[0]
    body = helper.make_graph(
        body_nodes, _P + "each_text",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("values_in", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("values_out", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("length", TensorProto.INT64, [])],
        # The custom ops' outputs typed: ONNX shape inference reads them (an untyped input to the LabelEncoder
        # crashed onnx.checker's full check).
        value_info=[helper.make_tensor_value_info(name, TensorProto.INT64 if name in _INT_OUTPUTS else TensorProto.STRING,
                                                  [None])
                    for node in body_nodes if node.domain == EXTENSIONS_DOMAIN for name in node.output])
    nodes = [
        _node("Shape", [TEXT_INPUT], ["count"]),
        _node("Squeeze", ["count", "axis0"], ["trips"]),
        _node("Loop", ["trips", "", "no_values"], ["values", "lengths"], body=body),
        _node("CumSum", ["lengths", "zero"], ["starts"], exclusive=1),
    ]
    inits = [_const("no_values", np.zeros([0])), _const("zero", 0), _const("unk_id", int(vocab[unk]))] + word_inits
    return nodes, inits


# The normalizer steps of a Unigram tokenizer.json the text-in graph reproduces (anything else is refused).
_UNIGRAM_NORMALIZERS = ("Precompiled", "NFKC", "Replace")


@functools.lru_cache(maxsize=1)
def _nfkc_charsmap():
    """SentencePiece's own NFKC character map (what a model trained with ``normalization_rule_name="nfkc"``
    carries), taken from a throwaway model trained on one line."""
    import io

    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as pb

    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["abc def ghi"] * 8), model_writer=buffer, vocab_size=16, model_type="char",
        normalization_rule_name="nfkc", minloglevel=2, hard_vocab_limit=False)
    model = pb.ModelProto()
    model.ParseFromString(buffer.getvalue())
    return model.normalizer_spec.precompiled_charsmap


def _sentencepiece_file(tokenizer, files, steps, specials):
    """The checkpoint-id SentencePiece model, normalizing as the ``tokenizer.json`` does: its Precompiled map (or
    SentencePiece's NFKC map for an NFKC step), no whitespace removal and no dummy prefix of its own (the graph
    runs the Replace steps and adds the "▁" as transformers does, :func:`_sentencepiece`); each special token but
    the unknown one a user-defined piece named by its sentinel, so that one typed in the text keeps its id."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    from mobilebert_kit.convert.onnx.text_chars import SENTINEL_FIRST

    model = pb.ModelProto()
    model.ParseFromString(files[tokenizer.kind.client_file])
    spec = model.normalizer_spec
    if not spec.precompiled_charsmap and any(step.get("type") == "NFKC" for step in steps):
        spec.precompiled_charsmap = _nfkc_charsmap()
    spec.remove_extra_whitespaces = False
    spec.add_dummy_prefix = False
    for k, (_, index, *_) in enumerate(specials):
        piece = model.pieces[index] if index < len(model.pieces) else None
        if piece is not None and piece.type != pb.ModelProto.SentencePiece.UNKNOWN:  # the unknown one's sentinel
            # is unknown to the model: it gives the unknown id
            piece.piece, piece.type = chr(SENTINEL_FIRST + k), pb.ModelProto.SentencePiece.USER_DEFINED
    return model.SerializeToString()


def _sentencepiece(tokenizer, files):
    """Content tokens of a SentencePiece tokenizer: ``SentencepieceTokenizer`` on the whole batch (ragged).

    Before it, in transformers' order: the whitespace an ``lstrip``/``rstrip`` special token takes in is removed,
    special tokens typed in the text become sentinels (user-defined pieces of the model, their ids; a
    noncharacter the user typed becomes a placeholder first), the characters the normalizer removes or makes a
    space (NBSP, ideographic space) are removed or made spaces, the ``tokenizer.json``'s Replace steps run, and
    the Metaspace "▁" is added where transformers adds it: before the text and after each special token
    (``prepend_scheme`` ``always``; ``first``: before the text only), unless a space is there (SentencePiece's own
    dummy prefix would add one to " x" and none to " ")."""
    from mobilebert_kit.convert.onnx import text_chars as tc

    spec = getattr(tokenizer, "_spec", None) or {}
    steps = _steps(spec.get("normalizer"), "normalizers")
    specials = _special_tokens(tokenizer)
    nodes, inits = [], []
    step = functools.partial(_replace, nodes, inits)

    text = _absorb_whitespace(specials, nodes, inits, TEXT_INPUT)
    if specials:
        text = step(text, tc.re2_class(range(tc.SENTINEL_FIRST, tc.PLACEHOLDER + 1)), chr(tc.PLACEHOLDER), "unmarked")
        for k, (content, *_) in enumerate(specials):
            text = step(text, tc.re2_literal(content), chr(tc.SENTINEL_FIRST + k), f"special{k}")
    removed, spaces = tc.single_char_effects(tokenizer)
    if removed:
        text = step(text, tc.re2_class(removed), "", "cleaned")
    spaces = [code for code in spaces if code != 0x20]
    if spaces:
        text = step(text, tc.re2_class(spaces), " ", "spaced")
    for index, item in enumerate(s for s in steps if s.get("type") == "Replace"):
        pattern = item.get("pattern") or {}
        regex = pattern["Regex"] if "Regex" in pattern else re.escape(pattern.get("String", ""))
        text = step(text, regex, item.get("content", ""), f"replaced{index}")
    prefix = _first(spec.get("pre_tokenizer"), "Metaspace") or {}
    scheme = prefix.get("prepend_scheme") or ("always" if prefix.get("add_prefix_space", True) else "never")
    if scheme != "never":
        marks = tc.re2_class(range(tc.SENTINEL_FIRST, tc.SENTINEL_LAST + 1))[1:-1]
        text = step(text, f"^([^ {marks}])", " \\1", "prefixed", global_replace=0)
        if scheme == "always" and specials:
            text = step(text, f"([{marks}])([^ {marks}])", "\\1 \\2", "segments_prefixed")
    nodes += [
        _node("SentencepieceTokenizer", [text, "nbest", "alpha", "false", "false", "false", "false"],
              ["tokens", "splits", "token_indices"], domain=EXTENSIONS_DOMAIN,
              model=_sentencepiece_file(tokenizer, files, steps, specials)),
        _node("Cast", ["tokens"], ["values"], to=TensorProto.INT64),
        _node("Slice", ["splits", "zero1", "minus1"], ["starts"]),
        _node("Slice", ["splits", "one1", "end1"], ["ends"]),
        _node("Sub", ["ends", "starts"], ["lengths"]),
    ]
    inits += [_const("nbest", [0]), _const("alpha", [0.0], np.float32), _const("false", [False], np.bool_),
              _const("zero1", [0]), _const("end1", [_INT64_MAX])]
    return nodes, inits


# What transformers' added tokens with lstrip / rstrip take in beside them (Rust's char::is_whitespace).
_WHITESPACE = "[\\t\\n\\x{b}\\x{c}\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"


def _replace(nodes, inits, text, pattern, rewrite, name, body=False, **attrs):
    """``text`` with every match of ``pattern`` replaced by ``rewrite`` (RE2; ``\1`` is the first group): one
    StringRegexReplace node, of the outer graph or (``body``) of a Loop body, whose names are left unprefixed;
    its two constants go in the outer graph. Returns the result's name."""
    inits += [numpy_helper.from_array(np.array([pattern], object), f"{_P}{name}_pattern"),
              numpy_helper.from_array(np.array([rewrite], object), f"{_P}{name}_rewrite")]
    if body:
        nodes.append(helper.make_node("StringRegexReplace", [text, f"{_P}{name}_pattern", f"{_P}{name}_rewrite"],
                                      [name], domain=EXTENSIONS_DOMAIN))
        return name
    nodes.append(_node("StringRegexReplace", [text, f"{name}_pattern", f"{name}_rewrite"], [name],
                       domain=EXTENSIONS_DOMAIN, **attrs))
    return _P + name


def _absorb_whitespace(specials, nodes, inits, text):
    """``text`` (a batch) with the whitespace beside each special token that has ``lstrip`` / ``rstrip`` removed:
    transformers takes it into the token's match (RoBERTa's ``<mask>``: "a <mask>" gives ``a <mask>``, no space
    token). Returns the name of the result."""
    from mobilebert_kit.convert.onnx.text_chars import re2_literal

    for k, (content, _, _, lstrip, rstrip) in enumerate(specials):
        if lstrip or rstrip:
            pattern = (_WHITESPACE + "+" if lstrip else "") + f"({re2_literal(content)})" + (
                _WHITESPACE + "+" if rstrip else "")
            text = _replace(nodes, inits, text, pattern, "\\1", f"strip{k}")
    return text


def _byte_level_bpe(tokenizer, files):
    """Content tokens of a byte-level BPE: ``RobertaTokenizer`` on the whole batch, its ``<s>``/``</s>`` cut off.

    The op matches the special tokens it is told of in the text (``added_token``: all of the checkpoint's, as
    transformers matches them; by itself it knows ``<s> </s> <pad> <unk>`` and not ``<mask>``), after the whitespace
    an ``lstrip``/``rstrip`` token takes in is removed (:func:`_absorb_whitespace`)."""
    specials = _special_tokens(tokenizer)
    nodes, inits = [], []
    text = _absorb_whitespace(specials, nodes, inits, TEXT_INPUT)
    nodes += [
        _node("RobertaTokenizer", [text], ["padded", "padded_mask", "offsets"], domain=EXTENSIONS_DOMAIN,
              vocab=files["vocab.json"].decode("utf-8"),
              merges="\n".join(line for line in files["merges.txt"].decode("utf-8").splitlines()
                               if not line.startswith("#version")),
              added_token="\n".join(f"{content}={index}" for content, index, *_ in specials
                                     if "\n" not in content and "\r" not in content),
              padding_length=-1),
        _node("ReduceSum", ["padded_mask", "axis1"], ["with_specials"], keepdims=0),
        _node("Sub", ["with_specials", "two"], ["lengths"]),
        _node("Reshape", ["padded", "flat"], ["values"]),
        _node("Shape", ["padded"], ["padded_shape"]),
        _node("Slice", ["padded_shape", "zero1", "one1"], ["rows1"]),
        _node("Squeeze", ["rows1", "axis0"], ["rows"]),
        _node("Slice", ["padded_shape", "one1", "two1"], ["padded_width"]),
        _node("Range", ["zero", "rows", "one"], ["row_index"]),
        _node("Mul", ["row_index", "padded_width"], ["row_starts"]),
        _node("Add", ["row_starts", "one"], ["starts"]),
    ]
    inits += [_const("axis1", [1]), _const("two", 2), _const("flat", [-1]), _const("zero1", [0]), _const("two1", [2]),
              _const("zero", 0), _const("one", 1)]
    return nodes, inits


# TokenizerKind.extensions_op -> the builder of its content tokens: (values [T], starts [N], lengths [N]).
_CONTENT = {"WordpieceTokenizer": _wordpiece, "SentencepieceTokenizer": _sentencepiece, "RobertaTokenizer": _byte_level_bpe}


def _layout(tokenizer, seq_len, static):
    """The common tail: rows ``cls content[:seq_len - 2] sep pad...``, their mask and token types."""
    vocab = tokenizer.vocab
    cls_id, sep_id = vocab[tokenizer.special_tokens["cls"]], vocab[tokenizer.special_tokens["sep"]]
    pad_id = tokenizer.pad_id if tokenizer.pad_id is not None else 0
    nodes = [
        _node("Min", ["lengths", "room"], ["kept"]),
        _node("Add", ["kept", "two"], ["row_lengths"]),
        _node("Unsqueeze", ["kept", "axis1"], ["kept_col"]),
        _node("Unsqueeze", ["row_lengths", "axis1"], ["row_lengths_col"]),
        _node("Unsqueeze", ["starts", "axis1"], ["starts_col"]),
    ]
    if static:
        nodes.append(_node("Identity", ["planned"], ["width"]))
    else:
        # The batch's longest row (at least the two special tokens: an empty batch still has a shape).
        nodes += [_node("ReduceMax", ["row_lengths"], ["longest"], keepdims=0),
                  _node("Max", ["longest", "two"], ["width"])]
    nodes += [
        _node("Range", ["zero", "width", "one"], ["positions"]),
        _node("Unsqueeze", ["positions", "axis0"], ["positions_row"]),
        _node("Sub", ["positions_row", "one"], ["content_position"]),
        _node("GreaterOrEqual", ["content_position", "zero"], ["after_cls"]),
        _node("Less", ["content_position", "kept_col"], ["before_sep"]),
        _node("And", ["after_cls", "before_sep"], ["is_content"]),
        _node("Add", ["starts_col", "content_position"], ["source_index"]),
        _node("Size", ["values"], ["pad_index"]),
        _node("Where", ["is_content", "source_index", "pad_index"], ["gather_index"]),
        _node("Concat", ["values", "pad1"], ["values_and_pad"], axis=0),
        _node("Gather", ["values_and_pad", "gather_index"], ["content_ids"]),
        _node("Equal", ["positions_row", "zero"], ["is_cls"]),
        _node("Where", ["is_cls", "cls", "content_ids"], ["with_cls"]),
        _node("Add", ["kept_col", "one"], ["sep_position"]),
        _node("Equal", ["positions_row", "sep_position"], ["is_sep"]),
        _node("Where", ["is_sep", "sep", "with_cls"], ["ids"]),
        _node("Less", ["positions_row", "row_lengths_col"], ["is_real"]),
        _node("Cast", ["is_real"], ["mask"], to=TensorProto.INT64),
        _node("Mul", ["mask", "zero"], ["types"]),
    ]
    inits = [_const("room", max(seq_len - 2, 0)), _const("two", 2), _const("axis0", [0]), _const("axis1", [1]),
             _const("zero", 0), _const("one", 1), _const("pad1", [pad_id]), _const("cls", cls_id),
             _const("sep", sep_id), _const("planned", seq_len), _const("one1", [1]), _const("minus1", [-1])]
    return nodes, inits


def tokenizer_model(tokenizer, seq_len, input_types, *, static=False, batch=None, opset=17, ir_version=None,
                    ml_opset=_ML_OPSET):
    """The tokenizer as an ONNX model: ``text`` ``[batch]`` in, the model's inputs out (``mbk_tokenizer/<name>``).

    Texts are truncated to ``seq_len``, special tokens included; ``input_types`` is ``{model input name:
    "int64" | "int32" | "float32"}`` in the model's order; ``static`` pads every row to ``seq_len`` instead of the
    batch's longest (``batch`` None: a dynamic batch). ``opset``, ``ir_version`` and ``ml_opset`` are the model's
    (the two graphs are merged).
    """
    why = refusal(tokenizer)
    if why is not None:
        raise ExportError(f"--tokenizer-in-graph: {why}")
    files = tokenizer.model_files()
    content, content_inits = _CONTENT[tokenizer.kind.extensions_op](tokenizer, files)
    tail, tail_inits = _layout(tokenizer, seq_len, static)
    sources = {"input_ids": "ids", "attention_mask": "mask", "token_type_ids": "types"}
    outputs, casts = [], []
    for name, dtype in input_types.items():
        if name not in sources:
            raise ExportError(f"--tokenizer-in-graph: the model takes {name!r}, which a tokenizer does not give")
        casts.append(_node("Cast", [sources[name]], ["out_" + name], to=_TYPES[dtype]))
        outputs.append(helper.make_tensor_value_info(_P + "out_" + name, _TYPES[dtype], [batch or "batch_size", None]))
    nodes = content + tail + casts
    used = {name for node in nodes for inner in _all_nodes(node) for name in inner.input}  # subgraphs' included
    inits = {init.name: init for init in content_inits + tail_inits if init.name in used}  # shared names: one value
    graph = helper.make_graph(nodes, "tokenizer",
                              [helper.make_tensor_value_info(TEXT_INPUT, TensorProto.STRING, [batch or "batch_size"])],
                              outputs, initializer=list(inits.values()))
    imports = [helper.make_opsetid("", int(opset)), helper.make_opsetid(EXTENSIONS_DOMAIN, 1)]
    if any(n.domain == "ai.onnx.ml" for node in nodes for n in _all_nodes(node)):
        imports.append(helper.make_opsetid("ai.onnx.ml", int(ml_opset)))
    model = helper.make_model(graph, opset_imports=imports)
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def _all_nodes(node):
    """``node`` and the nodes of its subgraphs."""
    yield node
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            for inner in attr.g.node:
                yield from _all_nodes(inner)


def with_tokenizer(model, tokenizer, seq_len, input_types, static=False, batch=None):
    """``model`` (a ModelProto taking token arrays) with the tokenizer in front: its one input is ``text``."""
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    ml_opset = next((o.version for o in model.opset_import if o.domain == "ai.onnx.ml"), _ML_OPSET)
    front = tokenizer_model(tokenizer, seq_len, input_types, static=static, batch=batch, opset=opset,
                            ir_version=model.ir_version, ml_opset=ml_opset)
    props = {p.key: p.value for p in model.metadata_props}
    producer = (model.producer_name, model.producer_version)
    merged = onnx.compose.merge_models(front, model, io_map=[(_P + "out_" + name, name) for name in input_types])
    helper.set_model_props(merged, props)
    merged.producer_name, merged.producer_version = producer
    return merged


def takes_text(model):
    """Whether an ONNX ModelProto is a text-in file: its inputs are one string tensor."""
    inputs = list(model.graph.input)
    return len(inputs) == 1 and inputs[0].type.tensor_type.elem_type == TensorProto.STRING


__all__ = ["TEXT_INPUT", "EXTENSIONS_DOMAIN", "refusal", "in_graph_record", "tokenizer_model", "with_tokenizer", "takes_text",
           "extensions_version"]
