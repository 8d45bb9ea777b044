"""Where the Ray executor's next run goes: the bookkeeping of its runners (long-lived processes
on one node each), pure and without Ray.

A runner holds its GPUs for its life (a process cannot change the GPUs it sees once it has
used one), so a runner is of a GPU count; the cores are the run's, counted while it runs
(the executor keeps this count: a runner asks Ray for none). A run goes, in this order of
preference: to an idle runner of its GPU count on a node with the cores free (nothing to
start); to a new runner on a node with room; to a new runner on a node where idle runners
holding GPUs are ended to make room. Else it waits for a run to end. The runs are placed in
the grid's order (the first waiting run goes first), so the order the grid asks for,
interleaved or shuffled against drift, is the order they start in.

With `exclusive` (a run alone on its host, for memory-contention measurements) a node takes
a run only when none of its runners is busy, its runner holds all of the node's GPUs (one
runner a node, whatever each run asks for) and a node given a run keeps no other runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

EPS = 1e-9
Shape = tuple[float, float]  # (cores, GPUs) a runner holds
ShapeOn = Callable[[float], Shape]  # a run's shape on a node of that many cores


@dataclass
class Slot:
    key: int
    node: str
    gpus: float  # GPUs the runner holds for its life
    run: int | None = None  # the run it works on; None: idle
    cpus: float = 0.0  # the cores of that run


@dataclass
class Placement:
    node: str
    shape: Shape  # the run's
    gpus: float  # the runner's
    slot: Slot | None = None  # an idle runner to reuse; None: start one
    end: list[Slot] = field(default_factory=list)  # idle runners to end first


def _fits(room: Shape, shape: Shape) -> bool:
    return shape[0] <= room[0] + EPS and shape[1] <= room[1] + EPS


class Pool:
    def __init__(self, nodes: dict[str, dict[str, float]], exclusive: bool = False) -> None:
        self.nodes = {n: (r.get("CPU", 0.0), r.get("GPU", 0.0)) for n, r in nodes.items()}
        self.exclusive = exclusive
        self.slots: list[Slot] = []
        self._keys = 0

    def on(self, node: str) -> list[Slot]:
        return [s for s in self.slots if s.node == node]

    def room(self, node: str, ending: list[Slot] | None = None) -> Shape:
        """Cores no run uses and GPUs no runner holds on `node` (with `ending` gone)."""
        cpus, gpus = self.nodes[node]
        held = [s for s in self.on(node) if s not in (ending or [])]
        return cpus - sum(s.cpus for s in held if s.run is not None), gpus - sum(s.gpus for s in held)

    def busy(self, node: str) -> bool:
        return any(s.run is not None for s in self.on(node))

    def feasible(self, shape_on: ShapeOn) -> bool:
        """Could the run go anywhere, were the cluster empty?"""
        return any(_fits(total, shape_on(total[0])) for total in self.nodes.values())

    def place(self, shape_on: ShapeOn) -> Placement | None:
        open_nodes = [n for n in self.nodes if not (self.exclusive and self.busy(n))]
        for slot in self.slots:  # an idle runner of the right GPU count
            if slot.run is not None or slot.node not in open_nodes:
                continue
            shape = shape_on(self.nodes[slot.node][0])
            if (slot.gpus == self._runner_gpus(slot.node, shape) and shape[1] <= slot.gpus + EPS
                    and shape[0] <= self.room(slot.node)[0] + EPS):
                others = [s for s in self.on(slot.node) if s is not slot] if self.exclusive else []
                return Placement(slot.node, shape, slot.gpus, slot, others)
        for make_room in (False, True):  # a new runner: where there is room, else where it can be made
            for node in open_nodes:
                shape = shape_on(self.nodes[node][0])
                gpus = self._runner_gpus(node, shape)
                if not _fits(self.nodes[node], shape):
                    continue
                idle = [s for s in self.on(node) if s.run is None]
                ending = idle if (self.exclusive or make_room) else []
                if not _fits(self.room(node, ending), (shape[0], gpus)):
                    continue
                if make_room and not self.exclusive:  # end no more idle runners than it takes
                    ending = []
                    for slot in sorted(idle, key=lambda s: -s.gpus):
                        if _fits(self.room(node, ending), (shape[0], gpus)):
                            break
                        ending.append(slot)
                return Placement(node, shape, gpus, None, ending)
        return None

    def _runner_gpus(self, node: str, shape: Shape) -> float:
        return self.nodes[node][1] if self.exclusive else shape[1]

    def take(self, placement: Placement, run: int) -> Slot:
        """Carry out `placement` for `run` (the runners it ends are dropped here; the caller
        ends their processes) and return the slot the run goes to."""
        for ended in placement.end:
            self.drop(ended)
        slot = placement.slot
        if slot is None:
            self._keys += 1
            slot = Slot(self._keys, placement.node, placement.gpus)
            self.slots.append(slot)
        slot.run, slot.cpus = run, placement.shape[0]
        return slot

    def release(self, slot: Slot) -> None:
        slot.run, slot.cpus = None, 0.0

    def drop(self, slot: Slot) -> None:
        if slot in self.slots:
            self.slots.remove(slot)
