"""The stage plan of a distillation run: what each stage optimises and which variables train.

Progressive knowledge transfer (Sun et al., 2020, Sec. 3.3 and Fig. 2) has
one stage per layer, bottom to top: stage l minimises L_PKT of layer l
(Eq. 7) and trains layer l; the layers below are frozen or tuned at a small
learning rate. Pre-training distillation (Sec. 3.4) then trains everything.

Variables are selected by *scope*: the top-level sublayer names of the
student (``embeddings``, ``transformer_layer_{i}``, ``pooler``, ``mlm``,
``nsp``), never by position.
"""

import dataclasses

LAYER_TRANSFER = "layer_transfer"
PRETRAINING_DISTILLATION = "pretraining_distillation"
ALL_SCOPES = "*"


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a distillation run (``name``: ``layer_3``, ``all_layers``, ``pretraining_distillation``).

    ``layers`` are those whose transfer losses are averaged (layer transfer only); ``train`` the scopes trained
    at the full learning rate (``("*",)``: all variables), ``tune`` those at ``tune_multiplier`` times it.
    """

    name: str
    kind: str
    steps: int
    layers: tuple = ()
    train: tuple = ()
    tune: tuple = ()
    tune_multiplier: float = 0.0


def block_scope(index):
    return f"transformer_layer_{index}"


def plan_stages(config, num_layers, embeddings_from_teacher):
    """Returns the list of :class:`Stage` for ``config`` (a DistillConfig) and ``num_layers`` student layers.

    ``embeddings_from_teacher``: every embedding weight was copied from the teacher; they are then kept like
    a lower layer (frozen or tuned at the multiplier) during transfer. Otherwise they train with layer 0
    (a random embedding frozen for the whole transfer would be useless).

    Example:
        >>> [s.name for s in plan_stages(DistillConfig(layer_steps=10, pd_steps=5), 2, True)]
        ['layer_0', 'layer_1', 'pretraining_distillation']
    """
    multiplier = float(config.lower_layer_lr_multiplier)
    if config.schedule == "progressive":
        transfers = [(f"layer_{layer}", int(config.layer_steps), (layer,)) for layer in range(num_layers)]
    elif config.schedule == "end_to_end":
        transfers = [("all_layers", int(config.layer_steps) * num_layers, tuple(range(num_layers)))]
    else:
        transfers = []
    stages = []
    for name, steps, layers in transfers:
        train = [block_scope(i) for i in layers]
        lower = [block_scope(i) for i in range(min(layers, default=0))]
        (lower if embeddings_from_teacher or min(layers, default=0) > 0 else train).insert(0, "embeddings")
        stages.append(Stage(name=name, kind=LAYER_TRANSFER, steps=steps, layers=layers, train=tuple(train),
                            tune=tuple(lower) if multiplier > 0 else (), tune_multiplier=multiplier))
    if config.pd_steps > 0:
        stages.append(
            Stage(
                name="pretraining_distillation",
                kind=PRETRAINING_DISTILLATION,
                steps=int(config.pd_steps),
                train=(ALL_SCOPES,),
            )
        )
    return stages


def scope_of(path):
    """The top-level scope of a weight path from ``named_weights`` (``encoder/transformer_layer_2/...`` -> ``transformer_layer_2``)."""
    parts = path.split("/")
    return parts[1] if parts[0] == "encoder" and len(parts) > 1 else parts[0]


def stage_variables(stage, named):
    """Splits ``{path: variable}`` into the stage's ``(trained, tuned)`` lists of ``(path, variable)``.

    Variables not listed in either stay frozen for the stage.
    """
    trained, tuned = [], []
    for path, var in named.items():
        scope = scope_of(path)
        if ALL_SCOPES in stage.train or scope in stage.train:
            trained.append((path, var))
        elif scope in stage.tune:
            tuned.append((path, var))
    return trained, tuned
