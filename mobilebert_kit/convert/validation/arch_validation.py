"""A file's outputs on a phone's CPU architecture, emulated, compared with the x86-64 run and the Keras model.

``mbk validate FILE --arch arm64`` (and ``mbk export --check-arch arm64``, before the file is written) runs
the file on the runtime's aarch64 build (``artifacts.emulated_runner``) on the validation inputs. Each output
is compared twice, both judged by the mode's thresholds (``convert.validation.compare.check_values``):

- aarch64 against x86-64: the same file, the same runtime version, other kernels. A float file's outputs
  differ by the order of summation (FMA, the kernels' tiling); an int8 file's by the integer kernels'
  rounding and requantization, which XNNPACK and KleidiAI write per instruction set;
- aarch64 against the Keras model: what the x86 validation already asks of the x86 run.

What it cannot show: any timing (emulated instructions cost nothing like real ones), and how the silicon
differs from QEMU's model of the architecture.
"""

from dataclasses import asdict, dataclass, field

from mobilebert_kit.artifacts.emulated_runner import EmulatedRunner
from mobilebert_kit.convert.validation.compare import check_values, compare


@dataclass
class ArchComparison:
    """The emulated run's agreement, per output, with the x86-64 run and with the Keras model.

    Args:
        arch (str): ``--arch``.
        cpu (str): the emulated CPU (``--cpu``).
        runtime (str): what ran (package, version, kernels, emulator).
        outputs (list[dict]): per output: ``name``, ``vs_x86`` and ``vs_reference`` (each an
            :class:`~mobilebert_kit.convert.validation.compare.OutputMetrics` as a dict: ``cosine_min``, ``cosine``,
            ``max_abs_error``, ``snr_db``, ...).
        failures (list[OutputValueError]): the thresholds either comparison missed.
    """

    arch: str
    cpu: str
    runtime: str
    outputs: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def to_dict(self):
        return {"arch": self.arch, "cpu": self.cpu, "runtime": self.runtime, "outputs": self.outputs,
                "failures": [str(f) for f in self.failures],
                "note": "numerics only: timing under emulation means nothing"}

    def format_text(self):
        lines = [f"  on {self.arch} ({self.cpu}, emulated: {self.runtime}):"]
        for row in self.outputs:
            x86, ref = row["vs_x86"], row["vs_reference"]
            lines.append(f"    {row['name']:<20} vs x86-64: cos min {x86['cosine_min']:.6f}  max|err| "
                         f"{x86['max_abs_error']:.3e}   vs Keras: cos {ref['cosine']:.6f} (min {ref['cosine_min']:.6f})"
                         f"  SNR {ref['snr_db']:6.1f} dB")
        return lines


def compare_on_arch(runner, host_outputs, reference_outputs, inputs, token_outputs, logit_outputs, thresholds,
                    arch, cpu=None, say=None):
    """Runs ``runner``'s file on ``arch`` (emulated) and compares each output with x86-64 and Keras.

    ``host_outputs`` are the file's on ``inputs`` here, ``reference_outputs`` the Keras model's; the rest as
    :func:`~mobilebert_kit.convert.validation.compare.validate_outputs` takes them. Returns the ArchComparison
    with its failures (not raised).
    """
    emulated = EmulatedRunner(runner, arch, cpu, say=say)
    outputs = emulated.run(inputs.arrays)
    mask = inputs.arrays["attention_mask"]
    comparison = ArchComparison(emulated.arch.name, emulated.cpu.name, emulated.runtime)
    where = f"on {emulated.arch.name} ({emulated.cpu.name})"
    for name in runner.output_names:
        if name not in outputs or name not in host_outputs or name not in reference_outputs:
            continue
        token_mask = mask if name in token_outputs else None
        logits = logit_outputs.get(name, False)
        vs_x86 = compare(f"{name} {where} vs x86-64", outputs[name], host_outputs[name], token_mask, logits)
        vs_ref = compare(f"{name} {where} vs Keras", outputs[name], reference_outputs[name], token_mask, logits)
        comparison.outputs.append({"name": name, "vs_x86": asdict(vs_x86), "vs_reference": asdict(vs_ref)})
        comparison.failures += check_values(vs_x86, thresholds) + check_values(vs_ref, thresholds)
    return comparison
