"""StageProgress: a rich progress bar per training stage, with the loss terms."""

import time


class StageProgress:
    """Shows one stage's progress on ``console``: a live ``rich`` bar on a terminal, else a plain line every
    ``plain_every`` steps; ``start`` counts the steps a resumed stage has done.

    Example:
        >>> with StageProgress(console, "layer_0", total=100) as bar:
        ...     bar.update(1, {"loss": 0.5})
    """

    def __init__(self, console, name, total, start=0, plain_every=100):
        self.console = console
        self.name = name
        self.total = int(total)
        self.done = int(start)
        self.plain_every = max(int(plain_every), 1)
        self._progress = None
        self._task = None
        self._start_time = None
        self._start_step = int(start)
        self._terms = ""

    def __enter__(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._start_time = time.perf_counter()
        if self.console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[terms]}"),
                console=self.console,
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.name, total=self.total, completed=self.done, rate="", terms="")
        return self

    def steps_per_second(self):
        elapsed = time.perf_counter() - (self._start_time or time.perf_counter())
        return (self.done - self._start_step) / elapsed if elapsed > 0 else 0.0

    def update(self, steps, terms=None):
        """Advances by ``steps``; ``terms`` (``{name: float}``) replaces the shown loss terms."""
        self.done += steps
        if terms is not None:
            self._terms = " ".join(f"{k}={v:.4g}" for k, v in terms.items())
        rate = f"{self.steps_per_second():.2f} step/s"
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, rate=rate, terms=self._terms)
        elif terms is not None and (self.done % self.plain_every == 0 or self.done == self.total):
            self.console.print(f"{self.name} {self.done}/{self.total} {rate} {self.eta()} {self._terms}",
                               highlight=False, soft_wrap=True)

    def eta(self):
        """``"eta 1:02:03"``: the time the stage's remaining steps take at the rate so far ("eta -" before one)."""
        rate = self.steps_per_second()
        if rate <= 0:
            return "eta -"
        seconds = int(round(max(self.total - self.done, 0) / rate))
        return f"eta {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False
