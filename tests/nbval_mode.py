"""Which outputs this machine reproduces: prints `exact` or `portable` for the Makefile,
and on stderr one line saying which and why.

Exact mode compares every cell's output with the stored one; portable mode compares the
cells tagged `nbval-check-output` (exact outputs) and runs the others, whose claims the
check cells assert. NBVAL_MODE=exact|portable decides outright; SEQLIB_SEED other than 0,
or a GPU (SEQLIB_DEVICE=cuda), means portable; otherwise a probe decides: a training run
of a few seconds, with a convolution, a recurrence, matrix products, layer norm, softmax
and Adam, whose final weights must be those stored in PROBE (their sha256, bit for bit).

Exact mode holds on the processor the stored outputs were made on (PROBE names it): another
processor, Intel or AMD, may round the same kernels differently, and the probe then finds
other weights. `python tests/nbval_mode.py --store` runs the probe and stores its result and
the processor's name (run it with the kernels pinned, on the machine that executes the
stored outputs, right after `make execute`).
"""

import hashlib
import json
import os
import pathlib
import sys

PROBE = pathlib.Path(__file__).with_name("nbval_probe.json")
MODES = ("exact", "portable")


def probe_run() -> tuple[float, str]:
    """Forty Adam steps of a tiny classifier on fixed random data: (last loss, sha256 of
    the final weights)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(256, 1, 12, 12, generator=generator)
    sequences = torch.randn(256, 10, 16, generator=generator)
    labels = torch.randint(0, 50, (256,), generator=generator)
    conv = nn.Conv2d(1, 4, 3)
    rnn = nn.GRU(16, 64, batch_first=True)
    head = nn.Sequential(nn.Linear(4 * 10 * 10 + 64, 256), nn.LayerNorm(256), nn.ReLU(),
                         nn.Linear(256, 50))
    parameters = [*conv.parameters(), *rnn.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=1e-3)
    for _ in range(40):
        _, h = rnn(sequences)
        features = torch.cat([torch.tanh(conv(images)).flatten(1), h[0]], dim=1)
        loss = nn.functional.cross_entropy(head(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weights = b"".join(p.detach().numpy().tobytes() for p in parameters)
    return loss.item(), hashlib.sha256(weights).hexdigest()


def decide(environ=os.environ) -> tuple[str, str]:
    """(mode, why)."""
    from seqlib.pages.kernels import processor, settings
    from seqlib.pages.seeds import seed_offset

    asked = environ.get("NBVAL_MODE", "").strip()
    seed = seed_offset()
    device = environ.get("SEQLIB_DEVICE", "").strip()
    if asked and asked not in MODES:
        raise SystemExit(f"NBVAL_MODE must be 'exact' or 'portable' (or unset), got {asked!r}")
    if asked == "exact" and seed:
        raise SystemExit(f"NBVAL_MODE=exact asks for the stored digits, which SEQLIB_SEED={seed} "
                         "cannot give (they were trained with SEQLIB_SEED=0): unset one of them")
    if asked:
        return asked, f"NBVAL_MODE={asked} asks for it"
    if seed:
        return "portable", f"SEQLIB_SEED={seed} trains every model from other random numbers"
    if device.startswith("cuda"):
        return "portable", f"SEQLIB_DEVICE={device}: a GPU's kernels round differently"
    loss, digest = probe_run()
    stored = json.loads(PROBE.read_text())
    shown = ", ".join(f"{k}={v or 'unset'}" for k, v in settings().items())
    if digest == stored["sha256"]:
        return "exact", f"the probe's training run gave the stored weights bit for bit ({shown})"
    return "portable", (f"the probe's training run ended at loss {loss:.9f}, the stored one at "
                        f"{stored['loss']:.9f}: this machine's kernels round differently "
                        f"from those of the stored outputs' processor, {stored['processor']} "
                        f"(here: {processor()}; {shown})")


def main() -> None:
    if sys.argv[1:] == ["--store"]:
        from seqlib.pages.kernels import processor

        loss, digest = probe_run()
        PROBE.write_text(json.dumps({"loss": loss, "sha256": digest, "processor": processor()},
                                    indent=1) + "\n")
        print(f"stored the probe's result in {PROBE.name}: loss {loss:.9f}", file=sys.stderr)
        return
    mode, why = decide()
    what = "every cell compared" if mode == "exact" else "exact cells compared, the rest run"
    print(f"nbval: {mode} mode ({what}): {why}", file=sys.stderr)
    print(mode)


if __name__ == "__main__":
    main()
