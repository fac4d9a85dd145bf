"""The agent's loop: wait for the node's pointer, check, fetch, apply, report.

1. Wait on the node's pointer at the bundle server (a blocking request: it returns when ``up``
   published a new one, or after ``wait_s``). Unreachable server: back off (1 s doubling to a
   minute, with jitter) and try the next server.
2. Verify it (signed for this node, a generation not below the last one seen).
3. Check: the bundle, stage and facts the node last applied, and the node's digest of what the
   roles manage (``digest.py``) against the one recorded after that apply. All equal and not forced:
   nothing to do; the node reports ``ok`` for the new generation with nothing changed.
4. Otherwise fetch the layers it lacks, after a random delay of up to ``jitter_s`` so that a
   thousand nodes told at once do not fetch at once, check their digests, unpack them, report
   ``applying`` and run the configure stage (``apply.py``).
5. Report ``ok`` (with the number of changed tasks) or ``failed`` (the task, its message and what
   the node says caused it) in the node's Slurm ``Extra`` field (``clusterctl.slurm.applied``),
   retried until Slurm takes it; a failed apply is retried after a backoff (a minute doubling to
   half an hour) or at the next pointer, whichever comes first.

Each step is a function the caller gives (``Steps``): the node's agent runs them for real
(``__main__.py``); the scale simulation runs this same loop with the apply replaced by a sleep.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bounded import BoundsError, json_document
from ..slurm.applied import APPLYING, FAILED, OK, Applied
from .apply import ApplyResult, Layout
from .fetch import FetchError
from .layers import LayerError, prune, unpack
from .pointer import Pointer, PointerError, verify

LOG = logging.getLogger("clusterctl.agent")
WAIT_S = 55
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
RETRY_MIN_S = 60.0
RETRY_MAX_S = 1800.0
FETCH_TRIES = 5


@dataclass
class Steps:
    """What the loop does at each step (real on a node, partly simulated in benchmarks/scale_sim.py).

    Attributes:
        pointer: ``(known_etag, wait_s) -> (etag, data) | None`` from the current server; raises FetchError.
        layer: ``(digest, archive_path) -> bytes`` downloads one layer; raises FetchError.
        apply: ``(pointer, layout) -> ApplyResult`` runs the configure stage.
        digest: The node's digest of what the roles manage ("" when it cannot be computed).
        report: Tells Slurm ``Applied``; returns whether it was taken.
        cause: ``Failure -> lines`` what the node says caused a failed task.
        next_server: Switch to the next bundle server after a failure (no-op with one).
        unpack: ``(archive, directory) -> directory`` unpacks a fetched layer.
    """

    pointer: Callable[[str, int], tuple[str, bytes] | None]
    layer: Callable[[str, Path], int]
    apply: Callable[[Pointer, Layout], ApplyResult]
    digest: Callable[[], str]
    report: Callable[[Applied], bool]
    cause: Callable[[Any], tuple[str, ...]] = lambda failure: ()
    next_server: Callable[[], None] = lambda: None
    unpack: Callable[[Path, Path], Path] = unpack


@dataclass
class Settings:
    """Who this node is, where its state lives, how patient it is."""

    cluster: str
    node: str
    key: bytes
    state_dir: Path
    jitter_s: float = 10.0
    wait_s: int = WAIT_S
    layers_dir: Path | None = None

    @property
    def layers(self) -> Path:
        """Where layers are kept (shared by the agents of one machine in the simulation)."""
        return self.layers_dir or self.state_dir / "layers"


@dataclass
class State:
    """What the agent keeps between runs (``agent.json`` in its state directory)."""

    seen: int = 0
    bundle: str = ""
    stage: str = ""
    identity: str = ""
    digest: str = ""
    generation: int = 0
    layers: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> State:
        """The saved state; a fresh one when there is none or it cannot be read."""
        try:
            data = json_document(path.read_text(encoding="utf-8")[:65536], "agent state")
        except (OSError, UnicodeDecodeError, BoundsError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        state = cls()
        for name in ("seen", "generation"):
            value = data.get(name)
            setattr(state, name, value if isinstance(value, int) and not isinstance(value, bool) else 0)
        for name in ("bundle", "stage", "identity", "digest"):
            value = data.get(name)
            setattr(state, name, value if isinstance(value, str) else "")
        layers = data.get("layers")
        state.layers = [x for x in layers if isinstance(x, str)] if isinstance(layers, list) else []
        return state

    def save(self, path: Path) -> None:
        """Write it atomically."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(self.__dict__, sort_keys=True))
        temporary.replace(path)


