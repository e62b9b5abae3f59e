"""A small deterministic two-layer grid router for gen_pcb.py (KiCad 6 pcbnew objects).

The board is a grid (0.25 mm). Every piece of copper (pad, track, via) is a primitive with its net;
for each clearance radius the router keeps a count of primitives whose inflated shape covers each
cell, so a cell is free for a track of net N when the count minus N's own count is zero. A* runs
over both layers (8 directions, vias between layers, the bottom layer dearer so the bottom ground
pour stays whole). Nets are routed widest first, each as a tree grown from pad to pad; no rip-up:
a connection that finds no path is reported; DRC (zero unconnected) is the proof of completeness.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable

import numpy as np
import pcbnew

MM = 1_000_000
EPS = 0.05  # extra distance over the routing clearance: grid steps pass pad corners
F, B = 0, 1
BOTTOM_COST = 3.0
VIA_COST = 24.0


class Grid:
    def __init__(
        self, board: pcbnew.BOARD, w: float, h: float, pitch: float, clearance: float
    ) -> None:
        self.board, self.p, self.clearance = board, pitch, clearance
        self.nx, self.ny = int(w / pitch) + 1, int(h / pitch) + 1
        self.w, self.h = w, h
        self.count: dict[float, np.ndarray] = {}  # radius -> int16 [layer, y, x]
        self.prims: list[tuple[int, int, str, tuple[float, ...]]] = []  # (net, layers, kind, geom)

    def cell(self, x: float, y: float) -> tuple[int, int]:
        return round(x / self.p), round(y / self.p)

    def xy(self, ix: int, iy: int) -> tuple[float, float]:
        return ix * self.p, iy * self.p

    def coverage(
        self, kind: str, geom: tuple[float, ...], r: float
    ) -> tuple[slice, slice, np.ndarray]:
        """cells whose centre lies closer than r to the shape (rect, seg or circle)"""
        if kind == "rect":
            cx, cy, hx, hy = geom
            x0, x1, y0, y1 = cx - hx - r, cx + hx + r, cy - hy - r, cy + hy + r
        elif kind == "seg":
            ax, ay, bx, by, hw = geom
            x0, x1 = min(ax, bx) - hw - r, max(ax, bx) + hw + r
            y0, y1 = min(ay, by) - hw - r, max(ay, by) + hw + r
        else:
            cx, cy, rad = geom
            x0, x1, y0, y1 = cx - rad - r, cx + rad + r, cy - rad - r, cy + rad + r
        i0, i1 = max(0, math.floor(x0 / self.p)), min(self.nx - 1, math.ceil(x1 / self.p))
        j0, j1 = max(0, math.floor(y0 / self.p)), min(self.ny - 1, math.ceil(y1 / self.p))
        xs = np.arange(i0, i1 + 1) * self.p
        ys = np.arange(j0, j1 + 1) * self.p
        gx, gy = np.meshgrid(xs, ys)
        if kind == "rect":
            dx = np.maximum(np.abs(gx - cx) - hx, 0)
            dy = np.maximum(np.abs(gy - cy) - hy, 0)
            d = np.hypot(dx, dy)
        elif kind == "seg":
            vx, vy = bx - ax, by - ay
            ll = vx * vx + vy * vy
            t = (
                np.clip(((gx - ax) * vx + (gy - ay) * vy) / ll, 0, 1)
                if ll > 0
                else np.zeros_like(gx)
            )
            d = np.hypot(gx - ax - t * vx, gy - ay - t * vy) - hw
        else:
            d = np.hypot(gx - cx, gy - cy) - rad
        return slice(j0, j1 + 1), slice(i0, i1 + 1), d < r

    def radius_for(self, half_width: float) -> float:
        return round(half_width + self.clearance + EPS, 3)

    def ensure(self, r: float) -> np.ndarray:
        if r not in self.count:
            arr = np.zeros((2, self.ny, self.nx), dtype=np.int16)
            for _net, layers, kind, geom in self.prims:
                self._stamp(arr, layers, kind, geom, r, 1)
            self.count[r] = arr
        return self.count[r]

    def _stamp(
        self, arr: np.ndarray, layers: int, kind: str, geom: tuple[float, ...], r: float, sign: int
    ) -> None:
        sy, sx, m = self.coverage(kind, geom, r)
        for layer in (F, B):
            if layers & (1 << layer):
                arr[layer, sy, sx] += sign * m.astype(np.int16)

    def add(self, net: int, layers: int, kind: str, geom: tuple[float, ...]) -> None:
        self.prims.append((net, layers, kind, geom))
        for r, arr in self.count.items():
            self._stamp(arr, layers, kind, geom, r, 1)

    def own(self, net: int, r: float) -> np.ndarray:
        arr = np.zeros((2, self.ny, self.nx), dtype=np.int16)
        for n, layers, kind, geom in self.prims:
            if n == net:
                self._stamp(arr, layers, kind, geom, r, 1)
        return arr

    def free(self, net: int, r: float) -> np.ndarray:
        """bool [layer, y, x]: no foreign copper closer than r"""
        return (self.ensure(r) - self.own(net, r)) == 0


def pdist(a: pcbnew.PAD, b: pcbnew.PAD) -> float:
    pa, pb = a.GetPosition(), b.GetPosition()
    return math.hypot(pa.x - pb.x, pa.y - pb.y)


def pad_layers(pad: pcbnew.PAD) -> int:
    ls = pad.GetLayerSet()
    return (1 if ls.Contains(pcbnew.F_Cu) else 0) | (2 if ls.Contains(pcbnew.B_Cu) else 0)


def pad_rect(pad: pcbnew.PAD) -> tuple[float, float, float, float]:
    bb = pad.GetBoundingBox()
    return (
        (bb.GetLeft() + bb.GetRight()) / 2 / MM,
        (bb.GetTop() + bb.GetBottom()) / 2 / MM,
        bb.GetWidth() / 2 / MM,
        bb.GetHeight() / 2 / MM,
    )


class Router:
    def __init__(
        self,
        board: pcbnew.BOARD,
        grid: Grid,
        width_of: Callable[[str], float],
        big_pad: float,
        via_signal: tuple[float, float],
        via_power: tuple[float, float],
        power_nets: set[str],
    ) -> None:
        self.board, self.g, self.width_of = board, grid, width_of
        self.big_pad, self.via_signal, self.via_power, self.power_nets = (
            big_pad,
            via_signal,
            via_power,
            power_nets,
        )
        self.tracks: list[pcbnew.PCB_TRACK] = []
        self.vias = 0
        self.narrowed: list[str] = []
        self.grounded: set[tuple[str, str]] = set()
        for fp in board.GetFootprints():
            for pad in fp.Pads():
                layers = pad_layers(pad)
                if pad.GetAttribute() == pcbnew.PAD_ATTRIB_NPTH:
                    layers = 3
                if layers:
                    grid.add(pad.GetNetCode() or -1, layers, "rect", pad_rect(pad))
        w, h = grid.w, grid.h
        for geom in (
            (-5, h / 2, 5.1, h),
            (w + 5, h / 2, 5.1, h),
            (w / 2, -5, w, 5.1),
            (w / 2, h + 5, w, 5.1),
        ):
            grid.add(-1, 3, "rect", geom)

    # --- one connection -------------------------------------------------------------------
    def _pad_cells(self, pad: pcbnew.PAD, free: np.ndarray) -> list[int]:
        cx, cy, hx, hy = pad_rect(pad)
        g = self.g
        out = []
        for layer in (F, B):
            if not pad_layers(pad) & (1 << layer):
                continue
            for iy in range(math.ceil((cy - hy) / g.p), math.floor((cy + hy) / g.p) + 1):
                for ix in range(math.ceil((cx - hx) / g.p), math.floor((cx + hx) / g.p) + 1):
                    inside = pad.HitTest(pcbnew.wxPoint(int(ix * g.p * MM), int(iy * g.p * MM)))
                    if 0 <= ix < g.nx and 0 <= iy < g.ny and free[layer, iy, ix] and inside:
                        out.append((layer * g.ny + iy) * g.nx + ix)
        return out

    def _astar(
        self,
        starts: list[int],
        goals: set[int],
        target: tuple[float, float],
        free: bytes,
        via_ok: bytes,
        limit: int,
    ) -> list[int] | None:
        g = self.g
        nx, ny = g.nx, g.ny
        plane = nx * ny
        tx, ty = target[0] / g.p, target[1] / g.p
        dist: dict[int, float] = {}
        prev: dict[int, int] = {}
        heap: list[tuple[float, float, int]] = []
        for s in starts:
            dist[s] = 0.0
            prev[s] = -1
            x, y = s % nx, (s % plane) // nx
            heapq.heappush(heap, (math.hypot(x - tx, y - ty), 0.0, s))
        steps = (
            (1, 0, 1.0),
            (-1, 0, 1.0),
            (0, 1, 1.0),
            (0, -1, 1.0),
            (1, 1, 1.414),
            (1, -1, 1.414),
            (-1, 1, 1.414),
            (-1, -1, 1.414),
        )
        n = 0
        while heap:
            _f, d, c = heapq.heappop(heap)
            if d > dist.get(c, 1e18):
                continue
            if c in goals:
                path = [c]
                while prev[path[-1]] != -1:
                    path.append(prev[path[-1]])
                return path[::-1]
            n += 1
            if n > limit:
                return None
            layer, rem = divmod(c, plane)
            y, x = divmod(rem, nx)
            mul = 1.0 if layer == F else BOTTOM_COST
            base = layer * plane
            for dx, dy, cost in steps:
                x2, y2 = x + dx, y + dy
                if not (0 <= x2 < nx and 0 <= y2 < ny):
                    continue
                c2 = base + y2 * nx + x2
                if not free[c2]:
                    continue
                if dx and dy and not (free[base + y * nx + x2] and free[base + y2 * nx + x]):
                    continue
                nd = d + cost * mul
                if nd < dist.get(c2, 1e18):
                    dist[c2] = nd
                    prev[c2] = c
                    heapq.heappush(heap, (nd + math.hypot(x2 - tx, y2 - ty), nd, c2))
            if via_ok[rem]:
                c2 = (1 - layer) * plane + rem
                nd = d + VIA_COST
                if free[c2] and nd < dist.get(c2, 1e18):
                    dist[c2] = nd
                    prev[c2] = c
                    heapq.heappush(heap, (nd + math.hypot(x - tx, y - ty), nd, c2))
        return None

    def _commit(
        self, path: list[int], net: pcbnew.NETINFO_ITEM, width: float, via: tuple[float, float]
    ) -> list[int]:
        """tracks and vias along the path; returns the centreline cells (the tree grows by them)"""
        g = self.g
        plane = g.nx * g.ny
        code = net.GetNetCode()

        def pt(c: int) -> tuple[int, float, float]:
            layer, rem = divmod(c, plane)
            y, x = divmod(rem, g.nx)
            return layer, x * g.p, y * g.p

        runs: list[list[int]] = [[path[0]]]
        for a, b in itertools.pairwise(path):
            la, lb = a // plane, b // plane
            if la != lb:
                _, x, y = pt(a)
                v = pcbnew.PCB_VIA(self.board)
                v.SetPosition(pcbnew.wxPointMM(x, y))
                v.SetWidth(int(via[0] * MM))
                v.SetDrill(int(via[1] * MM))
                v.SetNet(net)
                self.board.Add(v)
                self.vias += 1
                g.add(code, 3, "circle", (x, y, via[0] / 2))
                runs.append([b])
                continue
            run = runs[-1]
            if len(run) >= 2:
                d1 = run[-1] % plane - run[-2] % plane
                d2 = b % plane - a % plane
                if d1 != d2:
                    runs.append([a, b])
                    continue
            run.append(b)
        for run in runs:
            if len(run) < 2:
                continue
            la, xa, ya = pt(run[0])
            _, xb, yb = pt(run[-1])
            t = pcbnew.PCB_TRACK(self.board)
            t.SetStart(pcbnew.wxPointMM(xa, ya))
            t.SetEnd(pcbnew.wxPointMM(xb, yb))
            t.SetWidth(int(width * MM))
            t.SetLayer(pcbnew.F_Cu if la == F else pcbnew.B_Cu)
            t.SetNet(net)
            self.board.Add(t)
            self.tracks.append(t)
            g.add(code, 1 << la, "seg", (xa, ya, xb, yb, width / 2))
        return path

    def connect(
        self,
        net: pcbnew.NETINFO_ITEM,
        src: pcbnew.PAD,
        tree_pads: list[pcbnew.PAD],
        tree_cells: set[int],
        width: float,
    ) -> bool:
        name = net.GetNetname()
        via = self.via_power if name in self.power_nets else self.via_signal
        code = net.GetNetCode()
        g = self.g
        free = g.free(code, g.radius_for(width / 2))
        vfree = g.free(code, g.radius_for(via[0] / 2))
        via_ok = (vfree[F] & vfree[B]).tobytes()
        starts = self._pad_cells(src, free)
        goals = set(tree_cells)
        for p in tree_pads:
            goals.update(self._pad_cells(p, free))
        if not starts or not goals:
            return False
        near = min(tree_pads, key=lambda p: pdist(p, src))
        tx, ty = near.GetPosition().x / MM, near.GetPosition().y / MM
        path = self._astar(starts, goals, (tx, ty), free.tobytes(), via_ok, 2_000_000)
        if path is None:
            return False
        tree_cells.update(self._commit(path, net, width, via))
        return True

    def route_net(self, name: str) -> list[str]:
        net = self.board.FindNet(name)
        pads = [p for p in self.board.GetPads() if p.GetNetname() == name]
        width = self.width_of(name)

        def big(p: pcbnew.PAD) -> bool:
            s = p.GetSize()
            return min(s.x, s.y) / MM >= self.big_pad

        ordered = sorted(
            pads,
            key=lambda p: (
                not big(p),
                -min(p.GetSize().x, p.GetSize().y),
                p.GetParent().GetReference(),
                p.GetNumber(),
            ),
        )
        tree = [ordered[0]]
        cells: set[int] = set()
        failed = []
        rest = ordered[1:]
        while rest:
            bigs = [p for p in rest if big(p)] if width > 0.5 else rest
            pool = bigs or rest
            src = min(pool, key=lambda p: min(pdist(p, t) for t in tree))
            rest.remove(src)
            w = width if big(src) else min(width, 0.4 if width > 0.5 else width)
            widths = sorted(
                {w, min(w, 1.0), min(w, 0.4), 0.2}, reverse=True
            )  # 0.2: 0.5 mm pitch pads
            for i, wi in enumerate(widths):
                if self.connect(net, src, tree, cells, wi):
                    if i:
                        self.narrowed.append(
                            f"{name}:{src.GetParent().GetReference()}.{src.GetNumber()}@{wi}"
                        )
                    break
            else:
                failed.append(f"{name}:{src.GetParent().GetReference()}.{src.GetNumber()}")
            tree.append(src)
        return failed

    def route_all(self, names: list[str]) -> list[str]:
        def key(n: str) -> tuple[float, float]:
            pads = [p for p in self.board.GetPads() if p.GetNetname() == n]
            xs = [p.GetPosition().x for p in pads]
            ys = [p.GetPosition().y for p in pads]
            return (-self.width_of(n), (max(xs) - min(xs) + max(ys) - min(ys)) / MM)

        failed: list[str] = []
        for n in sorted(names, key=key):
            failed += self.route_net(n)
        return failed

    def ground_vias(self, name: str, only: set[tuple[str, str]] | None = None) -> list[str]:
        """a via (into the bottom pour) next to every SMD pad of the ground net"""
        net = self.board.FindNet(name)
        code = net.GetNetCode()
        g = self.g
        plane = g.nx * g.ny
        failed = []
        for pad in sorted(
            self.board.GetPads(), key=lambda p: (p.GetParent().GetReference(), p.GetNumber())
        ):
            key = (pad.GetParent().GetReference(), pad.GetNumber())
            if pad.GetNetname() != name or pad_layers(pad) != 1 or key in self.grounded:
                continue
            if only is not None and key not in only:
                continue
            self.grounded.add(key)
            cx, cy, hx, hy = pad_rect(pad)
            path = None
            for width in (0.5, 0.2):
                free = g.free(code, g.radius_for(width / 2))
                vfree = g.free(code, g.radius_for(self.via_signal[0] / 2))
                # via spots: free on both layers, outside the pad itself
                ok = vfree[F] & vfree[B]
                starts = self._pad_cells(pad, free)
                goals = set()
                r = int(6.0 / g.p)
                ic, jc = g.cell(cx, cy)
                for j in range(max(0, jc - r), min(g.ny, jc + r + 1)):
                    for i in range(max(0, ic - r), min(g.nx, ic + r + 1)):
                        x, y = g.xy(i, j)
                        if ok[j, i] and (abs(x - cx) > hx + 0.4 or abs(y - cy) > hy + 0.4):
                            goals.add(j * g.nx + i)
                if starts:
                    path = self._astar(
                        starts,
                        goals,
                        (cx, cy),
                        free[F].tobytes() + bytes(plane),
                        bytes(plane),
                        60_000,
                    )
                if path is not None:
                    break
            if path is None:
                # last resort: a track to the nearest ground pad that reaches both layers
                anchors = [
                    p for p in self.board.GetPads() if p.GetNetname() == name and pad_layers(p) == 3
                ]
                anchors.sort(key=lambda p: pdist(p, pad))
                if not any(self.connect(net, pad, [a], set(), 0.3) for a in anchors[:3]):
                    failed.append(f"{name}:{pad.GetParent().GetReference()}.{pad.GetNumber()}")
                continue
            self._commit(path, net, width, self.via_signal)
            _, rem = divmod(path[-1], plane)
            y, x = divmod(rem, g.nx)
            v = pcbnew.PCB_VIA(self.board)
            v.SetPosition(pcbnew.wxPointMM(x * g.p, y * g.p))
            v.SetWidth(int(self.via_signal[0] * MM))
            v.SetDrill(int(self.via_signal[1] * MM))
            v.SetNet(net)
            self.board.Add(v)
            self.vias += 1
            g.add(code, 3, "circle", (x * g.p, y * g.p, self.via_signal[0] / 2))
        return failed
