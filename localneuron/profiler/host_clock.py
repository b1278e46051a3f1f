"""The simulated host clock: when the host would have issued each piece of device work on Trainium.

Here the host runs the device's arithmetic itself, so its wall clock between two launches includes
the time it spent computing, copying and moving collective bytes for the simulated device; on
Trainium the device does that work and the host only issues it. The simulated host clock is the wall
clock with those intervals taken out (the host spends no time on them), so the device timeline gets
the shape it would have on Trainium: a core's queue fills wherever the host's own work (Python,
the framework, compiles) is quicker than the device's estimated work, and collectives overlap the
compute issued after them. Where the host waits for the device (a copy back to the host), it resumes
no earlier than the device finished.

Times are Kineto's (nanoseconds since the epoch); the clocks agree at the first event of a trace.
"""
from bisect import bisect_right


class HostClock:
    def __init__(self):
        # (wall_ns, simulated_ns) where the mapping changes: after each point the simulated clock runs
        # with the wall clock, except between a point and the next with the same simulated time (frozen:
        # the host was doing device work)
        self._walls: list[int] = []
        self._simulated: list[int] = []
        self._skipped_until = 0

    def simulated(self, wall_ns: int) -> int:
        i = bisect_right(self._walls, wall_ns) - 1
        if i < 0:
            return wall_ns
        frozen = i + 1 < len(self._walls) and self._simulated[i + 1] == self._simulated[i]
        return self._simulated[i] + (0 if frozen else wall_ns - self._walls[i])

    def skip(self, start_ns: int, end_ns: int) -> None:
        """The host ran device work from start_ns to end_ns (wall): the simulated host spends no time on it.
        Calls come in order of start_ns; intervals may nest or overlap (work issued inside other work)."""
        if end_ns <= self._skipped_until:
            return
        frozen_at = self.simulated(max(start_ns, self._skipped_until))
        self._point(max(start_ns, self._skipped_until), frozen_at)
        self._point(end_ns, frozen_at)
        self._skipped_until = end_ns

    def wait_until(self, wall_ns: int, simulated_ns: int) -> None:
        """The host waited, until wall_ns, for the device to reach simulated_ns."""
        if simulated_ns > self.simulated(wall_ns):
            self._point(wall_ns, simulated_ns)
            self._skipped_until = max(self._skipped_until, wall_ns)

    def _point(self, wall_ns: int, simulated_ns: int) -> None:
        if self._walls and self._walls[-1] == wall_ns:  # the later change at the same instant wins
            self._simulated[-1] = simulated_ns
            return
        self._walls.append(wall_ns)
        self._simulated.append(simulated_ns)