class Agent:
    """One node's agent (see the module docstring)."""

    def __init__(self, settings: Settings, steps: Steps, *, rng: random.Random | None = None) -> None:
        """Create the agent; nothing runs until :meth:`run` or :meth:`handle`."""
        self.settings = settings
        self.steps = steps
        self.rng = rng or random.Random()
        self.state_path = settings.state_dir / "agent.json"
        self.state = State.load(self.state_path)
        self.etag = ""
        self.pending: Applied | None = None
        self.retry_at = 0.0
        self.retry_s = RETRY_MIN_S
        self.last: Pointer | None = None
        self.stop = threading.Event()

    # --- reporting ---
    def _report(self, applied: Applied) -> None:
        self.pending = applied
        self._flush()

    def _flush(self) -> None:
        if self.pending is not None and self.steps.report(self.pending):
            self.pending = None

    # --- one pointer ---
    def up_to_date(self, pointer: Pointer) -> bool:
        """The node has this bundle at this stage and nothing the roles manage changed since."""
        state = self.state
        if pointer.force or state.identity != pointer.identity or not state.digest:
            return False
        if pointer.one_time and state.generation != pointer.generation:
            return False
        return self.steps.digest() == state.digest

    def _layers(self, pointer: Pointer) -> Layout:
        root = self.settings.layers
        paths: dict[str, Path] = {}
        waited = False
        for name, digest in pointer.layers:
            target = root / digest
            if not target.is_dir():
                archive = root / f"{digest}.tar.gz"
                if not archive.is_file():
                    if not waited:
                        # Spread the fetches of the nodes told at the same moment.
                        self._sleep(self.rng.uniform(0, self.settings.jitter_s))
                        waited = True
                    self._fetch(digest, archive)
                self.steps.unpack(archive, target)
                archive.unlink(missing_ok=True)
            paths[name] = target
        run = self.settings.state_dir / "run"
        return Layout(engine=paths["engine"], roles=paths["roles"], files=paths["files"], run=run)

    def _fetch(self, digest: str, archive: Path) -> None:
        delay = BACKOFF_MIN_S
        for attempt in range(FETCH_TRIES):
            try:
                self.steps.layer(digest, archive)
                return
            except FetchError as exc:
                if attempt == FETCH_TRIES - 1:
                    raise
                LOG.warning("layer %s: %s; trying again", digest[:12], exc)
                self.steps.next_server()
                self._sleep(self.rng.uniform(0, delay))
                delay = min(delay * 2, BACKOFF_MAX_S)

    def handle(self, pointer: Pointer) -> Applied:
        """Check, and apply when needed, what ``pointer`` says; report and return the outcome."""
        self.last = pointer
        self.state.seen = max(self.state.seen, pointer.generation)
        self.state.save(self.state_path)
        short = pointer.bundle[:16]
        if self.up_to_date(pointer):
            LOG.info("bundle %s (generation %d): nothing changed on this node", short, pointer.generation)
            applied = Applied(pointer.generation, short, OK, 0, int(time.time()))
            self._report(applied)
            self.retry_at = 0.0
            return applied
        try:
            layout = self._layers(pointer)
        except (FetchError, LayerError) as exc:
            return self._failed(pointer, "", f"cannot fetch the bundle: {exc}", ())
        self._report(Applied(pointer.generation, short, APPLYING, 0, int(time.time())))
        LOG.info("bundle %s (generation %d): applying (stage %s)", short, pointer.generation, pointer.stage)
        outcome = self.steps.apply(pointer, layout)
        if not outcome.ok:
            first = outcome.failures[0] if outcome.failures else None
            cause = self.steps.cause(first) if first is not None else ()
            return self._failed(
                pointer, first.task if first else "", (first.message if first else outcome.error) or "failed", cause
            )
        self.state.bundle, self.state.stage, self.state.generation = pointer.bundle, pointer.stage, pointer.generation
        self.state.identity = pointer.identity
        self.state.digest = self.steps.digest()
        self.state.layers = [digest for _, digest in pointer.layers]
        self.state.save(self.state_path)
        prune(self.settings.layers, self.state.layers)
        LOG.info(
            "applied bundle %s (generation %d): %d task(s), %d changed, in %.0f s",
            pointer.bundle,
            pointer.generation,
            outcome.tasks,
            outcome.changed,
            outcome.seconds,
        )
        applied = Applied(pointer.generation, short, OK, outcome.changed, int(time.time()))
        self._report(applied)
        self.retry_at, self.retry_s = 0.0, RETRY_MIN_S
        return applied

    def _failed(self, pointer: Pointer, task: str, message: str, cause: tuple[str, ...]) -> Applied:
        LOG.error(
            "bundle %s (generation %d) failed%s: %s%s",
            pointer.bundle[:16],
            pointer.generation,
            f" in task '{task}'" if task else "",
            message.strip().splitlines()[0][:300] if message.strip() else "",
            "".join(f"\n  {line}" for line in cause),
        )
        applied = Applied(pointer.generation, pointer.bundle[:16], FAILED, 0, int(time.time()), task, message, cause)
        self._report(applied)
        self.retry_at = time.monotonic() + self.rng.uniform(self.retry_s / 2, self.retry_s)
        self.retry_s = min(self.retry_s * 2, RETRY_MAX_S)
        return applied

    # --- the loop ---
    def _sleep(self, seconds: float) -> None:
        self.stop.wait(max(0.0, seconds))

    def step(self) -> None:
        """One round: wait for the pointer (or a due retry), then handle it."""
        self._flush()
        wait = self.settings.wait_s
        if self.pending is not None:
            wait = min(wait, 5)
        if self.retry_at:
            wait = max(0, min(wait, int(self.retry_at - time.monotonic()) + 1))
        got = self.steps.pointer(self.etag, wait)
        if got is None:
            if self.retry_at and time.monotonic() >= self.retry_at and self.last is not None:
                self.handle(self.last)
            return
        etag, data = got
        self.etag = etag
        try:
            pointer = verify(data, self.settings.key, cluster=self.settings.cluster, node=self.settings.node)
        except PointerError as exc:
            LOG.error("refused the pointer the server gave: %s", exc)
            return
        if pointer.generation < self.state.seen:
            LOG.error(
                "refused the pointer the server gave: generation %d is older than %d, already seen",
                pointer.generation,
                self.state.seen,
            )
            return
        if self.last is not None and pointer == self.last and not self.retry_at:
            return
        self.handle(pointer)

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """Run until :attr:`stop` is set or ``until()`` says so (checked after each round)."""
        delay = BACKOFF_MIN_S
        while not self.stop.is_set() and not until():
            try:
                self.step()
                delay = BACKOFF_MIN_S
            except FetchError as exc:
                LOG.warning("bundle server: %s; trying again", exc)
                self.steps.next_server()
                self._sleep(self.rng.uniform(delay / 2, delay))
                delay = min(delay * 2, BACKOFF_MAX_S)
