"""Class names that travel beside a classifier's weights: the one check of their type, count and spelling.

A classifier's names reach the app as ``labels.txt`` (packed in the ``.tflite``), line ``i`` naming output
column ``i``. Every reader of names (``labels.txt`` and ``config.json``'s ``id2label`` beside a checkpoint or
saved model, ``--labels``, the label column of fine-tuning data) goes through :func:`check_class_names`, so
they cannot disagree. Each rule, for the failure it stops (issue 37):

- a name is a string of one line: ``id2label`` values that were objects became labels like ``{'name': 'neg'}``;
- ``id2label`` keys are ints or int strings covering ``0 .. n-1`` once each (transformers reads them with
  ``int(key)``): a gap or a repeat would move every later name onto another column;
- as many names as the head has classes: 3 names for a 2-class head were packed and validation said PASSED;
- no two names are look-alikes (:func:`look_alike_key`: NFKC, case folded, invisible characters such as a
  zero-width space or a right-to-left mark removed): such names print the same in the app and became two classes.

Why look-alikes are refused, not merged, and why a lone name with an invisible character (an emoji joined
with U+200D) is kept: docs/reliability.md, "What travels beside the weights".

Standard library only: the artifact readers and the profiler may use it.

Example:
    >>> check_class_names(["neg", "pos"], "labels.txt", classes=2)
    ['neg', 'pos']
"""

import unicodedata

from mobilebert_kit.errors import ConfigError

# labels.txt and config.json are read with this bound: 1,000 classes of 64 characters are 65 KB; ImageNet-21k's
# 21,843 names fit in 1 MiB. Larger is no label file (a wrong path, a dataset).
LABELS_MAX_BYTES = 4 * 1024 * 1024
# The heads whose output columns are classes, the models that carry names.
LABELLED_HEADS = ("sequence_classifier", "token_classifier")
MAX_NAME_CHARS = 1024  # a class name is a word or a phrase; a longer "name" is a misread column


def _invisible(char):
    """Whether ``char`` prints as nothing: a format (Cf), control (Cc) or separator (Zs/Zl/Zp) other than a space."""
    return char != " " and unicodedata.category(char) in ("Cf", "Cc", "Zs", "Zl", "Zp")


def look_alike_key(name):
    """What two names that print alike share: NFKC, case folded, invisible characters removed.

    Example:
        >>> look_alike_key("Cafe\\u0301") == look_alike_key("caf\\u00e9\\u200b")
        True
    """
    visible = "".join(ch for ch in unicodedata.normalize("NFKC", name) if not _invisible(ch))
    return unicodedata.normalize("NFKC", visible.casefold())


def how_alike(a, b):
    """Why two names of one :func:`look_alike_key` are one class, in words (for messages).

    Example:
        >>> how_alike("pos", "Pos")
        'differ only in case'
    """
    if a == b:
        return "are the same name"
    if a.casefold() == b.casefold():
        return "differ only in case"
    if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
        return "are the same letters composed differently (NFC and NFD)"
    if any(_invisible(ch) for ch in a + b):
        return "differ only by invisible characters"
    return "look alike (equal once case and Unicode compatibility forms are set aside)"


def check_class_names(names, what, classes=None, error=ConfigError, where=None):
    """Returns ``names`` as a list of strings if every rule of this module holds; else one-line ``error``.

    ``what`` says where they come from (``"DIR/labels.txt"``, ``"--labels"``), ``classes`` is the head's
    output count (None: not known here), ``where(i)`` names position ``i`` in messages (default ``"class i"``;
    fine-tuning data says ``"data row n"``).

    Example:
        >>> check_class_names(["pos", "Pos"], "t.tsv")
        Traceback (most recent call last):
        ...
        mobilebert_kit.errors.ConfigError: t.tsv: class names 'pos' (class 0) and 'Pos' (class 1) differ only in case, so an app shows one name for two classes; write each class one way
    """
    where = where or (lambda i: f"class {i}")
    names = list(names)
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise error(f"{what}: {where(i)} is {type(name).__name__} {str(name)[:40]!r}, not a string; "
                        "write each class name as a string")
        if "\n" in name or "\r" in name:
            # labels.txt holds a name a line, in the model directory and packed for the app alike.
            raise error(f"{what}: {where(i)} ({name[:40]!r}) holds a line break, which labels.txt (one name a line) "
                        "cannot hold; rename the class")
        if not name.strip() or len(name) > MAX_NAME_CHARS:
            size = "empty" if not name.strip() else f"{len(name):,} characters long (at most {MAX_NAME_CHARS:,})"
            raise error(f"{what}: {where(i)} is {size}; give each class a short name")
    if classes is not None and len(names) != classes:
        raise error(f"{what} names {len(names)} class(es) and the model's head has {classes}; give one name per "
                    "output column, in order (or pass the model the names were written for)")
    first = {}
    for i, name in enumerate(names):
        j = first.setdefault(look_alike_key(name), i)
        if j != i:  # !r escapes what does not print ('neg\u200b')
            raise error(f"{what}: class names {names[j]!r:.60} ({where(j)}) and {name!r:.60} ({where(i)}) "
                        f"{how_alike(names[j], name)}, "
                        "so an app shows one name for two classes; write each class one way")
    return names


def names_of_id2label(id2label, what, error=ConfigError):
    """The class names of a Hugging Face ``id2label`` in id order, checked by :func:`check_class_names`.

    Keys are read as transformers reads them (``int(key)``: ``0``, ``"0"``), and must cover ``0 .. n-1`` once.

    Example:
        >>> names_of_id2label({"1": "pos", "0": "neg"}, "config.json")
        ['neg', 'pos']
    """
    if not isinstance(id2label, dict):
        raise error(f"{what}: id2label must be an object mapping class ids to names, not {type(id2label).__name__}; "
                    "fix the config")
    ids = {}
    for key in id2label:
        text = str(key).strip()
        if isinstance(key, bool) or not (text.isascii() and text.isdigit()):
            raise error(f"{what}: id2label key {str(key)[:40]!r} is no class id (0, 1, ...); fix the config")
        if int(text) in ids:
            raise error(f"{what}: id2label names class {int(text)} twice ({ids[int(text)]!r} and {key!r}); "
                        "fix the config")
        ids[int(text)] = key
    if sorted(ids) != list(range(len(ids))):
        gap = next(i for i in range(len(ids) + 1) if i not in ids)
        raise error(f"{what}: id2label has {len(ids)} class(es) but no class {gap}; its ids must be 0 .. "
                    f"{len(ids) - 1}: fix the config")
    return check_class_names([id2label[ids[i]] for i in range(len(ids))], f"{what} id2label", error=error)
