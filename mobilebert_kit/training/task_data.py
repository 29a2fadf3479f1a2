"""Fine-tuning data: readers for GLUE-style tables, SQuAD JSON and tagged tokens, and model features.

The formats of each ``--task``: docs/distillation.md, "Fine-tuning". Features are fixed-length numpy arrays:
``input_ids``, ``attention_mask``, ``token_type_ids`` of ``[n, seq_len]`` plus the task's labels.
"""

import csv
import json
from pathlib import Path

import numpy as np

from mobilebert_kit.data.class_names import how_alike, look_alike_key
from mobilebert_kit.errors import DataError
from mobilebert_kit.utils.structured import load_json

TASKS = ("classification", "regression", "span_qa", "token_classification")
_TEXT_PAIRS = (("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"),
               ("question", "sentence"), ("#1 String", "#2 String"), ("text_a", "text_b"))
_TEXT_SINGLES = ("sentence", "text", "text_a")
_LABELS = ("label", "score", "Quality", "gold_label", "labels")
IGNORE = -100


# ------------------------------------------------------------- tables
def read_table(path):
    """Rows (dicts) of a ``.tsv``, ``.csv`` or ``.jsonl`` file with a header."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; pass a .tsv, .csv or .jsonl file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = []
            with open(path, encoding="utf-8-sig") as handle:  # -sig: a byte-order mark is not part of the text
                for number, line in enumerate(handle, 1):
                    if line.strip():
                        rows.append(load_json(line, f"{path}:{number}", expect=dict, error=DataError,
                                              fix="one JSON object per line"))
            return rows
        if suffix not in (".tsv", ".csv"):
            raise DataError(f"{path}: unknown table format {suffix!r}; use .tsv, .csv or .jsonl")
        # utf-8-sig: Excel and Notepad start UTF-8 files with a byte-order mark, which would stick to the
        # first column's name ("\ufeffsentence") and hide the column.
        with open(path, encoding="utf-8-sig", newline="") as handle:
            # .tsv: GLUE files contain unbalanced quotes, so no quoting at all
            options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if suffix == ".tsv" else {}
            reader = csv.reader(handle, **options)
            try:
                header = next((fields for fields in reader if fields), None)  # blank lines before it skipped
                if header:
                    _refuse_nul(path, reader.line_num, header)
                    # A column named twice: each row would keep the last one's value, scored without a word.
                    twice = next((c for c in header if c and header.count(c) > 1), None)
                    if twice is not None:
                        raise DataError(f"{path}: the header names column {twice!r} twice; give each column its "
                                        "own name")
                rows = []
                for fields in reader:
                    if not fields:
                        continue  # a blank line
                    _refuse_nul(path, reader.line_num, fields)
                    # Fewer fields than the header would read a missing label as None; more (a tab or comma
                    # inside the text) shift the label column: both would train or score on the wrong values.
                    if len(fields) != len(header):
                        how = ("tab-separated (a .tsv has no quoting: no tab inside a text)" if suffix == ".tsv"
                               else "comma-separated (quote a text that holds a comma)")
                        raise DataError(f"{path} line {reader.line_num} has {len(fields)} field(s) where the header has "
                                        f"{len(header)}; give every row one value for each column, {how}")
                    rows.append(dict(zip(header, fields)))
                return rows
            except csv.Error as err:  # a field over csv's 128 Ki-character limit, a NUL byte, a bad quote
                # csv.reader's line_num counts the line that failed too.
                raise DataError(f"{path} line {reader.line_num} cannot be read as a table ({err}); "
                                "fix that line (one example per line, text under 128 Ki characters)") from err
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err.reason}); convert it first") from err


def _refuse_nul(path, line, fields):
    """A NUL character in a table is a UTF-16 file without a byte-order mark (every other byte is 0, which is valid
    UTF-8) or binary data, not text to train on."""
    if any("\0" in field for field in fields):
        raise DataError(f"{path} line {line} holds a NUL character; the file is UTF-16 or binary, not UTF-8 text: "
                        "convert it to UTF-8")


def _check_row_values(rows, path, text_columns, label_column):
    """Every row holds each text column as a string, and the label column (a ``.jsonl`` row may lack a key, or
    hold a number, null or list where text belongs, which would be scored as the text "5", "None", ...)."""
    for number, row in enumerate(rows, 1):
        for column in list(text_columns) + ([label_column] if label_column else []):
            if column not in row:
                raise DataError(f"{path}: data row {number} has no {column!r}; give every row the columns of the "
                                f"first ({', '.join(rows[0])})")
        for column in text_columns:
            if not isinstance(row[column], str):
                raise DataError(f"{path}: the {column!r} of data row {number} is {json.dumps(row[column])[:40]}, not "
                                "text; write every text as a JSON string")


def resolve_columns(rows, path, text_columns=None, label_column=None, need_label=True, recorded=None):
    """Picks the text and label columns: given ones are checked, else the ``recorded`` ones (an exported
    file's fine-tune columns, ``{"text_columns", "label_column"}``) where the table has them, else GLUE's
    usual names are tried."""
    if not rows:
        raise DataError(f"{path} has no rows")
    columns = list(rows[0])
    recorded = recorded if isinstance(recorded, dict) else {}
    if not text_columns and recorded.get("text_columns") and all(c in columns for c in recorded["text_columns"]):
        text_columns = list(recorded["text_columns"])
    if label_column is None and recorded.get("label_column") in columns:
        label_column = recorded["label_column"]
    if text_columns:
        if len(text_columns) > 2:  # a third was dropped without a word: a model reads one text or a pair
            raise DataError(f"--text-columns names {len(text_columns)} columns ({', '.join(text_columns)}); give one "
                            "text column or a pair A,B")
        missing = [c for c in text_columns if c not in columns]
        if missing:
            raise DataError(f"{path} has no column {missing[0]!r}; columns: {', '.join(columns)}")
    else:
        pair = next((p for p in _TEXT_PAIRS if all(c in columns for c in p)), None)
        single = next((c for c in _TEXT_SINGLES if c in columns), None)
        text_columns = list(pair) if pair else [single] if single else None
        if not text_columns:
            raise DataError(f"{path}: cannot tell the text column(s); name it one of {', '.join(_TEXT_SINGLES)} (a pair: "
                            f"sentence1 and sentence2) in the header, or pass --text-columns to `mbk finetune` / "
                            f"`mbk evaluate` (columns: {', '.join(columns)})")
    if label_column is None:
        label_column = next((c for c in _LABELS if c in columns), None)
    if need_label and (label_column is None or label_column not in columns):
        if label_column:
            problem, fix = repr(label_column), "check --label-column"
        else:
            problem = f"(none of {', '.join(_LABELS)})"
            fix = "name it one of those in the header, or pass --label-column to `mbk finetune` / `mbk evaluate`"
        raise DataError(f"{path}: no label column {problem}; {fix} (columns: {', '.join(columns)})")
    _check_row_values(rows, path, text_columns, label_column if need_label else None)
    return list(text_columns), label_column


def sequence_features(tokenizer, texts_a, texts_b, seq_len):
    """Encodes single texts or pairs (``texts_b`` None: singles) in the checkpoint's own layout
    (``TextTokenizer.encode_pairs``: ``[CLS] a [SEP] (b [SEP])`` for BERT), truncating the longer part first."""
    return tokenizer.encode_pairs(list(texts_a), list(texts_b) if texts_b is not None else None, seq_len)


def table_features(tokenizer, rows, text_columns, seq_len):
    """:func:`sequence_features` of a table's rows: the first text column, paired with the second when given."""
    texts_b = [r[text_columns[1]] for r in rows] if len(text_columns) > 1 else None
    return sequence_features(tokenizer, [r[text_columns[0]] for r in rows], texts_b, seq_len)


def numeric_labels(path, raw, what, why):
    """``raw`` label cells as numbers (float64); the first that is no finite float32 number is refused by row.

    The one rule of numeric labels (regression targets, the similarity scores of sentence pairs): a "nan" or
    "inf" cell parses as a float, and one of them turns a loss or a correlation into NaN, or into a number
    computed from the other rows only. ``what`` names a label in words, ``why`` says what a non-finite one does.

    Example:
        >>> numeric_labels("t.tsv", ["0.5", " 2 "], "regression label", "").tolist()
        [0.5, 2.0]
    """
    try:
        values = np.asarray([float(x) for x in raw], np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(f"{path}: {what}s must be numbers ({err}); give every row a number") from err
    wide = np.flatnonzero(~np.isfinite(values) | (np.abs(values) > float(np.finfo(np.float32).max)))
    if wide.size:
        row = int(wide[0]) + 1
        raise DataError(f"{path}: the {what} of data row {row} is {raw[row - 1]!r}, not a finite float32 number "
                        f"({why}); fix or remove the row")
    return values


def class_labels(path, raw):
    """``raw`` label cells as class names: surrounding whitespace dropped, look-alike names refused (case,
    NFC/NFD and NFKC forms, invisible characters: ``data/class_names.py``).

    Why: "pos " and "pos" (a stray space in a spreadsheet) or "Pos" and "pos" would be two classes, one answer
    scored wrong. Whitespace is never part of a name; case may be, so two spellings are an error to fix.
    Training and evaluation both read labels here, so they agree.

    Example:
        >>> class_labels("t.tsv", ["pos ", "neg", 1])
        ['pos', 'neg', '1']
    """
    names = [str(x).strip() for x in raw]
    first = {}
    for row, name in enumerate(names, 1):
        seen = first.setdefault(look_alike_key(name), (name, row))
        if seen[0] != name:
            raise DataError(f"{path}: labels {seen[0]!r} (data row {seen[1]}) and {name!r} (data row {row}) "
                            f"{how_alike(seen[0], name)}; "
                            "write each class one way")
    return names


def unseen(path, what, name, where, known):
    """The message of a data label the model has no class for; one that only looks like a known name ("Pos",
    NFD "café", a full-width letter) says which and how, as two such names print alike in the message."""
    alike = next((k for k in known if look_alike_key(k) == look_alike_key(name)), None)
    if alike is not None:
        return (f"{path}: {what} {name!r} ({where}) and the model's {alike!r} {how_alike(alike, name)}; write the "
                f"data's {what}s as the model's labels are written")
    return f"{path}: {what} {name!r} ({where}) was not seen in training; known: {', '.join(known)}"


def load_sequence_task(path, tokenizer, seq_len, task, text_columns=None, label_column=None, label_names=None,
                       need_label=True, recorded_columns=None):
    """``(features, labels or None, label_names, columns)`` of a classification/regression table.

    ``label_names`` are the class names in index order (from training; None: this file's, sorted), so
    unknown labels in evaluation data are an error; ``recorded_columns`` is :func:`resolve_columns`' ``recorded``."""
    rows = read_table(path)
    text_columns, label_column = resolve_columns(rows, path, text_columns, label_column, need_label, recorded_columns)
    features = table_features(tokenizer, rows, text_columns, seq_len)
    labels = None
    if label_column is not None and label_column in rows[0]:
        raw = [r[label_column] for r in rows]
        for row, value in enumerate(raw, 1):
            # A JSONL null, list or object, or an empty cell, is no label: as a class it would be trained
            # as one ("None", a Python repr, ""); as a regression target it is no number.
            if value is None or isinstance(value, (list, dict)) or (isinstance(value, str) and not value.strip()):
                shown = "empty" if isinstance(value, str) else json.dumps(value)[:40]
                raise DataError(f"{path}: the label of data row {row} is {shown}; give every row a label in column "
                                f"{label_column!r}, or remove the row")
        if task == "regression":
            labels = numeric_labels(path, raw, "regression label",
                                    "a NaN or infinite target makes every weight NaN").astype(np.float32)
        else:
            raw = class_labels(path, raw)
            if label_names is None:
                label_names = sorted(set(raw))
            index = {name: i for i, name in enumerate(label_names)}
            unknown = sorted(set(raw) - set(index))
            if unknown:
                row = raw.index(unknown[0]) + 1
                raise DataError(unseen(path, "label", unknown[0], f"data row {row}", label_names))
            labels = np.asarray([index[x] for x in raw], np.int32)
    return features, labels, label_names, {"text_columns": text_columns, "label_column": label_column}


# ------------------------------------------------------------- multi-label tables
_TRUE, _FALSE = ("1", "1.0", "true", "yes"), ("0", "0.0", "false", "no")


def multi_label_targets(rows, path, names, label_column):
    """``[rows, labels]`` 0/1 gold of a multi-label table, ``names`` being the model's labels in output order.

    ``label_column`` None: one column per label name holds 0/1 (true/false), as in Jigsaw-style tables. Else
    that column lists the row's labels: a JSON array (a ``.jsonl`` list, or cell text starting with ``[``) of
    label names or output indices, or names separated by ``|``; an empty cell or list is a row with no label.
    """
    index = {name: i for i, name in enumerate(names)}
    gold = np.zeros((len(rows), len(names)), np.int8)
    for number, row in enumerate(rows, 1):
        if label_column is None:
            for name, i in index.items():
                raw = row.get(name)
                value = str(int(raw)) if isinstance(raw, bool) else str(raw).strip().lower()
                if name not in row or value not in _TRUE + _FALSE:
                    shown = "missing" if name not in row else json.dumps(row[name])[:40]
                    raise DataError(f"{path}: the {name!r} column of data row {number} is {shown}; give every row 0 "
                                    "or 1 in each label's column")
                gold[number - 1, i] = value in _TRUE
            continue
        value = row[label_column]
        if isinstance(value, str) and value.strip().startswith("["):
            value = load_json(value, f"{path} data row {number}", expect=list, error=DataError,
                              fix="a JSON array of label names")
        items = value if isinstance(value, list) else [x for x in str(value).split("|") if x.strip()] \
            if isinstance(value, str) else None
        if items is None:
            raise DataError(f"{path}: the labels of data row {number} are {json.dumps(value)[:40]}; give a list of "
                            "label names (a JSON array, or names separated by |)")
        for item in items:
            i = index.get(item.strip()) if isinstance(item, str) else item if type(item) is int else None
            if i is None or not 0 <= i < len(names):
                raise DataError(f"{path}: label {item!r} (data row {number}) is not one of the model's labels: "
                                f"{', '.join(names)}")
            gold[number - 1, i] = 1
    return gold


# ------------------------------------------------------------- SQuAD
def read_squad(path):
    """SQuAD v1.1/v2.0 examples: dicts with id, question, context, answers (text, start) and impossible."""
    path = Path(path)
    expected = 'expected {"data": [{"paragraphs": [{"context": "...", "qas": [...]}]}]}'
    top = load_json(path, "the SQuAD file", expect=dict, error=DataError, fix=expected)
    data = top.get("data")
    if not isinstance(data, list):
        raise DataError(f"{path} is not a SQuAD JSON file (no \"data\" list); {expected}")

    def field(where, record, key, kind, default=None):
        value = record.get(key, default) if isinstance(record, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            name = "/".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
            raise DataError(f"{path}: {where} has no {name} {key!r} (got {type(value).__name__}); {expected}")
        return value

    examples = []
    for i, article in enumerate(data):
        for j, paragraph in enumerate(field(f"data[{i}]", article, "paragraphs", list, [])):
            where = f"data[{i}].paragraphs[{j}]"
            context = field(where, paragraph, "context", str)
            for k, qa in enumerate(field(where, paragraph, "qas", list, [])):
                at = f"{where}.qas[{k}]"
                answers = []
                for n, a in enumerate(field(at, qa, "answers", list, [])):
                    start = field(f"{at}.answers", a, "answer_start", int)
                    text = field(f"{at}.answers", a, "text", str)
                    # An answer that does not lie in its context was trained as "no answer" without a word.
                    if not text.strip() or start < 0 or start + len(text) > len(context):
                        problem = "an empty text" if not text.strip() else \
                            f"answer_start {start}, outside its {len(context)}-character context"
                        raise DataError(f"{path}: {at}.answers[{n}] has {problem}; answer_start is the character "
                                        "offset of the answer text in the paragraph's context")
                    answers.append({"text": text, "start": start})
                examples.append({"id": str(field(at, qa, "id", (str, int))), "question": field(at, qa, "question", str),
                                 "context": context, "answers": answers,
                                 "impossible": field(at, qa, "is_impossible", bool, False)})
    if not examples:
        raise DataError(f"{path} holds no questions")
    return examples


def squad_features(tokenizer, examples, seq_len, doc_stride=128, max_query_length=64, training=True):
    """Windows of ``[CLS] question [SEP] context [SEP]`` over long contexts (BERT's run_squad).

    Training windows that do not contain the answer (and unanswerable questions) point start and end at
    ``[CLS]`` (position 0). Returns ``(features, windows)``: arrays (with ``start_positions``/``end_positions``
    when training) and per window ``(example index, {token position: (char start, char end)})``."""
    rows = {k: [] for k in ("input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions")}
    windows = []
    for index, example in enumerate(examples):
        q_ids = tokenizer.encode(example["question"])[1][:max_query_length]
        _, c_ids, c_offsets = tokenizer.encode(example["context"])
        room = seq_len - len(q_ids) - 3
        if room < 8:
            raise DataError(f"seq_len {seq_len} leaves no room for the context after a {len(q_ids)}-token question; raise --seq-len")
        answer = None
        if training and example["answers"] and not example["impossible"]:
            first = example["answers"][0]
            start_char, end_char = first["start"], first["start"] + len(first["text"])
            if example["context"][start_char:end_char] != first["text"]:
                # Training reads the span at answer_start: a wrong offset trained the model on other words.
                found = example["context"][start_char:end_char]
                raise DataError(f"question {example['id']!r}: its answer {first['text'][:40]!r} is not at answer_start "
                                f"{start_char} of its context (there: {found[:40]!r}); fix answer_start, the character "
                                "offset of the answer in the context")
            tokens_in = [i for i, (s, e) in enumerate(c_offsets) if s < end_char and e > start_char]
            if tokens_in:
                answer = (tokens_in[0], tokens_in[-1])
        start = 0
        while True:
            length = min(room, len(c_ids) - start)
            ids = [tokenizer.cls_id] + q_ids + [tokenizer.sep_id] + c_ids[start : start + length] + [tokenizer.sep_id]
            offset = len(q_ids) + 2
            types = [0] * offset + [1] * (length + 1)
            pad = seq_len - len(ids)
            rows["input_ids"].append(ids + [tokenizer.pad_id] * pad)
            rows["token_type_ids"].append(types + [0] * pad)
            rows["attention_mask"].append([1] * len(ids) + [0] * pad)
            s_pos = e_pos = 0
            if answer is not None and start <= answer[0] and answer[1] < start + length:
                s_pos, e_pos = answer[0] - start + offset, answer[1] - start + offset
            rows["start_positions"].append(s_pos)
            rows["end_positions"].append(e_pos)
            windows.append((index, {offset + j: c_offsets[start + j] for j in range(length)}))
            if start + length >= len(c_ids):
                break
            start += min(length, doc_stride)
    features = {k: np.asarray(v, np.int32) for k, v in rows.items()}
    if not training:
        features.pop("start_positions")
        features.pop("end_positions")
    return features, windows


def squad_predictions(examples, windows, start_logits, end_logits, n_best=20, max_answer_length=30,
                      null_threshold=0.0, allow_null=None):
    """Best answer text per question from window logits; "" when no answer scores better (SQuAD 2.0).

    ``allow_null``: predict "no answer" when ``null score - best span > null_threshold`` (default: when any
    example is marked impossible, v2.0 data)."""
    if allow_null is None:
        allow_null = any(e["impossible"] for e in examples)
    best = {}
    for w, (index, token_chars) in enumerate(windows):
        s, e = start_logits[w], end_logits[w]
        null = float(s[0] + e[0])
        entry = best.setdefault(index, {"null": null, "score": -np.inf, "text": ""})
        entry["null"] = min(entry["null"], null)
        starts = [i for i in np.argsort(s)[::-1][:n_best] if i in token_chars]
        ends = [i for i in np.argsort(e)[::-1][:n_best] if i in token_chars]
        context = examples[index]["context"]
        for i in starts:
            for j in ends:
                if j < i or j - i + 1 > max_answer_length:
                    continue
                score = float(s[i] + e[j])
                if score > entry["score"]:
                    entry["score"] = score
                    entry["text"] = context[token_chars[i][0] : token_chars[j][1]]
    predictions = {}
    for index, example in enumerate(examples):
        entry = best.get(index, {"null": 0.0, "score": -np.inf, "text": ""})
        no_answer = allow_null and entry["null"] - entry["score"] > null_threshold
        predictions[example["id"]] = "" if no_answer else entry["text"]
    return predictions


# ------------------------------------------------------------- tagging
def read_tagged(path):
    """Sentences as ``(tokens, tags)`` from CoNLL text (last column is the tag) or JSONL."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; pass a CoNLL text file or a .jsonl file")
    sentences = []
    if path.suffix.lower() == ".jsonl":
        for number, row in enumerate(read_table(path), 1):
            tokens = row.get("tokens")
            tags = row.get("tags", row.get("ner_tags"))
            # A string is no list of tokens: "abc" was trained as the tokens a, b, c; a number was an internal error.
            if (not isinstance(tokens, list) or not isinstance(tags, list) or len(tokens) != len(tags)
                    or not all(isinstance(t, str) for t in tokens)
                    or not all(isinstance(t, (str, int)) and not isinstance(t, bool) for t in tags)):
                raise DataError(f"{path}: record {number} needs equally long 'tokens' and 'tags' lists (tokens "
                                "strings, tags strings or class numbers)")
            sentences.append((tokens, [str(t) for t in tags]))
        return sentences
    tokens, tags = [], []
    columns = None  # (count, first line): CoNLL files have the same columns on every token line
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err.reason}); convert it first") from err
    for number, line in enumerate(lines, 1):
        _refuse_nul(path, number, [line])
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if tokens:
                sentences.append((tokens, tags))
            tokens, tags = [], []
            continue
        if len(parts) < 2:
            raise DataError(f"{path}:{number}: expected 'token ... tag', got {line.strip()!r}")
        # A table of sentences (a GLUE .tsv) also splits into words: without these checks it trained as one
        # long "sentence" tagged with its labels' last words.
        if "\t" in line and any(" " in field.strip() for field in line.split("\t")):
            raise DataError(f"{path}:{number}: a tab-separated column holds spaces ({line.strip()[:60]!r}): this is a "
                            "table of sentences, not CoNLL tokens; token_classification reads one 'token ... tag' per "
                            "line, a blank line between sentences (or .jsonl with tokens and tags)")
        if columns is None:
            columns = (len(parts), number)
        elif len(parts) != columns[0]:
            raise DataError(f"{path}:{number}: {len(parts)} columns where line {columns[1]} has {columns[0]}; "
                            "token_classification reads CoNLL text, the same 'token ... tag' columns on every line "
                            "(is this a table of sentences?)")
        tokens.append(parts[0])
        tags.append(parts[-1])
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise DataError(f"{path} holds no tagged sentences")
    return sentences


def tagging_features(tokenizer, sentences, seq_len, tag_names, path):
    """Word-piece features with each word's tag on its first piece (others ignored with -100); ``path`` (the
    sentences' file) names where an unknown tag is."""
    n = len(sentences)
    ids = np.full((n, seq_len), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, seq_len), np.int32)
    labels = np.full((n, seq_len), IGNORE, np.int32)
    first_piece = []  # per sentence: {word index: token position}
    index = {t: i for i, t in enumerate(tag_names)}
    for row, (words, tags) in enumerate(sentences):
        pieces, word_ids = tokenizer.encode_words(words)
        pieces, word_ids = pieces[: seq_len - 2], word_ids[: seq_len - 2]
        seq = [tokenizer.cls_id] + pieces + [tokenizer.sep_id]
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
        positions, previous = {}, None
        for k, w in enumerate(word_ids):
            if w is not None and w != previous:
                positions[w] = k + 1
                if tags[w] not in index:
                    raise DataError(unseen(path, "tag", tags[w], f"sentence {row + 1}", tag_names))
                labels[row, k + 1] = index[tags[w]]
            previous = w
        first_piece.append(positions)
    features = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return features, labels, first_piece
