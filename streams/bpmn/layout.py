"""Grid cells to diagram coordinates, and sequence flows routed between the nodes.

Every node sits in the middle of its grid cell, so the lines between cells
(the "gutters") are free of shapes.  A flow between neighbours on one row,
or one above the other, is a straight line; any other flow leaves its source
by the right, top or bottom, runs along the gutters and enters its target by
the left, top or bottom.  The route is a shortest path over the gutter grid
(Dijkstra) that pays for each bend and, dearly, for running along a stretch
another flow already uses: lines never cross a shape, and seldom merge.

An event's or a gateway's name hangs under it, unless a flow leaves or enters
it there: then the name moves beside that flow (below right, below left) or
above, to the first place no line crosses and no other name or shape
covers, so that every name can be read where the console draws it.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from streams.bpmn.graph import Flow, Graph, Node

__all__ = ["Bounds", "Layout", "lay_out", "size_of"]

COL_W = 150  # a task is 100 wide: 50 px of gutter between neighbours
ROW_H = 120  # a task is 80 high, an event's label hangs ~50 px under its centre
MARGIN_X, MARGIN_Y = 120, 60
BEND_COST = 60.0  # a detour of 60 px is worth one bend less
SHARED_COST = 400.0  # running on top of another flow: worse than most detours
SIDE_COST = 150.0  # a second flow on the same side of a shape: its labels would collide
TASK = (100, 80)
EVENT = (36, 36)
GATEWAY = (50, 50)
LABEL_W, LABEL_H = 90, 27
LABEL_GAP = 6  # a name beside a line: this far from it

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Bounds:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass(slots=True)
class Layout:
    shapes: dict[str, Bounds]
    labels: dict[str, Bounds]  # events' and gateways' external labels
    edges: dict[str, list[Point]]  # flow id -> waypoints
    edge_labels: dict[str, Bounds]


def size_of(node: Node) -> tuple[int, int]:
    if node.kind.endswith("Gateway"):
        return GATEWAY
    if node.kind.endswith("Event"):
        return EVENT
    return TASK


def lay_out(g: Graph) -> Layout:
    min_col = min(n.cell[0] for n in g.nodes.values())
    min_row = min(n.cell[1] for n in g.nodes.values())

    def cell_of(node: Node) -> tuple[int, int]:
        return node.cell[0] - min_col, node.cell[1] - min_row

    shapes: dict[str, Bounds] = {}
    for node in g.nodes.values():
        col, row = cell_of(node)
        w, h = size_of(node)
        cx, cy = MARGIN_X + col * COL_W + COL_W / 2, MARGIN_Y + row * ROW_H + ROW_H / 2
        shapes[node.id] = Bounds(cx - w / 2, cy - h / 2, w, h)
    cells = {cell_of(n): n.id for n in g.nodes.values()}
    router = _Router()
    edges: dict[str, list[Point]] = {}
    # Straight flows first: they take the sides they need, the routed ones go around.
    for flow in g.flows:
        s, t = g.nodes[flow.source], g.nodes[flow.target]
        points = _straight(cell_of(s), cell_of(t), shapes[s.id], shapes[t.id], cells)
        if points is not None:
            edges[flow.id] = points
            router.sides.add((s.id, _side(shapes[s.id], points[0])))
    for flow in g.flows:
        if flow.id not in edges:
            s, t = g.nodes[flow.source], g.nodes[flow.target]
            edges[flow.id] = router.route(s.id, cell_of(s), shapes[s.id], t.id, cell_of(t),
                                          shapes[t.id])
    edge_labels = {f.id: _flow_label(f, edges[f.id]) for f in g.flows if f.name}
    labels = _place_labels(g, shapes, edges, edge_labels)
    return Layout(shapes, labels, {f.id: edges[f.id] for f in g.flows}, edge_labels)


def _label_spots(b: Bounds) -> list[Bounds]:
    """Where an event's or a gateway's name may go, best first: under it, under and
    beside the line that leaves it downwards (right, then left), above it."""
    below, above = b.y + b.h + 5, b.y - 5 - LABEL_H
    return [Bounds(b.cx - LABEL_W / 2, below, LABEL_W, LABEL_H),
            Bounds(b.cx + LABEL_GAP, below, LABEL_W, LABEL_H),
            Bounds(b.cx - LABEL_GAP - LABEL_W, below, LABEL_W, LABEL_H),
            Bounds(b.cx - LABEL_W / 2, above, LABEL_W, LABEL_H),
            Bounds(b.cx + LABEL_GAP, above, LABEL_W, LABEL_H),
            Bounds(b.cx - LABEL_GAP - LABEL_W, above, LABEL_W, LABEL_H)]


def _place_labels(g: Graph, shapes: dict[str, Bounds], edges: dict[str, list[Point]],
                  edge_labels: dict[str, Bounds]) -> dict[str, Bounds]:
    """Each named event's and gateway's label, at its first spot that no flow crosses
    and no shape or label already placed covers (under it when none is free)."""
    segments = [seg for points in edges.values() for seg in itertools.pairwise(points)]
    taken = [*shapes.values(), *edge_labels.values()]
    labels: dict[str, Bounds] = {}
    for node in g.nodes.values():
        if not node.name or not (node.kind.endswith("Event") or node.kind.endswith("Gateway")):
            continue
        spots = _label_spots(shapes[node.id])
        labels[node.id] = next(
            (spot for spot in spots
             if not any(_crosses(a, b, spot) for a, b in segments)
             and not any(_overlap(spot, other) for other in taken)), spots[0])
        taken.append(labels[node.id])
    return labels


def _crosses(a: Point, b: Point, box: Bounds) -> bool:
    """Whether the straight stretch a-b runs through the inside of `box`."""
    lo_x, hi_x = sorted((a[0], b[0]))
    lo_y, hi_y = sorted((a[1], b[1]))
    return lo_x < box.x + box.w and hi_x > box.x and lo_y < box.y + box.h and hi_y > box.y


def _overlap(a: Bounds, b: Bounds) -> bool:
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


def _straight(sc: tuple[int, int], tc: tuple[int, int], sb: Bounds, tb: Bounds,
              cells: dict[tuple[int, int], str]) -> list[Point] | None:
    """A straight line when nothing stands between source and target."""
    if sc[1] == tc[1] and tc[0] > sc[0] and \
            all((c, sc[1]) not in cells for c in range(sc[0] + 1, tc[0])):
        return [(sb.x + sb.w, sb.cy), (tb.x, tb.cy)]
    if sc[0] == tc[0] and tc[1] == sc[1] + 1:
        return [(sb.cx, sb.y + sb.h), (tb.cx, tb.y)]
    if sc[0] == tc[0] and tc[1] == sc[1] - 1:
        return [(sb.cx, sb.y), (tb.cx, tb.y + tb.h)]
    return None


def _flow_label(flow: Flow, points: list[Point]) -> Bounds:
    (x0, y0), (x1, y1) = points[0], points[1]
    width = max(30, 7 * len(flow.name))
    if y0 == y1:  # leaves sideways: the label sits above the first stretch
        return Bounds(min(x0, x1) + 6, y0 - 20, width, 14)
    if y1 > y0:  # leaves downwards: below the shape's own label
        return Bounds(x0 + 6, y0 + LABEL_H + 8, width, 14)
    return Bounds(x0 + 6, y0 - 20, width, 14)


def _gx(col: int) -> float:
    """x of the gutter left of column `col`."""
    return MARGIN_X + col * COL_W


def _gy(row: int) -> float:
    return MARGIN_Y + row * ROW_H


class _Router:
    """Shortest paths along the gutters; remembers the stretches used so far."""

    def __init__(self) -> None:
        # Stretches of gutter taken so far, with the (source, target) of each flow on them.
        self.used: dict[tuple[Point, Point], set[tuple[str, str]]] = {}
        self.sides: set[tuple[str, str]] = set()  # (node id, side) a flow already leaves by
        self.counter = itertools.count()

    def route(self, source: str, sc: tuple[int, int], sb: Bounds, target: str,
              tc: tuple[int, int], tb: Bounds) -> list[Point]:
        lo_c, hi_c = min(sc[0], tc[0]) - 1, max(sc[0], tc[0]) + 2
        lo_r, hi_r = min(sc[1], tc[1]) - 1, max(sc[1], tc[1]) + 2
        # Where a flow may leave the source (first point on a gutter, stub from the shape).
        exits = [((_gx(sc[0] + 1), sb.cy), (sb.x + sb.w, sb.cy), 0.0),
                 ((sb.cx, _gy(sc[1] + 1)), (sb.cx, sb.y + sb.h), 20.0),
                 ((sb.cx, _gy(sc[1])), (sb.cx, sb.y), 20.0)]
        entries = [((_gx(tc[0]), tb.cy), (tb.x, tb.cy), 0.0),
                   ((tb.cx, _gy(tc[1])), (tb.cx, tb.y), 20.0),
                   ((tb.cx, _gy(tc[1] + 1)), (tb.cx, tb.y + tb.h), 20.0)]
        xs = {_gx(c) for c in range(lo_c, hi_c + 1)}
        ys = {_gy(r) for r in range(lo_r, hi_r + 1)}
        extra = [p for p, _, _ in exits + entries]
        # Points on each gutter line: the crossings plus the exits and entries on it.
        vertical: dict[float, set[float]] = {x: set(ys) for x in xs}
        horizontal: dict[float, set[float]] = {y: set(xs) for y in ys}
        for x, y in extra:
            if x in vertical:
                vertical[x].add(y)
            if y in horizontal:
                horizontal[y].add(x)
        neighbours: dict[Point, list[Point]] = {}

        def link(a: Point, b: Point) -> None:
            neighbours.setdefault(a, []).append(b)
            neighbours.setdefault(b, []).append(a)

        for x, on in vertical.items():
            line = sorted(on)
            for a, b in itertools.pairwise(line):
                link((x, a), (x, b))
        for y, on in horizontal.items():
            line = sorted(on)
            for a, b in itertools.pairwise(line):
                link((a, y), (b, y))
        exits = [(p, stub, cost + (SIDE_COST if (source, _side(sb, stub)) in self.sides else 0))
                 for p, stub, cost in exits]
        goal = {p: (stub, cost) for p, stub, cost in entries}
        # Dijkstra over (point, direction of arrival): a change of direction is a bend.
        queue: list[tuple[float, int, Point, str, tuple[Point, ...]]] = []
        for p, stub, cost in exits:
            if p in neighbours:
                heading = "h" if stub[1] == p[1] else "v"
                heapq.heappush(queue, (cost, next(self.counter), p, heading, (stub, p)))
        seen: set[tuple[Point, str]] = set()
        while queue:
            cost, _, p, heading, path = heapq.heappop(queue)
            if heading == "end":
                self.sides.add((source, _side(sb, path[0])))
                return self._done(list(path), source, target)
            if (p, heading) in seen:
                continue
            seen.add((p, heading))
            if p in goal:
                stub, entry_cost = goal[p]
                arriving = "h" if stub[1] == p[1] else "v"
                c = cost + entry_cost + (BEND_COST if arriving != heading else 0.0)
                heapq.heappush(queue, (c, next(self.counter), p, "end", (*path, stub)))
            for q in neighbours.get(p, ()):
                step = "h" if q[1] == p[1] else "v"
                c = cost + abs(q[0] - p[0]) + abs(q[1] - p[1])
                if step != heading:
                    c += BEND_COST
                # Flows from one source (or to one target) may share a trunk; others not.
                if any(s != source and t != target for s, t in self.used.get(_key(p, q), ())):
                    c += SHARED_COST
                heapq.heappush(queue, (c, next(self.counter), q, step, (*path, q)))
        # Unreachable in a grid without walls; a plain elbow all the same.
        return [(sb.x + sb.w, sb.cy), (tb.cx, sb.cy), (tb.cx, tb.y)]

    def _done(self, points: list[Point], source: str, target: str) -> list[Point]:
        for a, b in itertools.pairwise(points[1:-1]):
            self.used.setdefault(_key(a, b), set()).add((source, target))
        return _simplify(points)


def _side(b: Bounds, p: Point) -> str:
    """Which side of the shape a flow's end point is on."""
    if p[0] >= b.x + b.w:
        return "right"
    if p[0] <= b.x:
        return "left"
    return "top" if p[1] <= b.y else "bottom"


def _key(a: Point, b: Point) -> tuple[Point, Point]:
    return (a, b) if a <= b else (b, a)


def _simplify(points: list[Point]) -> list[Point]:
    """Drop the points in the middle of a straight stretch (and repeated points)."""
    out: list[Point] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2:
            (ax, ay), (bx, by) = out[-2], out[-1]
            if (ax == bx == p[0]) or (ay == by == p[1]):
                out[-1] = p
                continue
        out.append(p)
    return out
