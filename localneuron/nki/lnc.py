"""The physical cores of one logical NeuronCore (kernel[2]): they run together and meet at sendrecv and
core_barrier.

Each core's instance of the kernel runs on its own thread, but only one runs at a time: a core keeps
running until it must wait for the other (a message not yet sent, a barrier not yet reached) or
finishes, then hands over. The run is therefore deterministic, the cores share HBM tensors without
races, and their cycle-model timelines share one clock. A core that waits for something the other
core never provides (it finished, failed, or waits too) is a deadlock the simulator reports by name
instead of hanging.
"""
import threading

from .errors import NkiUsageError


class CoreFailed(Exception):
    """The other core of the launch raised; this core stops too (its own error is the other's)."""


class LncGroup:
    def __init__(self, runs):
        self.runs = runs
        self.size = len(runs)
        self._cond = threading.Condition()
        self._turn = 0
        self._done = [False] * self.size
        self._waiting = [None] * self.size     # what a core waits for (text), None while it runs
        self._progress = 0                     # bumped whenever a core posts something another may wait for
        self._error = None
        self._mail = {}                        # (sender, receiver, pipe) -> [payload, ...] in send order
        self._arrivals = {}                    # (cores, generation) -> {rank: payload}
        self._barrier_generation = {}          # (rank, cores) -> barriers this rank passed
        for run in runs:
            run.lnc_group = self

    # --- running ---------------------------------------------------------------------------------
    def run(self, body):
        """Run body() on every core (each under its KernelRun); return the results by rank."""
        results = [None] * self.size
        threads = [threading.Thread(target=self._core, args=(rank, body, results), name=f"nki-core-{rank}",
                                    daemon=True) for rank in range(self.size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self._error is not None:
            raise self._error
        return results

    def _core(self, rank, body, results):
        with self._cond:
            while self._turn != rank:
                self._cond.wait()
        try:
            with self.runs[rank].active():
                results[rank] = body()
        except CoreFailed:
            pass
        except BaseException as error:   # noqa: BLE001  (handed to the launching thread, re-raised there)
            with self._cond:
                if self._error is None:
                    self._error = error
        finally:
            with self._cond:
                self._done[rank] = True
                self._hand_over(rank)

    def _hand_over(self, rank):
        """Give the turn to the next core that has not finished (called with the lock held)."""
        for step in range(1, self.size + 1):
            other = (rank + step) % self.size
            if not self._done[other]:
                self._turn = other
                break
        self._cond.notify_all()

    def wait_until(self, rank, ready, what):
        """Block core `rank` until ready() holds, letting the other cores run meanwhile."""
        with self._cond:
            seen = None
            while not ready():
                if self._error is not None:
                    raise CoreFailed()
                others = [r for r in range(self.size) if r != rank]
                if all(self._done[r] for r in others):
                    raise NkiUsageError(f"core {rank} waits for {what}, but the other core finished without it; "
                                        f"both cores of kernel[{self.size}] must make the matching calls")
                stalled = (self._progress, tuple(self._waiting))
                if seen == stalled and all(self._waiting[r] is not None or self._done[r] for r in others):
                    blocked = "; ".join(f"core {r} waits for {self._waiting[r]}" for r in others if self._waiting[r])
                    raise NkiUsageError(f"deadlock between the cores of kernel[{self.size}]: core {rank} waits for "
                                        f"{what}; {blocked}")
                seen = stalled
                self._waiting[rank] = what
                self._hand_over(rank)
                while self._turn != rank:
                    self._cond.wait()
                self._waiting[rank] = None

    # --- what cores exchange ---------------------------------------------------------------------
    def send(self, sender, receiver, pipe, payload):
        with self._cond:
            self._mail.setdefault((sender, receiver, pipe), []).append(payload)
            self._progress += 1

    def receive(self, receiver, sender, pipe):
        key = (sender, receiver, pipe)
        self.wait_until(receiver, lambda: bool(self._mail.get(key)),
                        f"sendrecv data from core {sender} on pipe {pipe}")
        with self._cond:
            return self._mail[key].pop(0)

    def barrier(self, rank, cores, payload):
        """Wait until every core in `cores` reached its matching barrier; return their payloads by rank."""
        generation = self._barrier_generation.get((rank, cores), 0)
        self._barrier_generation[(rank, cores)] = generation + 1
        key = (cores, generation)
        with self._cond:
            self._arrivals.setdefault(key, {})[rank] = payload
            self._progress += 1
        self.wait_until(rank, lambda: len(self._arrivals[key]) == len(cores),
                        f"core_barrier over cores {list(cores)} (barrier #{generation + 1})")
        return dict(self._arrivals[key])
