"""The order variants run in, round after round, so that no variant always runs right after the same other
one: the slot after a variant pays for what it left behind (measured in eager_overhead.py: the variant timed
right after eager CPU came out 6-10% slower), and rotating one order keeps every predecessor fixed. Williams'
design: over len(variants) rounds (an even count; odd counts add the reversed rows), every variant follows
every other variant equally often, and each holds every slot once."""


def balanced_orders(variants: tuple) -> list[tuple]:
    n = len(variants)
    first = [0]
    for k in range(1, n):  # 0, 1, n-1, 2, n-2, ...
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    rows = [tuple(variants[(i + r) % n] for i in first) for r in range(n)]
    return rows if n % 2 == 0 else rows + [tuple(reversed(row)) for row in rows]


def order_of_round(variants: tuple, round_: int) -> tuple:
    orders = balanced_orders(variants)
    return orders[round_ % len(orders)]
